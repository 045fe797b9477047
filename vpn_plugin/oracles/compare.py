"""One checker for every oracle fixture of ``../shared/reference`` (README there).

A fixture holds an official code's weights, inputs and recorded outputs for one batch.
``meta.json``'s ``method`` names the method (``SCHEMA``, ``PDPP``, ``KEPP``, ``CEFITO``, ``S3D``);
a fixture without it is the ViterbiPlanNet authors'. Each method has a module with
``check_fixture(fixture: Path, meta: dict) -> (rows, header_ok)`` where ``rows`` are
``(array name, max abs diff, max rel diff, tolerance, ok)`` and ``header_ok`` covers what is
not an array (parameter counts, text files). ``tools/check_reference.py`` prints the table.

The rules (a correct implementation passes at any thread count, a wrong one fails):

* **Non-finite values.** A NaN or inf on one side only (recorded or recomputed) is a
  difference of ``inf`` and fails at any tolerance; non-finite entries at the same positions
  with the same values on both sides (``-inf`` log-probabilities of a Viterbi table) pass, and
  the finite entries are compared at their own scale (``compare``, ``same_nonfinite``). A
  tolerance is never infinite: a measurement that turns finite values into NaN gives a NaN
  tolerance, and ``within`` fails the row.
* **Scale.** A difference is divided by the scale of what is compared: the recorded array's
  max abs (``compare``, ``compare_file``), or for gradients the model's largest gradient
  (``compare_grads``): each part of a summary ``[norm, sum, first 64 entries]`` by the largest
  of that part over every array of the file. An array that is zero in exact arithmetic (the
  bias of a conv before a GroupNorm with one channel per group) then holds only round-off far
  below the scale, and a wrong gradient is still off by a fraction of the model's gradients.
  Base tolerances: 1e-4 outputs and losses (``OUTPUT_TOLERANCE``), 1e-3 gradients
  (``GRAD_TOLERANCE``).
* **Conditioning, measured.** Float32 round-off (a thread count changes the summation order)
  is amplified by ill-conditioned computations; e.g. a GroupNorm with one channel per group over
  3 time steps subtracts nearly equal numbers. The checker measures it instead of loosening
  tolerances: it reruns the computation with its float inputs multiplied by
  ``1 + PERTURBATION * noise`` (1e-6, about 10 float32 rounding units; ``PERTURBATION_SEEDS``
  draws) and takes the largest movement of each compared array, at the scale of the comparison.
  That array's tolerance becomes ``max(base, CONDITIONING_FACTOR * movement)`` and a line
  ``conditioning: ...`` says so. The factor 4 covers round-off inside the computation, which
  the input perturbation does not reproduce: on the PDPP fixture the official float32 recording
  is off a float64 recomputation by at most 0.48x the movement (a DDIM step) and two float32 runs
  (1 vs 2 threads) by at most 0.36x (``docs/design.md``).
* **Chains** (DDIM, DDPM: ``compare_chain``) are compared step by step: step i is fed the
  recorded state i and its network output and state i+1 are compared with the recorded ones,
  each step at its own measured tolerance (as above, the fed state perturbed; PDPP's U-Net
  amplifies a perturbation 1e2 to 1e5 times depending on the step), so the whole chain is
  checked even where it amplifies round-off. The free-running final state (the chain run from
  the recorded state 0) is judged only where the chain is well-conditioned: rerun from
  ``state0 * (1 + perturbation * noise)``; if the final state moves by more than the
  tolerance, a line says the chain is ill-conditioned (amplification factor) and its row is
  reported, not judged (``report`` in the tolerance column, listed under the table).
* **Argmax outputs** (``compare_argmax``, e.g. PDPP's ``ddim_actions``) are judged only where
  the recorded top-2 margin exceeds twice the float error the comparison allows for the scores
  (the scores' tolerance times their scale): there equal scores within that error have the
  same argmax. Elsewhere the difference is reported (counted in the line), never failed.

* **Optimiser steps** (``optimiser_step``): the update ``after - before`` at the recorded
  update's scale, each entry allowed the update's range over its gradient's measured
  uncertainty (AdamW's first step is a sign: a gradient that is round-off has none).
* **Replay** (``MEASURED``): what a check measured is kept per row; a rerun on a changed copy
  of the fixture judges at it and measures nothing (``sensitivity``: one weight per module
  moved by 0.05 shows what a widened tolerance still sees).

A checker: ``run = lambda **inputs: (outputs, grads)`` of the recorded batch;
``perturbed = perturbed_runs(run, inputs)``; ``compare_file(path, outputs, OUTPUT_TOLERANCE,
perturbed=[o for o, _ in perturbed])``, ``compare_grads(path, grads, GRAD_TOLERANCE,
perturbed=[g for _, g in perturbed])``, ``compare_chain(...)`` per sampling chain, and
``compare_argmax`` for an argmax outside a chain (``oracles/pdpp.py`` does all four).
"""
import hashlib
import importlib
import io
import math
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from vpn_plugin.errors import (REPO_ROOT, check_number, native_order, path_kind, read_json,
                               tool_command)

OUTPUT_TOLERANCE, GRAD_TOLERANCE = 1e-4, 1e-3
PERTURBATION = 1e-6            # relative perturbation of the inputs that measures conditioning
PERTURBATION_SEEDS = (1, 2, 3)  # one rerun per seed; the largest movement counts
CONDITIONING_FACTOR = 4.0      # tolerance >= this times the measured movement
REPORTED = math.inf            # the tolerance of a row that is reported, not judged
Row = Tuple[str, float, float, float, bool]
# meta.json ``method`` -> module with ``check_fixture``
CHECKERS = {
    'ViterbiPlanNet': 'vpn_plugin.oracles.authors',
    'SCHEMA': 'vpn_plugin.oracles.schema',
    'PDPP': 'vpn_plugin.oracles.pdpp',
    'CEFITO': 'vpn_plugin.oracles.cefito',
    'KEPP': 'vpn_plugin.oracles.kepp',
    'S3D': 'vpn_plugin.oracles.s3d',
}


# the files a fixture of each method holds that no other method's does (SCHEMA's are all
# shared): a meta.json copied from another fixture names a method the folder does not fit
FIXTURE_FILES = {
    'ViterbiPlanNet': ('authors_state_dict.npz',),
    'PDPP': ('head_state_dict.npz', 'head_grads.npz'),
    'CEFITO': ('train_step.npz', 'loader_annotations.json'),
    'KEPP': ('step_state_dict.npz', 'step_grads.npz'),
    'S3D': ('dict.npy',),
}


def check_fixture_files(fixture: Path, meta: dict, method: str) -> None:
    """A folder that holds none of the files of the method its meta.json names and holds
    those of another (a meta.json copied from another fixture) is refused, naming the method, the
    missing files and the method(s) whose files the folder holds; a ``component`` folder (a
    part of a fixture) is not concerned."""
    if meta.get('component'):
        return
    own = FIXTURE_FILES.get(method, ())
    missing = [name for name in own if not (fixture / name).is_file()]
    if not missing or len(missing) < len(own):  # some held: its checker names what lacks
        return
    fits = [other for other, names in FIXTURE_FILES.items()
            if other != method and all((fixture / name).is_file() for name in names)]
    if not fits:  # a fixture of its method with a file missing: the checker names it
        return
    held = f'its files are those of a {" / ".join(fits)} fixture'
    raise FileNotFoundError(f'{fixture / "meta.json"} names method={method!r}, but the folder '
                            f'has no {missing} (files of every {method} fixture); {held}: a '
                            'meta.json of another fixture? Give the fixture\'s own meta.json, '
                            f'or the {method} fixture folder')


def other_check(folder: Path) -> str:
    """The check that fits a folder of ../shared/reference that is not a model fixture (no
    meta.json), recognised by its files; '' when none is known."""
    folder = folder.resolve()
    if (folder / 'windows.json').is_file() and (folder / 'expected.npz').is_file():
        return ("it is the authors' data loader oracle: check the dataset against it with "
                f'{tool_command("check_authors_loader.py")} {folder}')
    if (folder / 'expected_frames_features.npy').is_file():
        return ('it holds feature-file layouts: read (and convert) them with '
                f'{tool_command("convert_features.py")} --src {folder} --dst /tmp/layouts; '
                f'the layout test: cd {REPO_ROOT} && python -m pytest tests/test_features.py')
    if (folder / 'sequence_completion.txt').is_file():
        return ("it holds the paper's prompts: prompts/paper/ is checked against them by "
                f'cd {REPO_ROOT} && python -m pytest tests/test_llm_prompting.py -k paper')
    return ''


def read_fixture_meta(fixture: Path) -> dict:
    path = Path(fixture) / 'meta.json'
    if path_kind(fixture) not in (None, 'a folder'):  # e.g. its meta.json given for the folder
        folder = Path(fixture).parent if Path(fixture).name == 'meta.json' else '...'
        raise NotADirectoryError(f'fixture {fixture} is {path_kind(fixture)}; expected the '
                                 f'fixture folder (the one holding meta.json: {folder})')
    if not path.is_file():
        other = other_check(Path(fixture)) if path_kind(fixture) == 'a folder' else ''
        if other:
            raise FileNotFoundError(f'{fixture}: no meta.json, so not a model fixture; {other}')
        raise FileNotFoundError(f'{path}: no meta.json; expected an oracle fixture folder of '
                                '../shared/reference (meta.json, inputs.npz, outputs.npz, ...)')
    meta = read_json(path, 'fixture meta')
    if not isinstance(meta, dict):
        raise ValueError(f'{path}: holds a {type(meta).__name__}; expected a JSON object of '
                         'the fixture\'s settings')
    return meta


def fixture_method(meta: dict, fixture: Path) -> str:
    method = meta.get('method', 'ViterbiPlanNet')
    if not isinstance(method, str) or method not in CHECKERS:  # ["KEPP"]: unhashable
        raise ValueError(f'{Path(fixture) / "meta.json"}: method={method!r} has no checker; '
                         f'expected one of {sorted(CHECKERS)}')
    return method


def check_fixture(fixture) -> Tuple[List[Row], bool, dict]:
    """Rows and header verdict of ``fixture`` for the method its meta names (inside
    ``replaying``: judged at the tolerances the last check measured, nothing measured)."""
    begin_check()
    fixture = Path(fixture)
    meta = read_fixture_meta(fixture)
    method = fixture_method(meta, fixture)
    check_fixture_files(fixture, meta, method)
    module = importlib.import_module(CHECKERS[method])
    rows, header_ok = module.check_fixture(fixture, meta)
    return rows, header_ok, meta


# ---------------------------------------------------------------- differences at a scale
def require_meta_fields(fixture: Path, meta: dict, fields: Sequence[str], method: str,
                        sizes: Sequence[str] = ()) -> dict:
    """``meta`` when it has every field of ``fields`` and each of ``sizes`` is an integer
    >= 1 (``"3"`` or ``true`` is no horizon), else one error naming the field."""
    missing = [field for field in fields if field not in meta]
    if missing:
        raise ValueError(f'{Path(fixture) / "meta.json"}: missing fields {missing}; a {method} '
                         f'fixture has {tuple(fields)}')
    for field in sizes:
        check_number(f'{Path(fixture) / "meta.json"}: {field}', meta[field], integer=True, low=1)
    return meta


def check_ids(path: Path, arrays: Mapping[str, np.ndarray], counts: Mapping[str, int]) -> None:
    """Each ``arrays[name]`` (when recorded) holds ids in ``0..counts[name] - 1``: a fixture's
    action or task id out of range is named, not met as a one-hot error inside torch."""
    for name, count in counts.items():
        ids = arrays.get(name)
        if ids is not None and ids.dtype.kind not in 'iu':
            recorded = getattr(arrays, 'dtypes', {}).get(name, ids.dtype)
            raise ValueError(f'{path}: {name} has dtype {recorded}; expected integer ids '
                             f'0..{count - 1}')
        if ids is not None and ids.size and not (ids.min() >= 0 and ids.max() < count):
            raise ValueError(f'{path}: {name} holds ids in [{ids.min()}, {ids.max()}]; expected '
                             f'0..{count - 1} (meta.json)')


def check_shapes(path: Path, arrays: Mapping[str, np.ndarray], expected: Mapping[str, tuple],
                 sizes: str) -> None:
    """Each ``arrays[name]`` has the shape ``expected[name]`` that meta.json's ``sizes`` (a
    text, e.g. 'batch=4, horizon=3') give: an edited header or array is refused, naming both,
    never checked at sizes the arrays do not have (nor met as a torch size error)."""
    for name, shape in expected.items():
        got = tuple(arrays[name].shape) if name in arrays else 'missing'
        if got != tuple(shape):
            raise ValueError(f'{path}: {name} has shape {got}; expected {tuple(shape)} from '
                             f'meta.json ({sizes})')


def set_fixture_sizes(model_cfg, sizes: Mapping[str, object]):
    """Write the fixture's ``sizes`` into ``model_cfg``, printing each that differs from the
    config (e.g. the 105-action CrossTask taxonomy); returns ``model_cfg``."""
    for key, value in sizes.items():
        if model_cfg.get(key) != value:
            print(f'  {key}: config {model_cfg.get(key)!r} -> fixture {value!r}')
            model_cfg[key] = value
    return model_cfg


def report_parameter_counts(cases, labels: Sequence[str]) -> bool:
    """One line per ``(name, our counts, official counts)`` of ``cases``, the counts in the
    order of ``labels`` (e.g. ``('U-Net', 'task classifier')``); True when every case agrees."""
    ok = True
    for name, ours, official in cases:
        good = tuple(ours) == tuple(official)
        ok &= good
        parts = ', '.join(f'{label} {mine:,} (official {theirs:,})'
                          for label, mine, theirs in zip(labels, ours, official))
        print(f'parameters {name}: {parts} {"ok" if good else "MISMATCH"}')
    return ok


def report_settings(checks: Mapping[str, bool]) -> bool:
    """One ``setting <name>: ok|MISMATCH`` line per check; True when every one holds."""
    for name, good in checks.items():
        print(f'setting {name}: {"ok" if good else "MISMATCH"}')
    return all(checks.values())


def build_registered(model_cfg, device=None, **default_args):
    """A copy of ``model_cfg`` built from MMAction2's MODELS on ``device`` (``'meta'`` to count
    parameters without allocating them)."""
    import copy
    from mmaction.registry import MODELS
    with torch.device(device or 'cpu'):
        return MODELS.build(copy.deepcopy(model_cfg), default_args=default_args or None)


def as_array(value) -> np.ndarray:
    """float64 numpy copy of an array or tensor."""
    if torch.is_tensor(value):
        value = value.detach().cpu().numpy()
    return np.asarray(value, np.float64)


def max_abs(value) -> float:
    """The largest |entry| among the FINITE entries of ``value`` (0.0 when there is none): the
    scale of a comparison. Non-finite entries are never a scale; ``compare`` requires them to
    sit at the same positions with the same values on both sides."""
    value = as_array(value)
    finite = value[np.isfinite(value)]
    return float(np.abs(finite).max()) if finite.size else 0.0


def relative(diff: float, scale: float) -> float:
    """``diff / scale``; ``inf`` for a non-finite difference or a zero scale under a non-zero
    difference."""
    if not math.isfinite(diff):
        return math.inf
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


def same_nonfinite(reference, value) -> bool:
    """True when the non-finite entries of ``reference`` and ``value`` (same shape) sit at the
    same positions with the same values (NaN at NaN, -inf at -inf: e.g. the log of a zero
    transition in both Viterbi tables); False for a NaN or inf on one side only."""
    reference, value = as_array(reference), as_array(value)
    odd_reference, odd_value = ~np.isfinite(reference), ~np.isfinite(value)
    return bool(np.array_equal(odd_reference, odd_value)
                and np.array_equal(reference[odd_reference], value[odd_value], equal_nan=True))


def compare(reference, value, scale: Optional[float] = None) -> Tuple[float, float]:
    """(max abs difference, max abs difference / scale) over the finite entries; the scale
    defaults to the max abs finite reference. A shape or a non-finite pattern that differs
    (``same_nonfinite``: a NaN or inf on one side only) is ``(inf, inf)``, which fails at any
    tolerance (``within``)."""
    reference, value = as_array(reference), as_array(value)
    if reference.shape != value.shape or not same_nonfinite(reference, value):
        return math.inf, math.inf
    finite = np.isfinite(reference)
    diff = max_abs(reference[finite] - value[finite])
    return diff, relative(diff, max_abs(reference) if scale is None else scale)


def within(rel: float, tolerance: float) -> bool:
    """The verdict of a judged row: a finite difference within a finite tolerance (a NaN or
    inf difference, or a tolerance made non-finite by a non-finite measurement, fails)."""
    return math.isfinite(rel) and math.isfinite(tolerance) and rel <= tolerance


def ratio(rel: float, tolerance: float) -> float:
    """``rel / tolerance``, ``inf`` where ``within`` could never hold."""
    if not (math.isfinite(rel) and math.isfinite(tolerance)):
        return math.inf
    return rel / tolerance if tolerance > 0 else (0.0 if rel == 0 else math.inf)


# (line, raised a tolerance) of every ``conditioning:`` line of the current check
CONDITIONING_NOTES: List[Tuple[str, bool]] = []


class Measured:
    """What the current check measured: ``values`` (key -> a tolerance, a list of per-step
    tolerances, an uncertainty), ``widened`` (row label -> (widest tolerance the row used, its
    base)), ``entries`` (row label of a per-entry row -> (entries judged past twice the base,
    all its entries): how much of the row a widening covers); ``replaying``: a rerun on a
    changed copy of the fixture (``sensitivity``) judges at the measured values and measures
    nothing (no perturbed runs)."""

    def __init__(self):
        self.values: Dict[str, object] = {}
        self.widened: Dict[str, Tuple[float, float]] = {}
        self.entries: Dict[str, Tuple[int, int]] = {}
        self.replaying = False


MEASURED = Measured()


def measured(key: str, compute: Callable[[], object]):
    """``compute()`` (a tolerance from measured conditioning), remembered under ``key``; while
    replaying, the remembered value (``compute()``, which then measures nothing, if none)."""
    if MEASURED.replaying:
        return MEASURED.values[key] if key in MEASURED.values else compute()
    value = compute()
    MEASURED.values[key] = value
    return value


def mark_widened(label: str, widest: float, base: float, entries=None) -> None:
    """Remember that row ``label`` is judged at up to ``widest`` (> ``base``, or NaN);
    ``entries``: (entries judged past twice the base, all entries) of a per-entry row."""
    if not MEASURED.replaying and not widest <= base:
        MEASURED.widened[label] = (widest, base)
        if entries is not None:
            MEASURED.entries[label] = entries


def replayed_header() -> bool:
    """True while replaying: the header (parameter counts at full size, settings) does not
    depend on the weights, so a replay skips it and counts it as passed."""
    return MEASURED.replaying


def begin_check() -> None:
    """Forget the previous check's lines and measurements (kept while replaying)."""
    CONDITIONING_NOTES.clear()
    if not MEASURED.replaying:
        MEASURED.values.clear()
        MEASURED.widened.clear()
        MEASURED.entries.clear()


def active_seeds() -> Sequence[int]:
    """The perturbation seeds of a measurement; none while replaying."""
    return () if MEASURED.replaying else PERTURBATION_SEEDS


def note(line: str, raised: bool = True) -> None:
    """Print a ``conditioning:`` line and keep it for the report's summary."""
    print(line)
    CONDITIONING_NOTES.append((line, raised))


def conditioned_tolerance(tolerance: float, movement: float) -> float:
    """The tolerance of an array that moved by ``movement`` (relative, at the comparison's
    scale) under the ``PERTURBATION`` of the inputs; NaN (a row that fails, ``within``) when
    the movement is not finite: a perturbed rerun that turns a finite value into NaN or inf
    measures no conditioning, and a tolerance is never infinite."""
    if not math.isfinite(movement):
        return math.nan
    return max(tolerance, CONDITIONING_FACTOR * movement)


def note_conditioning(label: str, tolerance: float, movement: float, what: str) -> float:
    """The conditioned tolerance, with a ``conditioning:`` line when it exceeds the base (or
    cannot be measured)."""
    conditioned = conditioned_tolerance(tolerance, movement)
    if not math.isfinite(conditioned):
        note(f'conditioning: {label}: a {PERTURBATION:.0e} relative perturbation of {what} '
             'gives non-finite values where the unperturbed run has finite ones (or the '
             'reverse): no conditioning can be measured; the row fails')
    elif conditioned > tolerance:
        note(f'conditioning: {label}: a {PERTURBATION:.0e} relative perturbation of {what} '
             f'moves it by {movement:.2e} relative (amplification {movement / PERTURBATION:.1e})'
             f'; tolerance {CONDITIONING_FACTOR:g} x that = {conditioned:.1e} '
             f'instead of {tolerance:.0e}')
    return conditioned


# ---------------------------------------------------------------- perturbations
def perturb(value, seed: int, perturbation: float = PERTURBATION):
    """``value * (1 + perturbation * noise)`` (standard normal noise from ``seed``) for a
    floating tensor or array; anything else is returned unchanged."""
    if torch.is_tensor(value):
        if not value.is_floating_point():
            return value
        noise = torch.randn(value.shape, generator=torch.Generator().manual_seed(seed),
                            dtype=torch.float64)
        return (value.double() * (1 + perturbation * noise)).to(value.dtype)
    array = np.asarray(value)
    if array.dtype.kind != 'f':
        return value
    noise = np.random.default_rng(seed).standard_normal(array.shape)
    return (array * (1 + perturbation * noise)).astype(array.dtype)


def perturbed_runs(function: Callable[..., dict], inputs: Mapping[str, object],
                   perturbation: float = PERTURBATION,
                   seeds: Sequence[int] = PERTURBATION_SEEDS) -> List[dict]:
    """``function(**inputs)`` with every floating input perturbed, once per seed (the seed of
    input k is ``seed * 1000 + k``, so the inputs get independent noise)."""
    if MEASURED.replaying:
        return []
    return [function(**{name: perturb(value, seed * 1000 + k, perturbation)
                        for k, (name, value) in enumerate(inputs.items())})
            for seed in seeds]


def movement(value, perturbed: Sequence, scale: float) -> float:
    """The largest relative movement (at ``scale``) of ``value`` over its perturbed runs."""
    return max((relative(compare(value, other, 1.0)[0], scale) for other in perturbed),
               default=0.0)


# ---------------------------------------------------------------- arrays and gradients
def compare_file(path: Path, values: Mapping[str, np.ndarray], tolerance: float,
                 names=None, perturbed: Sequence[Mapping[str, np.ndarray]] = (),
                 perturbed_what: str = 'the inputs',
                 why_not_computed: Optional[Callable[[str], str]] = None) -> List[Row]:
    """One row per array of the recorded ``path`` (``.npz``) and of ``values`` (restricted to
    ``names`` when given); an array present on one side only fails (``why_not_computed``:
    name -> what its row says of a recorded array that was not computed), and so does one of
    another shape, its row naming both shapes. ``perturbed``: the same computation rerun on
    perturbed inputs (``perturbed_runs``); an array among them gets the tolerance of its
    measured conditioning."""
    reference = read_npz(path)
    recorded = set(reference) if names is None else set(names) & set(reference)
    wanted = recorded | (set(values) if names is None else set(names) & set(values))
    rows = []
    for name in sorted(wanted):
        label = f'{Path(path).name}:{name}'
        if name not in reference or name not in values:
            why = why_not_computed(name) if why_not_computed and name in reference else ''
            rows.append(one_side_row(label, name in reference, name in values, tolerance, why))
            continue
        if np.shape(reference[name]) != np.shape(values[name]):
            rows.append((f'{label} (shape {np.shape(reference[name])} recorded, '
                         f'{np.shape(values[name])} computed)', math.inf, math.inf, tolerance,
                         False))
            continue
        diff, rel = compare(reference[name], values[name])
        others = [run[name] for run in perturbed if name in run]

        def conditioned(name=name, others=others, label=label):
            if not others:
                return tolerance
            moved = movement(values[name], others, max_abs(reference[name]))
            return note_conditioning(label, tolerance, moved, perturbed_what)
        limit = measured(label, conditioned)
        mark_widened(label, limit, tolerance)
        rows.append((label, diff, rel, limit, within(rel, limit)))
    return rows


def grad_summary(grad: torch.Tensor) -> np.ndarray:
    """``[norm, sum, first 64 entries]`` of a gradient, as the fixtures record it."""
    flat = grad.double().flatten().numpy()
    return np.concatenate([[np.linalg.norm(flat), flat.sum()], flat[:64]])


SUMMARY_PARTS = (('norm', slice(0, 1)), ('sum', slice(1, 2)), ('entries', slice(2, None)))


def gradient_scales(recorded: Mapping[str, np.ndarray]) -> Dict[str, float]:
    """{summary part: the model's largest |value| of that part over every recorded array}."""
    return {part: max((max_abs(np.asarray(v)[where]) for v in recorded.values()), default=0.0)
            for part, where in SUMMARY_PARTS}


def gradient_difference(reference, value, scales: Mapping[str, float]) -> Tuple[float, float]:
    """(max abs difference, largest part-wise difference / the model's scale of that part)."""
    reference, value = as_array(reference), as_array(value)
    if reference.shape != value.shape:
        return math.inf, math.inf
    diffs = {part: compare(reference[where], value[where], 1.0)[0]
             for part, where in SUMMARY_PARTS}
    return max(diffs.values()), max(relative(diffs[p], scales[p]) for p in diffs)


def compare_grads(path: Path, grads: Mapping[str, object], tolerance: float, names=None,
                  perturbed: Sequence[Mapping[str, object]] = (),
                  perturbed_what: str = 'the inputs') -> List[Row]:
    """One row per gradient summary ``[norm, sum, first 64]`` (``grad_summary``; an array or
    a tensor) of the recorded ``path`` and of ``grads`` (restricted to ``names``), each part
    relative to the MODEL's largest of that part (every array of ``path``): round-off in an
    array that is zero in exact arithmetic cannot fail, a wrong gradient still does.
    ``perturbed``: the summaries rerun on perturbed inputs; each array's movement (at the
    model's scale) sets its tolerance (``conditioned_tolerance``)."""
    def summaries(values):
        return {k: as_array(v) for k, v in values.items()}
    grads = summaries(grads)
    recorded = read_npz(path)
    scales = gradient_scales(recorded)
    label = Path(path).name
    runs = [summaries(run) for run in perturbed]
    moved = {k: max((gradient_difference(v, run[k], scales)[1] for run in runs if k in run),
                    default=0.0) for k, v in grads.items()}
    limits = measured(f'{label}:*', lambda: {k: conditioned_tolerance(tolerance, m)
                                             for k, m in moved.items()})
    limits = {k: limits.get(k, tolerance) for k in grads}
    for k, limit in limits.items():
        mark_widened(f'{label}:{k}', limit, tolerance)
    unmeasured = sorted(k for k in limits if not math.isfinite(limits[k]))
    if unmeasured:
        note(f'conditioning: {label}: a {PERTURBATION:.0e} relative perturbation of '
             f'{perturbed_what} gives non-finite gradients where the unperturbed run has '
             f'finite ones (or the reverse) in {unmeasured}: no conditioning can be measured; '
             'those rows fail')
    raised = [k for k in limits if math.isfinite(limits[k]) and limits[k] > tolerance]
    if raised:
        worst = max(raised, key=moved.get)
        note(f'conditioning: {label}: a {PERTURBATION:.0e} relative perturbation of '
             f'{perturbed_what} moves {len(raised)} of {len(grads)} gradients by more than '
             f'{tolerance / CONDITIONING_FACTOR:.1e} of the model\'s largest, up to '
             f'{moved[worst]:.2e} ({worst}; amplification {moved[worst] / PERTURBATION:.1e}); '
             f'their tolerance is {CONDITIONING_FACTOR:g} x their movement, up to '
             f'{limits[worst]:.1e}, instead of {tolerance:.0e}')
    wanted = set(recorded) | set(grads) if names is None else set(names)
    rows = []
    for name in sorted(wanted):
        if name not in recorded or name not in grads:
            rows.append(one_side_row(f'{label}:{name}', name in recorded, name in grads,
                                     tolerance))
            continue
        diff, rel = gradient_difference(recorded[name], grads[name], scales)
        rows.append((f'{label}:{name}', diff, rel, limits[name], within(rel, limits[name])))
    return rows


def one_side_row(label: str, recorded: bool, ours: bool, tolerance: float,
                 why: str = '') -> Row:
    """The failing row of an array only one side has: ``(recorded only: ...)`` for a row of
    the fixture the implementation produces no array for (an extra row; ``(not computed:
    why)`` when the caller knows why), ``(not recorded: ...)`` for one the fixture lacks,
    ``(missing on both sides)`` for a name asked for that neither has."""
    if recorded and not ours:
        why = (f'not computed: {why}' if why else 'recorded only: the implementation '
               'produces no such array (an extra row in the fixture, or one of another model?)')
    elif ours and not recorded:
        why = 'not recorded: the fixture lacks this array, which the implementation produces'
    else:
        why = 'missing on both sides'
    return (f'{label} ({why})', math.inf, math.inf, tolerance, False)


# ---------------------------------------------------------------- chains and argmaxes
def as_state(value) -> torch.Tensor:
    """A recorded chain state as the tensor fed to a step (``float32_if_exact``: a fixture
    re-saved as float64 feeds what the official chain held; a float16 recording is fed as the
    float32 of its values: the chain computes in float32, and the rows then show how far the
    rounded recording is from ours, where torch refused the mixed dtypes with a traceback)."""
    if torch.is_tensor(value):
        return value
    value = float32_if_exact(native_order(np.asarray(value)))
    return torch.from_numpy(np.ascontiguousarray(
        value.astype(np.float32) if value.dtype == np.float16 else value))


def run_chain(step, state, steps: int):
    for i in range(steps):
        _, state = step(i, state)
    return state


def compare_chain(label: str, recorded_states, recorded_outputs, step, tolerance: float,
                  perturbation: float = PERTURBATION, names=('outputs', 'states', 'final'),
                  argmax=None) -> List[Row]:
    """Rows of a sampling chain (DDIM, DDPM) against its recording.

    ``recorded_states`` (S+1, ...): state 0 (the start, after projection) and the state after
    each step; ``recorded_outputs`` (S, ...): the network output of each step;
    ``step(i, state) -> (output, next_state)`` runs step i (0 = the first) of OUR
    implementation on a tensor. Rows ``{label}:{names[0]}[step-by-step]`` and
    ``{label}:{names[1]}[step-by-step]``: every step fed the recorded state i, its output and
    state i+1 against the recorded ones (relative to the array's scale; tolerance from the
    step's measured conditioning). Row ``{label}:{names[2]}[free-running]``: the chain run from
    the recorded state 0, judged only when rerunning it from ``state0 * (1 + perturbation *
    noise)`` moves the final state by at most ``tolerance`` (then at ``conditioned_tolerance``
    of that movement; else reported; a line says which).
    ``argmax = (name, recorded argmax, scores(state) -> (..., N))``: adds the row of
    ``compare_argmax`` for our step-by-step final state.
    """
    states, outputs = as_array(recorded_states), as_array(recorded_outputs)
    steps = len(outputs)
    if len(states) != steps + 1:
        raise ValueError(f'{label}: {len(states)} recorded states for {steps} recorded '
                         f'outputs; expected {steps + 1} (state 0 and one per step)')
    fed = [as_state(s) for s in (recorded_states if torch.is_tensor(recorded_states)
                                 else np.asarray(recorded_states))]
    ours, moved = [], [[], []]
    final_label = f'{label}:{names[2]}[free-running]'
    skip_final = MEASURED.replaying and MEASURED.values.get(final_label) == REPORTED
    with torch.no_grad():
        for i in range(steps):
            ours.append(step(i, fed[i]))
            others = [step(i, perturb(fed[i], seed, perturbation)) for seed in active_seeds()]
            for k in range(2):
                moved[k].append(movement(ours[-1][k], [o[k] for o in others], 1.0))
        # reported, not judged: a replay (nothing measured) skips the free-running chain
        final = None if skip_final else run_chain(step, fed[0], steps)
        final_moved = movement(final, [run_chain(step, perturb(fed[0], seed, perturbation), steps)
                                       for seed in active_seeds()], 1.0)
    rows, limits = [], []
    for k, (name, recorded) in enumerate(zip(names[:2], (outputs, states[1:]))):
        row, step_limits = stepwise_row(f'{label}:{name}[step-by-step]', recorded,
                                        [as_array(o[k]) for o in ours], moved[k], tolerance,
                                        perturbation)
        rows.append(row)
        limits.append(step_limits)
    if skip_final:
        return rows + argmax_rows(label, states, ours, limits, argmax)
    amplified = relative(final_moved, max_abs(states[-1]))
    diff, rel = compare(states[-1], final)
    limit = measured(final_label, lambda: free_running_tolerance(final_label, amplified,
                                                                 tolerance, perturbation))
    if limit == REPORTED:  # reported, not judged: only a non-finite final state fails it
        rows.append((final_label, diff, rel, REPORTED, math.isfinite(rel)))
    else:
        mark_widened(final_label, limit, tolerance)
        rows.append((final_label, diff, rel, limit, within(rel, limit)))
    return rows + argmax_rows(label, states, ours, limits, argmax)


def argmax_rows(label: str, states: np.ndarray, ours: list, limits: list, argmax) -> List[Row]:
    """The ``compare_argmax`` row of a chain's step-by-step final state (none without
    ``argmax``)."""
    if argmax is None:
        return []
    name, recorded_argmax, scores = argmax
    error = limits[1][-1] * max_abs(states[1:])  # what the last state may be off
    return [compare_argmax(f'{label}:{name}[step-by-step]', scores(states[-1]), recorded_argmax,
                           scores(as_array(ours[-1][1])), error)]


def free_running_tolerance(label: str, amplified: float, tolerance: float,
                           perturbation: float) -> float:
    """The tolerance of a chain's free-running final state that a ``perturbation`` of state 0
    moves by ``amplified`` (relative): ``REPORTED`` (ill-conditioned), NaN (a non-finite
    movement: the row fails) or the conditioned tolerance; a line says which."""
    if not math.isfinite(amplified):
        note(f'conditioning: {label}: a {perturbation:.0e} relative perturbation of state 0 '
             'gives a non-finite final state where the unperturbed chain has a finite one (or '
             'the reverse): no conditioning can be measured; the row fails')
        return math.nan
    if amplified > tolerance:
        note(f'conditioning: {label}: the chain is ill-conditioned: a {perturbation:.0e} '
             f'relative perturbation of state 0 moves the final state by {amplified:.2e} '
             f'relative (amplification {amplified / perturbation:.1e}) > tolerance '
             f'{tolerance:.0e}; judged step by step, the free-running final state is '
             'reported only', raised=False)
        return REPORTED
    limit = conditioned_tolerance(tolerance, amplified)
    note(f'conditioning: {label}: the chain is well-conditioned (a {perturbation:.0e} '
         f'perturbation of state 0 moves the final state by {amplified:.2e} relative); the '
         f'free-running final state is judged at {limit:.1e}', raised=limit > tolerance)
    return limit


def stepwise_row(label: str, recorded: np.ndarray, ours: List[np.ndarray],
                 moved: List[float], tolerance: float, perturbation: float = PERTURBATION
                 ) -> Tuple[Row, List[float]]:
    """The row of an array compared step by step (``compare_chain``): step i is judged
    against its own tolerance ``conditioned_tolerance(tolerance, moved[i] / scale)`` (scale:
    the recorded array's max abs over every step); the row shows the step with the largest
    difference / tolerance, and a ``conditioning:`` line the range of the tolerances.
    Returns the row and the tolerance of each step."""
    scale = max_abs(recorded)
    limits = measured(label, lambda: [conditioned_tolerance(tolerance, relative(m, scale))
                                      for m in moved])
    if len(limits) != len(moved):  # a replayed chain of another length: the base
        limits = [tolerance] * len(moved)
    mark_widened(label, max(limits, key=lambda t: t if math.isfinite(t) else math.inf,
                            default=tolerance), tolerance)
    if recorded.shape != (len(ours),) + (ours[0].shape if ours else ()):
        return (f'{label} (shape)', math.inf, math.inf, tolerance, False), limits
    diffs = [compare(r, o, scale) for r, o in zip(recorded, ours)]
    worst = max(range(len(diffs)), key=lambda i: ratio(diffs[i][1], limits[i]))
    unmeasured = [i for i, limit in enumerate(limits) if not math.isfinite(limit)]
    if unmeasured:
        note(f'conditioning: {label}: a {perturbation:.0e} relative perturbation of the fed '
             f'state gives non-finite values where the unperturbed step has finite ones (or '
             f'the reverse) at steps {unmeasured}: no conditioning can be measured; the row '
             'fails')
    elif max(limits) > tolerance:
        amplification = [relative(m, scale) / perturbation for m in moved]
        note(f'conditioning: {label}: a {perturbation:.0e} relative perturbation of the fed '
             f'state amplifies by {min(amplification):.1e} to {max(amplification):.1e} per '
             f'step; tolerance per step {CONDITIONING_FACTOR:g} x the movement, '
             f'{min(limits):.1e} to {max(limits):.1e} (base {tolerance:.0e}); the row shows '
             f'step {worst} (largest difference / tolerance)')
    diff, rel = diffs[worst]
    return (label, max(d for d, _ in diffs), rel, limits[worst],
            all(within(r, t) for (_, r), t in zip(diffs, limits))), limits


def compare_argmax(label: str, recorded_scores, recorded_argmax, scores, error: float) -> Row:
    """The row of an argmax over the last axis of ``scores``: judged at the positions whose
    recorded top-2 margin exceeds ``2 * error`` (``error``: the absolute float error the
    comparison of the scores allows), reported elsewhere; the recorded argmax must be the
    argmax of the recorded scores. Row: (label, differing judged positions, their fraction,
    0, ok)."""
    recorded_scores, scores = as_array(recorded_scores), as_array(scores)
    recorded_argmax = np.asarray(recorded_argmax)
    if recorded_scores.shape != scores.shape or \
            recorded_scores.shape[:-1] != recorded_argmax.shape:
        return (f'{label} (shape)', math.inf, math.inf, 0.0, False)
    if np.isnan(recorded_scores).any() or not same_nonfinite(recorded_scores, scores) \
            or not math.isfinite(error):
        return (f'{label} (non-finite scores or score tolerance)', math.inf, math.inf, 0.0,
                False)
    if not np.array_equal(recorded_scores.argmax(-1), recorded_argmax):
        return (f'{label} (the recorded argmax is not that of the recorded scores)',
                math.inf, math.inf, 0.0, False)
    top2 = np.sort(recorded_scores, -1)[..., -2:]
    judged = top2[..., 1] - top2[..., 0] > 2 * error
    differ = scores.argmax(-1) != recorded_argmax
    print(f'argmax {label}: judged at {int(judged.sum())} of {judged.size} positions (recorded '
          f'top-2 margin > 2 x {error:.1e}); {int((~judged).sum())} reported, '
          f'{int((differ & ~judged).sum())} of them differ')
    wrong = int((differ & judged).sum())
    return (label, float(wrong), relative(wrong, judged.size), 0.0, wrong == 0)


def check_float_weight(path: Path, key: str, value) -> None:
    """A recorded floating weight is stored as floating point (an integer array would be cast
    silently, its fractions gone): else ``ValueError`` naming the file, key and dtype."""
    dtype = value.dtype if hasattr(value, 'dtype') else None
    kind = dtype.kind if isinstance(dtype, np.dtype) else ('f' if dtype.is_floating_point else 'i')
    if kind not in 'f':
        raise ValueError(f'fixture {path}: {key} has dtype {dtype}; expected floating-point '
                         'weights (float16 or float32, as the official model stores them)')


def check_fixture_state_dict(path: Path, recorded: Mapping[str, object], model,
                             built_from: str = "the fixture's meta.json") -> None:
    """The state dict a fixture recorded (``path``; ``recorded``: name -> array) has every key
    and shape of ``model`` (a module or its ``state_dict()``), or ``ValueError`` naming the
    file, the keys and shapes, and the fixture as the likely culprit (an edited or
    truncated file, or a meta.json of another model): a fixture is no checkpoint to test
    with another config or fine-tune."""
    from vpn_plugin.engine.checkpoint import mismatch_text
    own = model.state_dict() if hasattr(model, 'state_dict') else model
    for key, value in recorded.items():
        if key in own and own[key].is_floating_point():
            check_float_weight(path, key, value)
    wrong = {k: (tuple(np.shape(v)), tuple(own[k].shape)) for k, v in recorded.items()
             if k in own and tuple(np.shape(v)) != tuple(own[k].shape)}
    problems = mismatch_text(sorted(set(own) - set(recorded)), sorted(set(recorded) - set(own)),
                             wrong, holder='the fixture')
    if problems:
        raise ValueError(f'fixture {path}: does not fit the {type(model).__name__} built from '
                         f'{built_from}: {problems}; expected the official model\'s state dict '
                         'as recorded (an edited or truncated state dict, or a meta.json of '
                         'another model? Record the fixture again)')


def read_npz(path: Path) -> Dict[str, np.ndarray]:
    """Every array of a fixture's ``.npz`` (a new dict; the arrays are shared with later reads
    of the same content: never modify one in place); a truncated file or an object array
    (never unpickled) is a ``ValueError`` naming the file."""
    try:
        content = Path(path).read_bytes()
        arrays = _read_npz(hashlib.blake2b(content, digest_size=20).digest(), content)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f'{path}: cannot read the recorded arrays ({error}); expected the '
                         "fixture's .npz of numeric arrays, complete") from None
    check_real_arrays(path, arrays)
    arrays = {name: native_order(value) for name, value in arrays.items()}
    if is_fed_file(path):
        check_finite_arrays(path, arrays)
    dtypes = {name: value.dtype for name, value in arrays.items()}
    if Path(path).name.endswith('inputs.npz'):
        arrays = {name: int64_ids(float32_if_exact(value)) for name, value in arrays.items()}
    return RecordedArrays(path, arrays, dtypes)


def check_real_arrays(path, arrays: Mapping[str, np.ndarray]) -> None:
    """Every array of ``arrays`` (read from ``path``) holds booleans, integers, real floats or
    text, as the official codes record them; else ``ValueError`` naming the file, the array and
    its dtype (a complex array was compared by its real part only: a wrong recording passed)."""
    for name, value in arrays.items():
        if value.dtype.kind not in 'biufUS':
            raise ValueError(f'{path}: {name} is a {value.dtype} array; expected real numbers '
                             '(bool, integer or floating point) or text, as the official code '
                             'records them (a fixture of another layout?)')


def int64_ids(value: np.ndarray) -> np.ndarray:
    """An input array of integers other than int64 (int8..int32, uint8..uint64 within int64's
    range) as int64, the official codes' ids and indices (the same values: torch's one_hot and
    indexing take int64 only, and refused a fixture re-saved with int32, uint8 or uint64 ids
    by a traceback); video frames (uint8 arrays of 3 or more dimensions) and int64 stay."""
    if value.dtype.kind not in 'iu' or value.dtype == np.int64 or (
            value.dtype == np.uint8 and value.ndim >= 3):
        return value
    if value.dtype == np.uint64 and value.size and value.max() > np.iinfo(np.int64).max:
        return value
    return value.astype(np.int64)


def float32_if_exact(value: np.ndarray) -> np.ndarray:
    """A float64 input array whose every value float32 holds exactly, as float32: a fixture
    re-saved as float64 (the same values) feeds the model what the official code fed; a
    recorded float64 input (a counted transition matrix) is not float32-exact and stays."""
    if value.dtype == np.float64 and np.array_equal(value.astype(np.float32), value):
        return value.astype(np.float32)
    return value


def is_fed_file(path) -> bool:
    """A fixture file that is fed to the model (its inputs, its weights) rather than compared:
    a NaN there makes every row inf without saying why, so it is refused by name."""
    name = Path(path).name
    return name.endswith('inputs.npz') or name.endswith('state_dict.npz')


def check_finite_arrays(path, arrays: Mapping[str, np.ndarray]) -> None:
    """Every floating array of ``arrays`` (read from ``path``) is finite, or ``ValueError``
    naming the file, the array, how many values and the first index."""
    for name, value in arrays.items():
        if value.dtype.kind in 'fc' and not np.isfinite(value).all():
            bad = ~np.isfinite(value)
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f'{path}: {name} holds {int(bad.sum())} NaN/inf value(s) (first at '
                             f'index {first}: {value[first]}); expected finite recorded values '
                             '(the model is fed them: every row would fail without saying why)')


class RecordedArrays(dict):
    """The arrays of one fixture file; a missing one is a ``KeyError`` naming the file and
    the array (a fixture with arrays removed, not the bare array name)."""

    def __init__(self, path, arrays, dtypes=None):
        super().__init__(arrays)
        self.path = path
        self.dtypes = dtypes or {}  # as the file holds them (before int64_ids and the like)

    def __missing__(self, key):
        raise KeyError(f'{self.path}: no recorded array {key!r} ({len(self)} arrays there); '
                       "expected the fixture's complete .npz, as the official code wrote it")


_NPZ_CACHE: Dict[bytes, Dict[str, np.ndarray]] = {}


def _read_npz(digest: bytes, content: bytes) -> Dict[str, np.ndarray]:
    """The arrays of an ``.npz`` content, kept by its digest (a check reads each file several
    times, a sensitivity rerun the same files again; keyed on content, never on a file's
    name or time)."""
    if digest not in _NPZ_CACHE:
        with np.load(io.BytesIO(content), allow_pickle=False) as loaded:
            arrays = {k: loaded[k] for k in loaded.files}
        if len(_NPZ_CACHE) >= 16:
            _NPZ_CACHE.pop(next(iter(_NPZ_CACHE)))
        _NPZ_CACHE[digest] = arrays
    return _NPZ_CACHE[digest]


COLUMNS = (
    ('array', 'the recorded array compared: file:name ([step-by-step]: a chain, each step fed '
              'the recorded state; [free-running]: the chain run alone)'),
    ('max abs', 'the largest |ours - recorded| over the array (every step, every entry)'),
    ('max rel', 'the judged difference / its scale: the recorded array\'s max abs; gradient '
                'summaries (grads*.npz): the model\'s largest gradient of that part [norm, '
                'sum, entries]; optimiser steps (after_adamw., ema_after.): the recorded '
                'update\'s max abs; step-by-step and per-entry rows: the step or entry with the '
                'largest difference / tolerance'),
    ('tol', 'the tolerance max rel is judged at (report: not judged, an ill-conditioned '
            'free-running chain)'),
    ('widened', 'tol / the base tolerance (1e-4 outputs, 1e-3 gradients) where measured '
                'conditioning raised it; in brackets the widest of the row\'s steps or '
                'entries; blank: at its base'),
)


def widened_cell(label: str, tolerance: float) -> str:
    """The ``widened`` column of a row (``COLUMNS``)."""
    if label not in MEASURED.widened or tolerance == REPORTED:
        return ''
    widest, base = MEASURED.widened[label]
    if not math.isfinite(widest):
        return 'unmeasured'
    shown = ratio(tolerance, base)
    cell = f'{shown:.3g}x' if shown > 1 else '-'
    return cell + (f' (up to {ratio(widest, base):.3g}x)' if widest > tolerance else '')


def largest_lines(rows: List[Row]) -> List[str]:
    """Per file of the rows (the label before ``:``; ``other`` without one): the largest
    ``max rel`` of its judged rows, with its row and tolerance (what docs quote)."""
    groups: Dict[str, List[Row]] = {}
    for row in rows:
        if row[3] != REPORTED:
            file = row[0].split(':', 1)[0] if ':' in row[0] else 'other'
            groups.setdefault(file, []).append(row)
    lines = []
    for file, members in groups.items():
        worst = max(members, key=lambda row: row[2])
        failed = [row for row in members if not row[4]]
        # rows judged at widened tolerances: the largest max rel can pass while a row of a
        # smaller one fails (CEFITO's train_step.npz); the line then names them
        elsewhere = (f'; {len(failed)} other row(s) FAIL at their tolerance, e.g. '
                     f'{failed[0][0]} ({failed[0][2]:.2e}; tol {failed[0][3]:.1e})'
                     if failed and worst[4] else '')
        lines.append(f'largest "max rel" of {file} ({len(members)} rows): {worst[2]:.2e} '
                     f'({worst[0]}; tol {worst[3]:.1e}{", FAIL" if not worst[4] else ""})'
                     + elsewhere)
    return lines


def print_report(rows: List[Row], header_ok: bool = True) -> bool:
    """Print the table (a header naming the columns, ``COLUMNS``); True when every judged row
    and the header passed. A reported row (tolerance ``REPORTED``: an ill-conditioned
    free-running chain) shows ``report``."""
    width = max(len(row[0]) for row in rows)
    print('columns: ' + '; '.join(f'"{name}" = {meaning}' for name, meaning in COLUMNS))
    print(f'{"array":<{width}}  {"max abs":>10}  {"max rel":>10}  {"tol":>8}  widened')
    ok = header_ok
    for name, diff, rel, tolerance, row_ok in rows:
        limit = 'report' if tolerance == REPORTED else f'{tolerance:8.1e}'
        cells = f'{name:<{width}}  {diff:10.3e}  {rel:10.3e}  {limit:>8}  ' \
                f'{widened_cell(name, tolerance)}'
        print(cells.rstrip() + ('' if row_ok else '  FAIL'))
        ok &= row_ok
    raised = sum(raised for _, raised in CONDITIONING_NOTES)
    if CONDITIONING_NOTES:
        print(f'conditioning: {raised} comparisons judged at a tolerance above their base, '
              'from their measured conditioning (the "conditioning:" lines above)')
    reported = [row[0] for row in rows if row[3] == REPORTED]
    if reported:
        print(f'reported, not judged (ill-conditioned, see the conditioning lines): '
              f'{", ".join(reported)}')
    for line in largest_lines(rows):
        print(line)
    reasons = [reason for reason, failed in (
        ('differences beyond tolerance', any(not row[4] for row in rows)),
        ('a header check does not hold (its MISMATCH line above)', not header_ok)) if failed]
    print('PASS' if ok else 'FAIL: ' + '; '.join(reasons))
    return ok

"""Official released weights and reference outputs, read into this plugin's models.

* ``read_authors_state_dict``: a ``.pth`` saved by an official code (``model.state_dict()``,
  loaded with ``weights_only=True``) or an ``.npz`` of the same names (the oracle fixtures);
* ``read_pkg``: their raw transition matrix (N, N) from ``.npy`` or an ``.npz`` field;
* ``convert_state_dict``: official names -> this plugin's, by the model class's
  ``official_prefixes`` (ViterbiPlanNet: the authors' code; SCHEMA: its official code), with
  a check that every parameter of the model is filled and the shapes agree; official buffers
  the model recomputes are checked by its ``check_official_buffers`` and dropped;
* ``check_fixture``: rebuild a fixture (``../shared/reference/README.md``) with the model of
  this plugin's config and compare every output, loss and gradient summary (the
  ``ViterbiPlanNet`` checker of ``oracles.compare``, run by ``tools/check_reference.py``).
"""
import pickle
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from .. import core
from .compare import (GRAD_TOLERANCE, OUTPUT_TOLERANCE, check_finite_arrays, check_ids, compare,
                      compare_file, compare_grads, grad_summary, read_fixture_meta, read_npz,
                      set_fixture_sizes)
from ..errors import check_file, check_number, tool_command
from ..outputs import has_suffix
from ..models.state_encoder import plugin_name

META_FIELDS = ('case', 'dataset', 'num_actions', 'num_tasks', 'horizon', 'eval_horizon',
               'batch', 'feature_dim', 'text_dim', 'embed_dim', 'mlp_ratio', 'dropout',
               'text_features', 'num_parameters', 'seed', 'method')
LOSS_NAMES = ('loss_state', 'loss_plan', 'loss_task')


def read_authors_state_dict(path) -> Dict[str, torch.Tensor]:
    """The authors' parameters {their name: float32 tensor} of a ``.pth`` or ``.npz`` file."""
    path = check_file(path, "the official state dict (SRC)")
    if has_suffix(path, ('.npz',)):  # W.NPZ too: outputs' one suffix rule
        arrays = read_npz(path)  # a truncated file or object array: named
        return {k: torch.from_numpy(v.astype(np.float32)) for k, v in
                checked_parameters(path, arrays).items()}
    try:
        state = torch.load(path, map_location='cpu', weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as error:
        from vpn_plugin.compat import unpickler_reason
        raise ValueError(f'{path}: cannot load it as the authors\' checkpoint (it does not '
                         f'unpickle safely: {unpickler_reason(error)}); expected a state dict '
                         'saved with torch.save; it is never unpickled with code') from None
    state = state.get('state_dict', state) if isinstance(state, dict) else state
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f'{path}: expected a state dict {{name: tensor}} saved by the '
                         "authors' code (torch.save(model.state_dict(), ...))")
    checked_parameters(path, {k: v.numpy() if v.dtype != torch.bfloat16 else v.float().numpy()
                              for k, v in state.items()})
    return {k: v.float() for k, v in state.items()}


def checked_parameters(path, arrays: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """``arrays`` when each is a finite real number array: a string, bool or NaN/inf parameter
    would be converted into a model that plans nothing, without saying why."""
    for name, value in arrays.items():
        if value.dtype.kind not in 'iuf':
            raise ValueError(f'{path}: parameter {name!r} is a {value.dtype} array; expected '
                             "the official model's real-valued weights")
    check_finite_arrays(path, arrays)
    return arrays


def read_pkg(path, field: str = 'transition_matrix', num_actions: Optional[int] = None
             ) -> np.ndarray:
    """Raw PKG (N, N) float64 [from, to] from a plain ``.npy`` array (what the authors'
    ``main.py`` saves, ``T{T}_transition_matrix.npy``) or the ``field`` of an ``.npz``;
    ``num_actions``: the N it must have. A PKG without any edge is refused."""
    path = check_file(path, 'the PKG (--pkg)')
    loaded = np.load(path, allow_pickle=False)
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            if field not in loaded.files and any(name.endswith('data.pkl')
                                                 for name in loaded.files):
                raise ValueError(f'{path}: a torch checkpoint (torch.save archive), not a PKG; '
                                 "expected the authors' T{T}_transition_matrix.npy or an .npz "
                                 f'with a {field!r} array')
            if field not in loaded.files:
                raise KeyError(f'{path}: no array {field!r}; it has {loaded.files}')
            loaded = loaded[field]
    if loaded.dtype.kind not in 'iuf':
        raise ValueError(f'{path}: a {loaded.dtype} array; expected a real (N, N) transition '
                         'matrix')
    if num_actions is not None and loaded.shape != (num_actions, num_actions):
        raise ValueError(f'{path}: a PKG of shape {loaded.shape}; the config\'s model has '
                         f'{num_actions} actions: expected ({num_actions}, {num_actions})')
    pkg = core.check_pkg(np.asarray(loaded, dtype=np.float64), name=str(path))
    if not pkg.any():
        raise ValueError(f'{path}: the PKG has no edge (every entry is 0): every plan of two '
                         'or more steps would be impossible; expected the transition matrix '
                         'counted on the training set')
    return pkg


def convert_state_dict(authors: Dict[str, torch.Tensor], model) -> Dict[str, torch.Tensor]:
    """{this plugin's name: tensor} for ``model`` of an official model's state dict."""
    authors = dict(authors)
    if hasattr(model, 'check_official_buffers'):
        authors = model.check_official_buffers(authors)
    prefixes = model.official_prefixes
    converted = {plugin_name(name, prefixes): value for name, value in authors.items()}
    expected = dict(model.named_parameters())
    missing = sorted(set(expected) - set(converted))
    if missing:
        raise KeyError(f"the official state dict lacks {missing}; expected all of "
                       f'{sorted(prefixes)}')
    for name, value in converted.items():
        if name not in expected:
            raise KeyError(f'official parameter {name!r} has no counterpart in the model built '
                           f'from the config ({type(model).__name__}); check the config')
        if tuple(value.shape) != tuple(expected[name].shape):
            raise ValueError(f'parameter {name}: shape {tuple(value.shape)} in the official '
                             f'state dict, {tuple(expected[name].shape)} in the model built '
                             'from the config (check num_actions, num_tasks, horizon, '
                             'feature_dim)')
    return converted


def install_authors_weights(model, authors: Dict[str, torch.Tensor], pkg=None):
    """Load official parameters and (when given) their raw PKG (N, N) into ``model`` in
    place; without ``pkg`` the model's graph stays unfilled (``PKGHook`` counts it)."""
    model.load_state_dict(convert_state_dict(authors, model), strict=False)
    if pkg is not None:
        model.set_pkg(pkg)


# ---------------------------------------------------------------- reference check
def read_meta(fixture: Path) -> dict:
    meta = read_fixture_meta(fixture)
    if meta.get('method', 'ViterbiPlanNet') != 'ViterbiPlanNet':
        raise ValueError(f'{fixture / "meta.json"}: method={meta["method"]!r}, a fixture of '
                         'another method than the ViterbiPlanNet authors\' code; expected a '
                         'ViterbiPlanNet fixture (no method, or method=\'ViterbiPlanNet\'): check '
                         f'this one with {tool_command("check_reference.py")} {fixture}')
    unknown = sorted(set(meta) - set(META_FIELDS))
    missing = sorted(set(META_FIELDS) - set(meta) - {'case', 'seed', 'method'})
    if unknown or missing:
        raise ValueError(f'{fixture / "meta.json"}: unknown fields {unknown}, missing fields '
                         f'{missing}; expected the fields {META_FIELDS}')
    for field in META_FIELDS[2:10]:  # the sizes: "3" or true is no horizon
        check_number(f'{fixture / "meta.json"}: {field}', meta[field], integer=True, low=1)
    if not 1 <= meta['eval_horizon'] <= meta['horizon']:
        raise ValueError(f'{fixture / "meta.json"}: eval_horizon={meta["eval_horizon"]} '
                         f'with horizon={meta["horizon"]}; expected 1 <= eval_horizon <= horizon')
    return meta


def reference_outputs(model, inputs, eval_horizon: int):
    """Every output, loss and the gradient summaries of ``model`` on a fixture's batch."""
    model.eval()
    model.zero_grad()
    start, goal = (torch.from_numpy(inputs[k]).float() for k in ('start', 'goal'))
    states = model.encode({'start': start, 'goal': goal})
    log_emissions = model.log_emissions(states, eval_horizon)
    soft = model.soft_plan(log_emissions)
    losses = model.loss_terms(states, log_emissions, torch.from_numpy(inputs['actions']),
                              torch.from_numpy(inputs['tasks']))
    sum(losses.values()).backward()
    outputs = dict(dvl_log_emissions=log_emissions, soft_plan=soft,
                   soft_plan_second_dvl=model.second_dvl(soft),
                   viterbi_plan=model.hard_viterbi(soft), state_logits=model.state_logits(states),
                   task_logits=model.task_logits(states), **losses)
    outputs = {k: v.detach().numpy() for k, v in outputs.items()}
    parameters = dict(model.named_parameters())
    grads = {}
    for authors_name in authors_names(model):
        grads[authors_name] = grad_summary(
            parameters[plugin_name(authors_name, model.official_prefixes)].grad)
    return outputs, grads


def authors_names(model) -> List[str]:
    """The official name of each parameter of ``model`` (its ``official_prefixes``)."""
    ours_to_official = {}
    for prefix, ours in model.official_prefixes.items():
        for name, _ in model.named_parameters():
            if name.startswith(ours) and name not in ours_to_official:
                ours_to_official[name] = prefix + name[len(ours):]
    return [ours_to_official[name] for name, _ in model.named_parameters()]


def check_reference(fixture, model) -> Tuple[List[Tuple[str, float, float, float, bool]], dict]:
    """Rows ``(array, max abs, max rel, tolerance, ok)`` of a fixture for ``model`` (built
    from this plugin's config with the fixture's sizes), and the fixture's meta."""
    fixture = Path(fixture)
    meta = read_meta(fixture)
    inputs = read_npz(fixture / 'inputs.npz')
    check_inputs(fixture, meta, inputs)
    model.state_encoder.set_state_features(torch.from_numpy(inputs['state_prompt_features']))
    install_authors_weights(model, read_authors_state_dict(fixture / 'authors_state_dict.npz'),
                            inputs['transition_matrix'])
    outputs, grads = reference_outputs(model, inputs, meta['eval_horizon'])
    rows = (compare_file(fixture / 'outputs.npz', outputs, OUTPUT_TOLERANCE)
            + compare_grads(fixture / 'grads.npz', grads, GRAD_TOLERANCE))
    return rows, meta


def check_inputs(fixture: Path, meta: dict, inputs: dict) -> None:
    """The batch agrees with meta.json (B, T, D, N, Dt) and start/goal are the observations
    the authors' model uses (first step's start, last step's end)."""
    batch, horizon = meta['batch'], meta['horizon']
    expected = dict(visual_features=(batch, horizon, 2, meta['feature_dim']),
                    start=(batch, meta['feature_dim']), goal=(batch, meta['feature_dim']),
                    state_prompt_features=(meta['num_actions'], 6, meta['text_dim']),
                    transition_matrix=(meta['num_actions'],) * 2, actions=(batch, horizon),
                    tasks=(batch,))
    for name, shape in expected.items():
        if name not in inputs or tuple(inputs[name].shape) != shape:
            got = tuple(inputs[name].shape) if name in inputs else 'missing'
            raise ValueError(f'{fixture / "inputs.npz"}: {name} has shape {got}; expected '
                             f'{shape} from meta.json')
    check_ids(fixture / 'inputs.npz', inputs, dict(actions=meta['num_actions'],
                                                   tasks=meta['num_tasks']))
    visual = inputs['visual_features']
    if not (np.array_equal(visual[:, 0, 0], inputs['start'])
            and np.array_equal(visual[:, -1, 1], inputs['goal'])):
        raise ValueError(f'{fixture / "inputs.npz"}: start/goal are not visual_features[:, 0, 0]'
                         ' / visual_features[:, -1, 1]')


# ---------------------------------------------------------------- the oracle checker
REPO = Path(__file__).resolve().parents[2]
TEXT_TOLERANCE = 1e-3  # the shipped arrays are float16
# fixture dataset name -> the config family of this plugin
CONFIG_DATASETS = {'crosstask': 'crosstask', 'crosstask_133': 'crosstask',
                   'crosstask_105': 'crosstask', 'niv': 'niv', 'coin': 'coin'}
# meta.json field -> model config key it must equal
SIZE_FIELDS = {'num_actions': 'num_actions', 'num_tasks': 'num_tasks', 'horizon': 'horizon',
               'feature_dim': 'feature_dim', 'text_dim': 'text_dim', 'embed_dim': 'embed_dim',
               'mlp_ratio': 'mlp_ratio', 'dropout': 'dropout'}


def method_config(leaf: str, planner_base: str, horizon: int):
    """The model config of a method's per-T config ``leaf`` (``{T}`` filled), else of its
    ``planner_base`` at ``horizon`` (a horizon without a config file); prints which."""
    from ..data_paths import load_config
    path = REPO / leaf.format(T=horizon)
    if not path.is_file():
        path = REPO / planner_base
    model = load_config(path, horizon=horizon).model
    print(f'config: {path.relative_to(REPO)} at horizon {horizon} (type={model.type})')
    return model


def model_config(meta: dict):
    """This plugin's model config for the fixture, with the fixture's sizes set; prints each
    size that differs from the config (e.g. the 105-action CrossTask taxonomy)."""
    if meta['dataset'] not in CONFIG_DATASETS:
        raise ValueError(f'meta.json dataset={meta["dataset"]!r} is unknown; expected one of '
                         f'{sorted(CONFIG_DATASETS)}')
    family = CONFIG_DATASETS[meta['dataset']]
    model = method_config(f'configs/vpn_{family}_t{{T}}.py',
                          f'configs/_base_/planners/vpn_{family}.py', meta['horizon'])
    set_fixture_sizes(model, {key: meta[field] for field, key in SIZE_FIELDS.items()})
    text_file = (model.get('text_embeddings') or {}).get('file')
    if text_file and meta['dataset'] == 'crosstask_105':  # the merged taxonomy's features
        text_file = text_file.replace('clip_133', 'clip_105')
    # the fixture brings its own text features (text_features kind in meta.json)
    model.text_embeddings = None
    model.loss_weights = dict(state=0.0)
    return model, text_file


def check_text_file(fixture: Path, meta: dict, text_file) -> bool:
    """With ``text_features: authors_clip``, the config's shipped array must be the fixture's
    (the authors' CLIP features of this dataset); other kinds are only reported."""
    from ..models.text_embeddings import load_state_features
    if meta['text_features'] != 'authors_clip' or not text_file:
        print(f'text features: {meta["text_features"]} (the fixture\'s own are used)')
        return True
    path = Path(text_file) if Path(text_file).is_absolute() else REPO / text_file
    if not path.is_file():
        print(f'text features: config file {text_file} not found here; not compared')
        return True
    reference = read_npz(fixture / 'inputs.npz')['state_prompt_features']
    diff, rel = compare(reference, load_state_features(file=str(path)).numpy())
    ok = rel <= TEXT_TOLERANCE
    print(f'text features: config {text_file} vs fixture: max abs {diff:.3e}, max rel '
          f'{rel:.3e} {"ok" if ok else "MISMATCH"}')
    return ok


def check_fixture(fixture: Path, meta=None):
    """The ``ViterbiPlanNet`` checker of ``oracles.compare``: (rows, header ok). ``meta`` is
    re-read and validated here (its fields: ``META_FIELDS``)."""
    from mmaction.registry import MODELS
    from ..models.base_planner import num_parameters
    meta = read_meta(fixture)
    print(f'fixture {fixture}: case={meta.get("case")} dataset={meta["dataset"]} '
          f'N={meta["num_actions"]} K={meta["num_tasks"]} T={meta["horizon"]} '
          f'eval T={meta["eval_horizon"]} B={meta["batch"]} text={meta["text_features"]} '
          f'seed={meta.get("seed")}')
    model_cfg, text_file = model_config(meta)
    model = MODELS.build(model_cfg)
    model.loss_weights['state'] = 1.0  # the fixture's text features are installed below
    count = num_parameters(model)
    ok = check_text_file(fixture, meta, text_file) and count == meta['num_parameters']
    print(f'parameters: {count:,} (authors: {meta["num_parameters"]:,}) '
          f'{"ok" if ok else "MISMATCH"}')
    rows, _ = check_reference(fixture, model)
    return rows, ok

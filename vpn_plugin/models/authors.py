"""The authors' released weights and reference outputs, read into ``ViterbiPlanNet``.

* ``read_authors_state_dict``: a ``.pth`` saved by their code (``model.state_dict()``, loaded
  with ``weights_only=True``) or an ``.npz`` of the same names (the oracle fixtures);
* ``read_pkg``: their raw transition matrix (N, N) from ``.npy`` or an ``.npz`` field;
* ``convert_state_dict``: their names -> this plugin's, with a check that every parameter of
  the model is filled and the shapes agree;
* ``check_reference``: rebuild a fixture (``../shared/reference/README.md``) and compare
  every output, loss and gradient summary.
"""
import json
import math
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import torch

from .. import core
from .viterbi_plan_net import AUTHORS_PREFIXES, plugin_name

META_FIELDS = ('case', 'dataset', 'num_actions', 'num_tasks', 'horizon', 'eval_horizon',
               'batch', 'feature_dim', 'text_dim', 'embed_dim', 'mlp_ratio', 'dropout',
               'text_features', 'num_parameters', 'seed')
OUTPUT_TOLERANCE, GRAD_TOLERANCE = 1e-4, 1e-3
LOSS_NAMES = ('loss_state', 'loss_plan', 'loss_task')


def read_authors_state_dict(path) -> Dict[str, torch.Tensor]:
    """The authors' parameters {their name: float32 tensor} of a ``.pth`` or ``.npz`` file."""
    path = Path(path)
    if path.suffix == '.npz':
        with np.load(path, allow_pickle=False) as arrays:
            return {k: torch.from_numpy(arrays[k].astype(np.float32)) for k in arrays.files}
    state = torch.load(path, map_location='cpu', weights_only=True)
    state = state.get('state_dict', state) if isinstance(state, dict) else state
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f'{path}: expected a state dict {{name: tensor}} saved by the '
                         "authors' code (torch.save(model.state_dict(), ...))")
    return {k: v.float() for k, v in state.items()}


def read_pkg(path, field: str = 'transition_matrix') -> np.ndarray:
    """Raw PKG (N, N) float64 [from, to] from a ``.npy`` or the ``field`` of an ``.npz``."""
    path = Path(path)
    with np.load(path, allow_pickle=False) as loaded:
        if path.suffix == '.npz':
            if field not in loaded.files:
                raise KeyError(f'{path}: no array {field!r}; it has {loaded.files}')
            loaded = loaded[field]
        return core.check_pkg(np.asarray(loaded, dtype=np.float64))


def convert_state_dict(authors: Dict[str, torch.Tensor], model) -> Dict[str, torch.Tensor]:
    """{this plugin's name: tensor} for ``model`` of the authors' parameters."""
    converted = {plugin_name(name): value for name, value in authors.items()}
    expected = dict(model.named_parameters())
    missing = sorted(set(expected) - set(converted))
    if missing:
        raise KeyError(f"the authors' state dict lacks {missing}; expected all of "
                       f'{sorted(AUTHORS_PREFIXES)}')
    for name, value in converted.items():
        if tuple(value.shape) != tuple(expected[name].shape):
            raise ValueError(f'parameter {name}: shape {tuple(value.shape)} in the authors\' '
                             f'state dict, {tuple(expected[name].shape)} in the model built '
                             'from the config (check num_actions, num_tasks, horizon)')
    return converted


def install_authors_weights(model, authors: Dict[str, torch.Tensor], pkg: np.ndarray):
    """Load the authors' parameters and their raw PKG (N, N) into ``model`` in place."""
    model.load_state_dict(convert_state_dict(authors, model), strict=False)
    model.set_pkg(pkg)


# ---------------------------------------------------------------- reference check
def read_meta(fixture: Path) -> dict:
    meta = json.loads((fixture / 'meta.json').read_text())
    unknown = sorted(set(meta) - set(META_FIELDS))
    missing = sorted(set(META_FIELDS) - set(meta) - {'case', 'seed'})
    if unknown or missing:
        raise ValueError(f'{fixture / "meta.json"}: unknown fields {unknown}, missing fields '
                         f'{missing}; expected the fields {META_FIELDS}')
    if not 1 <= meta['eval_horizon'] <= meta['horizon']:
        raise ValueError(f'{fixture / "meta.json"}: eval_horizon={meta["eval_horizon"]} '
                         f'with horizon={meta["horizon"]}; expected 1 <= eval_horizon <= horizon')
    return meta


def compare(reference: np.ndarray, value: np.ndarray) -> Tuple[float, float]:
    """(max abs difference, max abs difference / max abs reference)."""
    reference, value = np.asarray(reference, np.float64), np.asarray(value, np.float64)
    if reference.shape != value.shape:
        return math.inf, math.inf
    diff = float(np.abs(reference - value).max()) if reference.size else 0.0
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    return diff, diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


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
        flat = parameters[plugin_name(authors_name)].grad.double().flatten().numpy()
        grads[authors_name] = np.concatenate([[np.linalg.norm(flat), flat.sum()], flat[:64]])
    return outputs, grads


def authors_names(model) -> List[str]:
    """The authors' name of each parameter of ``model``."""
    ours_to_authors = {}
    for prefix, ours in AUTHORS_PREFIXES.items():
        for name, _ in model.named_parameters():
            if name.startswith(ours):
                ours_to_authors[name] = prefix + name[len(ours):]
    return [ours_to_authors[name] for name, _ in model.named_parameters()]


def check_reference(fixture, model) -> Tuple[List[Tuple[str, float, float, float, bool]], dict]:
    """Rows ``(array, max abs, max rel, tolerance, ok)`` of a fixture for ``model`` (built
    from this plugin's config with the fixture's sizes), and the fixture's meta."""
    fixture = Path(fixture)
    meta = read_meta(fixture)
    with np.load(fixture / 'inputs.npz', allow_pickle=False) as loaded:
        inputs = {k: loaded[k] for k in loaded.files}
    check_inputs(fixture, meta, inputs)
    model.state_features = torch.from_numpy(inputs['state_prompt_features']).float()
    install_authors_weights(model, read_authors_state_dict(fixture / 'authors_state_dict.npz'),
                            inputs['transition_matrix'])
    outputs, grads = reference_outputs(model, inputs, meta['eval_horizon'])
    rows = []
    for file, values, tolerance in (('outputs.npz', outputs, OUTPUT_TOLERANCE),
                                    ('grads.npz', grads, GRAD_TOLERANCE)):
        with np.load(fixture / file, allow_pickle=False) as reference:
            names = sorted(set(reference.files) | set(values))
            for name in names:
                if name not in reference.files or name not in values:
                    rows.append((f'{file}:{name} (missing)', math.inf, math.inf, tolerance, False))
                    continue
                diff, rel = compare(reference[name], values[name])
                rows.append((f'{file}:{name}', diff, rel, tolerance, rel <= tolerance))
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
    visual = inputs['visual_features']
    if not (np.array_equal(visual[:, 0, 0], inputs['start'])
            and np.array_equal(visual[:, -1, 1], inputs['goal'])):
        raise ValueError(f'{fixture / "inputs.npz"}: start/goal are not visual_features[:, 0, 0]'
                         ' / visual_features[:, -1, 1]')

"""First and last actions handed to the prompted planners: ground truth (the oracle
setting) or a step model's predictions (a predictions file or a step-model checkpoint)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ORACLE = 'oracle'


def load_anchor_predictions(path: str | Path,
                            num_samples: int | None) -> tuple[np.ndarray, np.ndarray]:
    """First/last actions predicted by a step model, in dataset order.

    ``path`` is a JSON file ``{"first": [M ints], "last": [M ints]}`` or an ``.npz`` with
    arrays ``first`` and ``last``; ``M`` must equal ``num_samples`` (the number of test
    windows) unless that is None.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'step-model predictions file not found: {path}')
    if path.suffix == '.npz':
        with np.load(path) as data:
            record = {k: data[k] for k in data.files}
    else:
        record = json.loads(path.read_text())
    return tuple(_anchor_array(record, key, path, num_samples) for key in ('first', 'last'))


def _anchor_array(record: dict, key: str, path: Path, num_samples: int) -> np.ndarray:
    if key not in record:
        raise ValueError(f'{path}: missing field "{key}" (expected "first" and "last" lists)')
    values = np.asarray(record[key])
    expected = (num_samples if num_samples is not None else len(values),)
    if values.shape != expected or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f'{path}: field "{key}" has shape {values.shape} dtype {values.dtype}; '
                         f'expected {expected[0]} integer action ids (one per test window)')
    return values.astype(np.int64)


def save_anchor_predictions(path: str | Path, first, last) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({'first': [int(a) for a in first], 'last': [int(a) for a in last]}))


def step_model_anchors(config, checkpoint: str | Path, dataset,
                       data_paths: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """First and last actions (M,) each of a step model (a planner whose ``tensor`` output is
    first/last action logits (B, 2, N), e.g. ``PKGBeamSearchPlanner``) on every window of
    ``dataset``; ``config`` (path or Config) and ``checkpoint`` as ``init_planner`` takes
    them."""
    from vpn_plugin.apis import inference_planner, init_planner
    from vpn_plugin.data_paths import load_config
    cfg = load_config(config, **(data_paths or {})) if isinstance(config, (str, Path)) else config
    model = init_planner(cfg, checkpoint)
    if not hasattr(model, 'step_logits'):
        raise TypeError(f'step model {cfg.model.get("type")!r} has no first/last action logits '
                        '(step_logits); use PKGBeamSearchPlanner')
    predicted = inference_planner(model, dataset, range(len(dataset)), mode='tensor').argmax(-1)
    return predicted[:, 0].numpy().astype(np.int64), predicted[:, 1].numpy().astype(np.int64)

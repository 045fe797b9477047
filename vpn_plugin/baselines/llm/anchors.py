"""First and last actions handed to the prompted planners: ground truth (the oracle
setting) or a step model's predictions (a predictions file or a step-model checkpoint)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ORACLE = 'oracle'


def oracle_anchors(plans) -> tuple[np.ndarray, np.ndarray]:
    plans = np.asarray(plans, dtype=np.int64)
    return plans[:, 0].copy(), plans[:, -1].copy()


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


def step_model_anchors(model_cfg: dict, checkpoint: str | Path, dataset,
                       batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Run a step model (a MODELS config with ``step_logits(inputs) -> (B, 2, N)``, e.g.
    ``PKGBeamSearchPlanner``) from ``checkpoint`` on every window of ``dataset``."""
    import torch
    from mmengine.runner import load_checkpoint

    from mmaction.registry import MODELS
    model = MODELS.build(model_cfg)
    if not hasattr(model, 'step_logits'):
        raise TypeError(f'step model {model_cfg.get("type")!r} has no step_logits(inputs); use '
                        'PKGBeamSearchPlanner or a model with first/last action logits')
    load_checkpoint(model, str(checkpoint), map_location='cpu', strict=True, logger='silent')
    model.eval()
    first, last = [], []
    with torch.no_grad():
        for begin in range(0, len(dataset), batch_size):
            stop = min(begin + batch_size, len(dataset))
            items = [dataset[i]['inputs'] for i in range(begin, stop)]
            inputs = {key: torch.stack([item[key] for item in items]) for key in items[0]}
            predicted = model.step_logits(inputs).argmax(-1)
            first.append(predicted[:, 0].numpy())
            last.append(predicted[:, 1].numpy())
    return np.concatenate(first).astype(np.int64), np.concatenate(last).astype(np.int64)

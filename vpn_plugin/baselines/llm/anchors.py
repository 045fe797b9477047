"""First and last actions handed to the prompted planners: ground truth (the oracle
setting) or a step model's predictions (a predictions file; a step-model checkpoint's are
computed by ``vpn_plugin.apis.step_model_anchors``, a floor above the baselines)."""
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


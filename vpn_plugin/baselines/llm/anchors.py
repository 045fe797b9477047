"""First and last actions handed to the prompted planners: ground truth (the oracle
setting) or a step model's predictions (a predictions file; a step-model checkpoint's are
computed by ``vpn_plugin.apis.step_model_anchors``, a floor above the baselines)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...config_types import Count, PathLike, checked_arguments
from ...errors import check_file, read_text, unique_keys, write_text_atomically

ORACLE = 'oracle'


@checked_arguments
def load_anchor_predictions(path: PathLike, num_samples: Count | None,
                            num_actions: Count | None = None) -> tuple[np.ndarray, np.ndarray]:
    """First/last actions predicted by a step model, in dataset order, checked before any
    request is sent.

    ``path`` is a JSON file ``{"first": [M ints], "last": [M ints]}`` or an ``.npz`` with
    arrays ``first`` and ``last``; ``M`` must equal ``num_samples`` (the number of test
    windows) unless that is None; every id lies in ``[0, num_actions)`` (``>= 0`` when
    ``num_actions`` is None).
    """
    path = Path(path)
    check_file(path, 'step-model predictions file',
               missing=f'step-model predictions file not found: {path}')
    try:
        # an .npz is a zip archive whatever its suffix's case (".NPZ"); a file named .npz that
        # is none (JSON text) would meet numpy's advice to unpickle it
        if path.read_bytes()[:4] == b'PK\x03\x04':
            with np.load(path, allow_pickle=False) as data:
                record = {k: data[k] for k in data.files}
        elif path.suffix.lower() == '.npz':
            raise ValueError('named .npz, it is no .npz (zip) archive')
        else:  # a BOM (Notepad) is no part of the JSON; a key twice: which list is meant?
            record = json.loads(read_text(path), object_pairs_hook=unique_keys(
                path, 'step-model predictions file'))
    except (OSError, ValueError, EOFError) as error:  # truncated JSON/npz, object arrays
        raise ValueError(f'{path}: cannot read the step-model predictions ({error}); expected '
                         '{"first": [ints], "last": [ints]} (JSON) or an .npz of two integer '
                         'arrays') from None
    if not isinstance(record, dict):
        raise ValueError(f'{path}: holds a {type(record).__name__}; expected {{"first": [...], '
                         '"last": [...]}')
    unknown = sorted(set(record) - {'first', 'last'})
    if unknown:  # dropped, they would go unread without a word
        raise ValueError(f'{path}: holds field(s) {unknown} besides "first" and "last"; '
                         'expected only the step model\'s first and last actions (as '
                         '--save-anchors writes them)')
    return tuple(_anchor_array(record, key, path, num_samples, num_actions)
                 for key in ('first', 'last'))


def _anchor_array(record: dict, key: str, path: Path, num_samples: int,
                  num_actions: int | None = None) -> np.ndarray:
    if key not in record:
        raise ValueError(f'{path}: missing field "{key}" (expected "first" and "last" lists)')
    if isinstance(record[key], list) and any(isinstance(v, bool) for v in record[key]):
        index = next(i for i, v in enumerate(record[key]) if isinstance(v, bool))
        raise ValueError(f'{path}: field "{key}"[{index}] = {json.dumps(record[key][index])}; '
                         'expected an action id (an integer; a bool would be read as 0 or 1)')
    values = np.asarray(record[key])
    expected = (num_samples if num_samples is not None else len(values),)
    if values.shape != expected or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f'{path}: field "{key}" has shape {values.shape} dtype {values.dtype}; '
                         f'expected {expected[0]} integer action ids (one per test window)')
    outside = (values < 0) | (values >= num_actions if num_actions is not None else False)
    if outside.any():
        index = int(np.flatnonzero(outside)[0])
        bound = f'[0, {num_actions})' if num_actions is not None else '>= 0'
        raise ValueError(f'{path}: field "{key}"[{index}] = {int(values[index])}; expected an '
                         f'action id {bound} ({int(outside.sum())} outside)')
    return values.astype(np.int64)


@checked_arguments
def save_anchor_predictions(path: PathLike, first, last) -> None:
    write_text_atomically(path, json.dumps({'first': [int(a) for a in first],
                                            'last': [int(a) for a in last]}), 'anchors file')


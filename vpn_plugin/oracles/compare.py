"""One checker for every oracle fixture of ``../shared/reference`` (README there).

A fixture holds an official code's weights, inputs and recorded outputs for one batch.
``meta.json``'s ``method`` names the method (``SCHEMA``, ``PDPP``, ``S3D``); a fixture without it is
the ViterbiPlanNet authors'. Each method has a module with
``check_fixture(fixture: Path, meta: dict) -> (rows, header_ok)`` where ``rows`` are
``(array name, max abs diff, max rel diff, tolerance, ok)`` and ``header_ok`` covers what is
not an array (parameter counts, text files). ``tools/check_reference.py`` prints the table.
"""
import importlib
import json
import math
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

import numpy as np
import torch

OUTPUT_TOLERANCE, GRAD_TOLERANCE = 1e-4, 1e-3
Row = Tuple[str, float, float, float, bool]
# meta.json ``method`` -> module with ``check_fixture``
CHECKERS = {
    'ViterbiPlanNet': 'vpn_plugin.oracles.authors',
    'SCHEMA': 'vpn_plugin.oracles.schema',
    'PDPP': 'vpn_plugin.oracles.pdpp',
    'S3D': 'vpn_plugin.oracles.s3d',
}


def read_fixture_meta(fixture: Path) -> dict:
    path = Path(fixture) / 'meta.json'
    if not path.is_file():
        raise FileNotFoundError(f'{path}: no meta.json; expected an oracle fixture folder of '
                                '../shared/reference (meta.json, inputs.npz, outputs.npz, ...)')
    return json.loads(path.read_text())


def fixture_method(meta: dict, fixture: Path) -> str:
    method = meta.get('method', 'ViterbiPlanNet')
    if method not in CHECKERS:
        raise ValueError(f'{Path(fixture) / "meta.json"}: method={method!r} has no checker; '
                         f'expected one of {sorted(CHECKERS)}')
    return method


def check_fixture(fixture) -> Tuple[List[Row], bool, dict]:
    """Rows and header verdict of ``fixture`` for the method its meta names."""
    fixture = Path(fixture)
    meta = read_fixture_meta(fixture)
    module = importlib.import_module(CHECKERS[fixture_method(meta, fixture)])
    rows, header_ok = module.check_fixture(fixture, meta)
    return rows, header_ok, meta


def compare(reference: np.ndarray, value: np.ndarray) -> Tuple[float, float]:
    """(max abs difference, max abs difference / max abs reference)."""
    reference, value = np.asarray(reference, np.float64), np.asarray(value, np.float64)
    if reference.shape != value.shape:
        return math.inf, math.inf
    diff = float(np.abs(reference - value).max()) if reference.size else 0.0
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    return diff, diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


def compare_file(path: Path, values: Mapping[str, np.ndarray], tolerance: float,
                 names=None) -> List[Row]:
    """One row per array of the recorded ``path`` (``.npz``) and of ``values`` (restricted to
    ``names`` when given); an array present on one side only fails."""
    with np.load(path, allow_pickle=False) as reference:
        recorded = set(reference.files) if names is None else set(names) & set(reference.files)
        wanted = recorded | (set(values) if names is None else set(names) & set(values))
        rows = []
        for name in sorted(wanted):
            label = f'{Path(path).name}:{name}'
            if name not in reference.files or name not in values:
                rows.append((f'{label} (missing)', math.inf, math.inf, tolerance, False))
                continue
            diff, rel = compare(reference[name], values[name])
            rows.append((label, diff, rel, tolerance, rel <= tolerance))
    return rows


def grad_summary(grad: torch.Tensor) -> np.ndarray:
    """``[norm, sum, first 64 entries]`` of a gradient, as the fixtures record it."""
    flat = grad.double().flatten().numpy()
    return np.concatenate([[np.linalg.norm(flat), flat.sum()], flat[:64]])


def read_npz(path: Path) -> Dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as loaded:
        return {k: loaded[k] for k in loaded.files}


def print_report(rows: List[Row], header_ok: bool = True) -> bool:
    """Print the table; True when every row and the header passed."""
    width = max(len(row[0]) for row in rows)
    print(f'{"array":<{width}}  {"max abs":>10}  {"max rel":>10}  {"tol":>7}')
    ok = header_ok
    for name, diff, rel, tolerance, row_ok in rows:
        print(f'{name:<{width}}  {diff:10.3e}  {rel:10.3e}  {tolerance:7.0e}'
              f'{"" if row_ok else "  FAIL"}')
        ok &= row_ok
    print('PASS' if ok else 'FAIL: differences beyond tolerance')
    return ok

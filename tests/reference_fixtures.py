"""Where the oracle fixtures of ../shared/reference are (``VPN_SHARED_REFERENCE`` overrides)."""
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(os.environ.get('VPN_SHARED_REFERENCE', REPO.parent / 'shared' / 'reference'))


def reference_dir(name: str) -> Path:
    """The fixture folder ``name``; the calling test skips, saying where it looked, when the
    folder has no meta.json."""
    folder = REFERENCE / name
    if not (folder / 'meta.json').is_file():
        pytest.skip(f'reference fixture {name} not found at {folder} (set VPN_SHARED_REFERENCE)')
    return folder


def copy_fixture(fixture_dir: Path, tmp_path: Path) -> Path:
    """A writable copy of the fixture folder (shared/ is read-only), sub-folders included."""
    import shutil
    copy = tmp_path / fixture_dir.name
    shutil.copytree(fixture_dir, copy)
    for path in copy.rglob('*'):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def shift_array(folder: Path, file: str, key: str, index, delta: float) -> None:
    """Add ``delta`` to entry ``index`` of array ``key`` of ``folder / file`` (an .npz)."""
    import numpy as np
    with np.load(folder / file) as loaded:
        arrays = {k: loaded[k].copy() for k in loaded.files}
    arrays[key][index] += delta
    np.savez(folder / file, **arrays)

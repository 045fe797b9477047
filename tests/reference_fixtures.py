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

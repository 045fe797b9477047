import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get('VPN_SHARED_DATA', REPO_ROOT.parent / 'shared' / 'data'))


@pytest.fixture(scope='session')
def shared_data() -> Path:
    """The real annotations in ../shared/data; tests using it skip when it is absent."""
    if not (SHARED_DATA / 'crosstask').is_dir():
        pytest.skip(f'real annotations not found at {SHARED_DATA} (set VPN_SHARED_DATA)')
    return SHARED_DATA

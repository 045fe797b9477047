# `make main`: set up, then run the quickstart (synthetic features on the real
# CrossTask annotations, train, evaluate, print results). `make test`: the tests.
# Both create .venv on first use; later runs reuse it until setup.cfg changes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.vpn_plugin_installed
# Installed only when the venv has no torch: a CUDA torch put there first is kept.
TORCH_VERSION := 2.13.0
# the suite on up to 4 processes (pytest-xdist), one test file per process at a time (a file's
# tests share module fixtures, the real-Slurm ones one cluster); PYTEST_ARGS=tests: one process
PYTEST_ARGS ?= -n auto --maxprocesses 4 --dist loadfile tests

.PHONY: main test venv

main: $(STAMP)
	$(PY) tools/quickstart.py

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS) -q -rs

venv: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): setup.cfg pyproject.toml | $(PY)
	$(PY) -c 'import torch' 2>/dev/null || $(PY) -m pip install 'torch==$(TORCH_VERSION)'
	$(PY) -m pip install -e '.[test]'
	touch $@

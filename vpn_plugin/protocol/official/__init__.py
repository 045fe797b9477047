"""Whole trainings against the official loops (tools/compare_official_training.py).

* :mod:`.framework`: the data both sides read, the official run (a copy of the checkout, the
  launcher, a subprocess per stage), ours (the protocol runner), the window-count check;
* :mod:`.launcher`: the launcher an official script runs under (line records, threads, shims);
* :mod:`.summary`: the metric table with CIs and Δ, the per-epoch losses, the speed, the figure;
* one plug-in module per method (:data:`METHODS`), each defining ``METHOD``, an instance of
  :class:`.framework.Method`: how to run its official script and ours on the same data.
"""
import importlib

from ...tool_choices import OFFICIAL_METHODS as METHODS


def load_method(name: str):
    """The plug-in ``METHOD`` of a method name of :data:`METHODS`."""
    if name not in METHODS:
        raise ValueError(f'--method {name!r}; expected one of {list(METHODS)}')
    try:
        module = importlib.import_module(f'{__name__}.{name}')
    except ModuleNotFoundError as error:
        if error.name != f'{__name__}.{name}':
            raise
        raise ValueError(f'--method {name}: no comparison plug-in yet '
                         f'(vpn_plugin/protocol/official/{name}.py)') from None
    return module.METHOD

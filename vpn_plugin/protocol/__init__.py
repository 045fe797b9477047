"""Unified evaluation protocol (library code behind tools/run_protocol.py, report.py, plots.py).

* :mod:`.results`: the results-file format (one row per run x test horizon), readers/writers;
* :mod:`.runner`: protocol configs x seeds x horizons through the mmengine Runner, resumable;
* :mod:`.report`: the paper's mean ± 90% bootstrap CI width tables and improvements, Markdown/LaTeX;
* :mod:`.plots`: study curves, parameters vs SR, the qualitative heatmap figure.
"""
from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)

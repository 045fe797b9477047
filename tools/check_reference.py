"""Check this plugin's models against an oracle fixture of an official code.

    .venv/bin/python tools/check_reference.py ../shared/reference/schema_crosstask_t3

Dispatches on what the folder is: ``meta.json``'s ``method`` (``SCHEMA``, ``PDPP``, ``KEPP``,
``CEFITO``, ``S3D``; none = the ViterbiPlanNet authors', as ``tools/check_authors_reference.py``)
and, for KEPP, its ``component`` (``pkg``: a PKG-only folder such as ``kepp_small_t3/pkg``), to
the method's checker (``vpn_plugin.oracles.compare.CHECKERS``), which builds the model from this
plugin's configs with the fixture's sizes and settings, loads the official weights and recomputes
the recorded batch. Prints a table, one row per recorded array, whose columns a ``columns:``
line names: ``max abs``, ``max rel`` (the difference at the scale of what is compared: the
recorded array's max abs; gradients the model's largest gradient; optimiser steps the recorded
update), ``tol`` and ``widened`` (how far measured conditioning raised the tolerance above its
base: 1e-4 outputs, 1e-3 gradients; each raise said in a ``conditioning:`` line). A NaN or inf
on one side only fails at any tolerance; a tolerance is never infinite. Sampling chains are
judged step by step; their free-running final state only where well-conditioned, else reported
(``report``). The rules: ``vpn_plugin/oracles/compare.py``. Where a tolerance was widened, the
``sensitivity:`` lines show that the check still sees a real error there: the widest tolerance,
then per module of the official weights one weight moved by 0.05 and the check rerun at the
measured tolerances (``vpn_plugin/oracles/sensitivity.py``; ``--no-sensitivity`` skips them).
Exits 1 when any judged row exceeds its tolerance or a header check (parameter count, text
features, settings) fails (the last line then reads ``FAIL: ...``), and 1 on an unreadable
fixture as well (no table: one ``error: <message>`` line on stderr, as every tool's refusal;
``vpn_plugin/errors.py``); 0 only after ``PASS``.
"""
import argparse
import sys
from pathlib import Path

from vpn_plugin.errors import parse_once, path_argument, tool_main


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('fixture', type=path_argument,
                        help='fixture folder (meta.json, inputs.npz, outputs.npz, '
                        'grads.npz and the official weights)')
    parser.add_argument('--no-sensitivity', action='store_true',
                        help='skip the sensitivity lines (one rerun per module of the '
                        'weights, with one weight moved by 0.05, judged at the tolerances '
                        'measured here; printed where a tolerance was widened)')
    args = parse_once(parser, argv)
    # after parsing: --help and a refused argument import no torch (tests/test_import_purity.py)
    import vpn_plugin.mm  # noqa: F401  (compat + registration)
    from vpn_plugin.oracles.compare import check_fixture, print_report
    from vpn_plugin.oracles.sensitivity import print_sensitivity
    rows, header_ok, _ = check_fixture(args.fixture)
    ok = print_report(rows, header_ok)
    if args.no_sensitivity:
        pass
    elif ok:
        print_sensitivity(args.fixture, rows)
    else:
        print('sensitivity: not run (the check failed: a weight moved on top of a failing '
              'fixture shows nothing)')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())

"""Check this plugin's models against an oracle fixture of an official code.

    .venv/bin/python tools/check_reference.py ../shared/reference/schema_crosstask_t3

Dispatches on ``meta.json``'s ``method`` (``SCHEMA``, ``PDPP``, ``S3D``; none = the ViterbiPlanNet
authors', as ``tools/check_authors_reference.py``) to the method's checker
(``vpn_plugin.oracles.compare.CHECKERS``), which builds the model from this plugin's configs
with the fixture's sizes, loads the official weights and recomputes the recorded batch. Prints,
for every recorded array (losses included) and gradient summary, the max abs difference and
the max relative difference: relative to the recorded array's max abs, for gradients to the
model's largest gradient. Tolerances: 1e-4 outputs and losses, 1e-3 gradients, raised only
where the checker measured the computation ill-conditioned (a 1e-6 relative perturbation of
its inputs moves the array; tolerance 4x that movement), each said in a ``conditioning:``
line. Sampling chains are judged step by step (each step fed the recorded state); their
free-running final state only where the chain is well-conditioned, else it is reported
(``report``). The rules: ``vpn_plugin/oracles/compare.py``. Exits 1 when any judged row
exceeds its tolerance or a header check (parameter count, text features) fails; 2 on an
unreadable fixture.
"""
import argparse
import sys

import vpn_plugin.mm  # noqa: F401  (compat + registration)
from vpn_plugin.oracles.compare import check_fixture, print_report
from vpn_plugin.errors import tool_main


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('fixture', help='fixture folder (meta.json, inputs.npz, outputs.npz, '
                        'grads.npz and the official weights)')
    args = parser.parse_args(argv)
    rows, header_ok, _ = check_fixture(args.fixture)
    return 0 if print_report(rows, header_ok) else 1


if __name__ == '__main__':
    sys.exit(main())

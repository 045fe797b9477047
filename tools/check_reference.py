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
features, settings) fails; 2 on an unreadable fixture.
"""
import argparse
import sys
from pathlib import Path

import vpn_plugin.mm  # noqa: F401  (compat + registration)
from vpn_plugin.oracles.compare import check_fixture, print_report
from vpn_plugin.oracles.sensitivity import print_sensitivity
from vpn_plugin.errors import REPO_ROOT, tool_command, tool_main


def other_check(folder: Path) -> str:
    """The check that fits a folder of ../shared/reference that is not a model fixture (no
    meta.json), recognised by its files; '' when none is known."""
    folder = folder.resolve()
    if (folder / 'windows.json').is_file() and (folder / 'expected.npz').is_file():
        return ("it is the authors' data loader oracle: check the dataset against it with "
                f'{tool_command("check_authors_loader.py")} {folder}')
    if (folder / 'expected_frames_features.npy').is_file():
        return ('it holds feature-file layouts: read (and convert) them with '
                f'{tool_command("convert_features.py")} --src {folder} --dst /tmp/layouts; '
                f'the layout test: cd {REPO_ROOT} && python -m pytest tests/test_features.py')
    if (folder / 'sequence_completion.txt').is_file():
        return ("it holds the paper's prompts: prompts/paper/ is checked against them by "
                f'cd {REPO_ROOT} && python -m pytest tests/test_llm_prompting.py -k paper')
    return ''


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('fixture', help='fixture folder (meta.json, inputs.npz, outputs.npz, '
                        'grads.npz and the official weights)')
    parser.add_argument('--no-sensitivity', action='store_true',
                        help='skip the sensitivity lines (one rerun per module of the '
                        'weights, with one weight moved by 0.05, judged at the tolerances '
                        'measured here; printed where a tolerance was widened)')
    args = parser.parse_args(argv)
    folder = Path(args.fixture)
    if folder.is_dir() and not (folder / 'meta.json').is_file() and other_check(folder):
        raise FileNotFoundError(f'{folder}: no meta.json, so not a model fixture; '
                                f'{other_check(folder)}')
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

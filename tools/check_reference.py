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
from pathlib import Path

import vpn_plugin.mm  # noqa: F401  (compat + registration)
from vpn_plugin.oracles.compare import check_fixture, print_report
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
    args = parser.parse_args(argv)
    folder = Path(args.fixture)
    if folder.is_dir() and not (folder / 'meta.json').is_file() and other_check(folder):
        raise FileNotFoundError(f'{folder}: no meta.json, so not a model fixture; '
                                f'{other_check(folder)}')
    rows, header_ok, _ = check_fixture(args.fixture)
    return 0 if print_report(rows, header_ok) else 1


if __name__ == '__main__':
    sys.exit(main())

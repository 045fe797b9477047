"""Check this plugin's ViterbiPlanNet against an oracle fixture of the authors' code.

    .venv/bin/python tools/check_authors_reference.py ../shared/reference/authors_crosstask_t3

The ViterbiPlanNet case of ``tools/check_reference.py`` (which checks any fixture): reads
``meta.json`` (format: ``../shared/reference/README.md``), builds the model from this
plugin's config for the fixture's dataset and horizon (``configs/vpn_<dataset>_t<T>.py``, else
``configs/_base_/models/vpn_<dataset>.py``) with the fixture's sizes, converts the authors'
weights, runs the fixture's batch in eval mode (at ``eval_horizon`` when it is shorter than
``horizon``: the authors' cross-horizon rule) and prints, for every array of ``outputs.npz``
(losses included) and every gradient summary of ``grads.npz``, the max abs difference and the
max relative difference. Exits 1 when any relative difference exceeds 1e-4 (outputs, losses)
or 1e-3 (gradients), the parameter count differs, or (``text_features: authors_clip``) the
config's text-feature file is not the fixture's array.
"""
import argparse
import sys
from pathlib import Path

from vpn_plugin.errors import parse_once, path_argument, tool_main


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('fixture', type=path_argument,
                        help='directory with meta.json, inputs.npz, outputs.npz, '
                        'grads.npz, authors_state_dict.npz')
    fixture = Path(parse_once(parser, argv).fixture)
    import vpn_plugin.mm  # noqa: F401  (compat + registration; after parsing: a fast --help)
    from vpn_plugin.oracles.authors import check_fixture
    from vpn_plugin.oracles.compare import begin_check, print_report
    begin_check()
    rows, header_ok = check_fixture(fixture)
    return 0 if print_report(rows, header_ok) else 1


if __name__ == '__main__':
    sys.exit(main())

"""Per horizon T=3..6: train/test windows, actions, tasks and PKG coverage of a dataset.

    python tools/dataset_stats.py --dataset coin --data-root ../shared/data [--json]

See vpn_plugin/datasets/stats.py for how the windows and the coverage are counted. Exits with
status 1 and names the file when the dataset's annotations are not there.
"""
import argparse
import json
import sys

from vpn_plugin.datasets.stats import format_table, window_statistics
from vpn_plugin.errors import tool_main


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', choices=('crosstask', 'niv', 'coin'), required=True)
    parser.add_argument('--data-root', default='../shared/data')
    parser.add_argument('--json', action='store_true', help='print JSON instead of a table')
    args = parser.parse_args(argv)
    rows = window_statistics(args.dataset, args.data_root)
    print(json.dumps(dict(dataset=args.dataset, rows=rows), indent=2) if args.json
          else format_table(args.dataset, rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Per horizon T=3..6: train/test windows, actions, tasks and PKG coverage of a dataset.

    python tools/dataset_stats.py --dataset coin --data-root ../shared/data [--json]
    python tools/dataset_stats.py --config examples/custom_dataset/vpn_kitchen_t3.py  # any config

See vpn_plugin/datasets/stats.py for how the windows and the coverage are counted. Exits with
status 1 and names the file when the dataset's annotations are not there.
"""
import argparse
import json
import sys

from vpn_plugin.errors import at_least, parse_once, path_argument, tool_main


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('--dataset', choices=('crosstask', 'niv', 'coin'))
    which.add_argument('--config', type=path_argument,
                       help='a training or dataset config (a custom dataset too): '
                       'the dataset its train and test dataloaders read')
    parser.add_argument('--data-root', type=path_argument,
                        help='dataset folder (default: ../shared/data of the repository with '
                        '--dataset, the config\'s data_root with --config)')
    parser.add_argument('--horizons', nargs='+', type=at_least(int, 2), default=[3, 4, 5, 6],
                        help='window lengths T (>= 2: the PKG coverage counts transitions)')
    parser.add_argument('--json', action='store_true', help='print JSON instead of a table')
    args = parse_once(parser, argv)
    from vpn_plugin.datasets.sources import default_data_root
    from vpn_plugin.datasets.stats import format_table, window_statistics  # after: a fast --help
    data_root = args.data_root or (None if args.config else default_data_root(args.dataset))
    horizons = list(dict.fromkeys(args.horizons))  # one row per horizon
    rows = window_statistics(args.dataset, data_root, horizons, config=args.config)
    name = args.dataset or args.config
    if args.data_root:  # the counts are of that folder, not of the config's own data_root
        name = f'{name} (data root {args.data_root})'
    root = None if data_root is None else str(data_root)
    print(json.dumps(dict(dataset=name, data_root=root, rows=rows), indent=2) if args.json
          else format_table(name, rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Write the unified-protocol window file of a dataset split from the annotations it reads.

    python tools/export_windows.py --dataset coin --data-root ../shared/data --split test \
        --horizon 4 --out coin_test_T4.json
    python tools/export_windows.py --config MY_DATASET_CONFIG.py --split train --horizon 3 \
        --out my_train_T3.json

The windows are those the dataset's config reads for the split (``configs/_base_/datasets/
<dataset>.py``, or ``--config``: any config with a ``PlanningDataset`` in its
``{train,test}_dataloader``; train = all training videos, no validation hold-out), in the
dataset's window order, in the format of ``../shared/data/crosstask/splits/test_T3_133.json``
(vpn_plugin/datasets/export.py). COIN T=4 equals the authors' ``coin/splits/test_T4.json``
byte for byte. ``custom`` reads ``<data-root>/my_dataset/{taxonomy,train,test}.json``
(configs/_base_/datasets/custom_json.py).
"""
import argparse
import sys

from vpn_plugin.data_paths import add_data_arguments
from vpn_plugin.errors import POSITIVE_INT, parse_once, path_argument, plain_text, tool_main
from vpn_plugin.outputs import add_overwrite_argument, check_output
from vpn_plugin.tool_choices import DATASET_CONFIGS, WINDOW_LAYOUTS
# the readers (vpn_plugin.datasets: torch) are imported after the arguments are parsed
# (--help and refusals answer in ~0.1 s; tests/test_import_purity.py)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('--dataset', choices=sorted(DATASET_CONFIGS))
    which.add_argument('--config', type=path_argument,
                       help='a config whose {train,test}_dataloader.dataset is a '
                       'PlanningDataset (e.g. your copy of configs/_base_/datasets/custom_json.py)')
    parser.add_argument('--split', choices=('train', 'test'), required=True)
    parser.add_argument('--horizon', type=POSITIVE_INT, required=True, metavar='T')
    parser.add_argument('--out', type=path_argument, required=True, help='output JSON file')
    parser.add_argument('--layout', choices=sorted(WINDOW_LAYOUTS),
                        help="which fields and feature folder the records carry (default: the "
                        "dataset's own; 'custom' for --config)")
    parser.add_argument('--feature-prefix', help='folder written before each feature file name '
                        "(default: the layout's, where the authors kept their features)")
    add_overwrite_argument(parser, '--out')
    add_data_arguments(parser, feature_dir=False)  # the folder is --feature-prefix
    return parse_once(parser, argv)


def split_dataset(args, split=None) -> dict:
    from vpn_plugin.datasets.sources import config_dataset, dataset_config
    split = split or args.split
    if args.dataset:
        return dataset_config(args.dataset, split, args.horizon, args.data_root)
    return config_dataset(args.config, split, args.horizon, args.data_root)


def protected_inputs(args, dataset: dict) -> list:
    """The files --out must never replace: the config and the annotation sources of BOTH
    splits (a train export written over the test split's file would train on the test set)."""
    from vpn_plugin.datasets.sources import source_files
    other = 'test' if args.split == 'train' else 'train'
    try:
        others = source_files(split_dataset(args, other))
    except Exception:  # a config without that split: nothing of it to protect
        others = []
    return [args.config, *source_files(dataset), *others]


def unchecked(split: str, other: str, error: Exception) -> None:
    """Say that the split check could not be made, and why (the first line of ``error``)."""
    print(f'note: not checked that no {split} video is in the {other} split: '
          f'{plain_text(str(error).splitlines()[0])}', file=sys.stderr)


def check_apart_from_other_split(args, dataset: dict, windows) -> None:
    """A video of both splits is refused as dataset_stats and the runs refuse it
    (``stats.check_splits_apart``): a test window file must hold no training video."""
    from vpn_plugin.datasets.sources import source_windows
    from vpn_plugin.datasets.stats import check_splits_apart
    from vpn_plugin.datasets.validation import AnnotationWarnings
    other = 'test' if args.split == 'train' else 'train'
    try:
        other_set = split_dataset(args, other)
    except ValueError as error:  # a config without that split: nothing to compare with
        return unchecked(args.split, other, error)
    try:
        _, other_windows, _ = source_windows(other_set, AnnotationWarnings())
    except FileNotFoundError as error:  # that split's annotations are not there (yet)
        return unchecked(args.split, other, error)
    sets = {args.split: (dataset, windows), other: (other_set, other_windows)}
    (train_set, train), (test_set, test) = sets['train'], sets['test']
    check_splits_apart(train_set, test_set, train, test, args.horizon)


@tool_main
def main(argv=None) -> int:
    args = parse_args(argv)
    from vpn_plugin.datasets.export import write_window_file
    from vpn_plugin.datasets.sources import source_windows
    from vpn_plugin.datasets.validation import AnnotationWarnings
    layout = args.layout or args.dataset or 'custom'
    dataset = split_dataset(args)
    args.out = check_output(args.out, 'window_file', '--out',
                            protected_inputs(args, dataset), args.overwrite)
    warnings = AnnotationWarnings()
    taxonomy, windows, _ = source_windows(dataset, warnings)
    check_apart_from_other_split(args, dataset, windows)
    if warnings:
        print(f'warning: {warnings.summary()}', file=sys.stderr)
    if not windows:
        print(f'error: no window of {args.horizon} steps in this split; nothing written',
              file=sys.stderr)
        return 1
    write_window_file(args.out, windows, taxonomy, layout, args.feature_prefix)
    print(f'{len(windows)} windows of {len({w.feature for w in windows})} videos '
          f'(T={args.horizon}, {args.split}) -> {plain_text(args.out)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())

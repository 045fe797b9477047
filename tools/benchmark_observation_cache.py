"""What the observation cache's content key costs when a config's datasets are built.

Building them with no cache, with a cold digest memo (every feature file hashed), and warm
(nothing changed).

    .venv/bin/python tools/benchmark_observation_cache.py configs/vpn_crosstask_t3.py \
        [--splits train test] [--repeats 2]

The cache goes to a temporary folder (the config's own cache is not touched). Prints one line
per measurement: seconds, and for the hashing the bytes and MiB/s (vpn_plugin/datasets/
file_digests.py, docs/speed.md).
"""
import argparse
import copy
import shutil
import tempfile
import time
from pathlib import Path

from vpn_plugin.data_paths import add_data_arguments, data_path_args, load_config
from vpn_plugin.errors import POSITIVE_INT, parse_once, path_argument, tool_main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', type=path_argument)
    parser.add_argument('--splits', nargs='+', choices=('train', 'val', 'test'),
                        default=['train', 'test'])
    parser.add_argument('--repeats', type=POSITIVE_INT, default=2,
                        help='warm builds measured (the best is printed)')
    add_data_arguments(parser)
    return parse_once(parser, argv)


def build_seconds(dataset_cfgs: list, cache_dir) -> float:
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import DATASETS
    began = time.perf_counter()
    for cfg in dataset_cfgs:
        DATASETS.build(dict(copy.deepcopy(cfg), cache_dir=cache_dir))
    return time.perf_counter() - began


def hashing(dataset_cfgs: list) -> tuple:
    """(seconds, bytes) of hashing every feature file the datasets read, memo-less."""
    from vpn_plugin.datasets.features import find_feature_file
    from vpn_plugin.datasets.file_digests import file_digests
    from vpn_plugin.datasets.sources import source_windows
    paths = set()
    for cfg in dataset_cfgs:
        _, windows, _ = source_windows(dict(cfg))
        paths |= {find_feature_file(cfg['feature_dir'], w.feature) for w in windows}
    paths = sorted(p for p in paths if p.exists())
    began = time.perf_counter()
    file_digests(paths)
    return time.perf_counter() - began, sum(p.stat().st_size for p in paths), len(paths)


@tool_main
def main(argv=None):
    args = parse_args(argv)
    from vpn_plugin.benchmark import environment_line  # torch: after the arguments are parsed
    cfg = load_config(args.config, **data_path_args(args))
    datasets = [dict(cfg[f'{split}_dataloader']['dataset'], split=split)
                for split in args.splits]
    print(environment_line('cpu'))
    seconds, size, count = hashing(datasets)
    print(f'hash (SHA-256) of {count} feature files, {size / 2**30:.2f} GiB: {seconds:.2f} s '
          f'({size / 2**20 / seconds:.0f} MiB/s)')
    print(f'build {"+".join(args.splits)}, no cache: {build_seconds(datasets, None):.2f} s')
    folder = Path(tempfile.mkdtemp(prefix='obs_cache_'))
    try:
        print(f'build, cold cache (hash every file, extract, write): '
              f'{build_seconds(datasets, str(folder)):.2f} s')
        (folder / 'feature_digests.json').unlink(missing_ok=True)
        print(f'build, cache written, digest memo lost (hash every file, read the cache): '
              f'{build_seconds(datasets, str(folder)):.2f} s')
        warm = min(build_seconds(datasets, str(folder)) for _ in range(args.repeats))
        print(f'build, warm (stat every file, read and verify the cache): {warm:.2f} s')
    finally:
        shutil.rmtree(folder)


if __name__ == '__main__':
    main()

"""Write synthetic S3D-like features for every annotated video of CrossTask, NIV or COIN.

    python tools/make_synthetic_features.py --dataset crosstask --data-root ../shared/data \
        --out data/synthetic/crosstask [--seed 0] [--difficulty 0.5] [--format npz|public] \
        [--dtype float32|float16]
    python tools/make_synthetic_features.py --config CONFIG [--data-root DIR]  # your dataset

``--config``: the videos of a config's train and test datasets (e.g. a dataset of your own in
the per-video JSON format, whose config inherits configs/_base_/datasets/custom_json.py),
written to the config's ``feature_dir`` (``--out`` writes to ``<out>/features`` instead).

Writes ``<out>/features/<task>_<vid>.npz`` (our layout, the default) or, with ``--format
public``, ``<task>_<vid>.npy`` = a raw pickle of the dict as the public S3D files are
(CrossTask: frames_features, steps_ids, cls, start, end; NIV: frames_features, num_steps,
steps_ids, steps_starts, steps_ends; COIN: frames_features), one 512-d vector per second; and
``provenance.json`` in the same folder (kind ``synthetic``, the generator's settings and the
folder's fingerprint: every results row trained on it says so, vpn_plugin/datasets/provenance.py). COIN's 10,070 videos are stored as float16 by default
(``--dtype``; within 2**-11 relative of the float32 values, read back as float32).
The generator is documented in vpn_plugin/datasets/synthetic.py. One run writes a folder at a
time: a second run into it while the first writes is refused (a lock, ``.features.lock`` beside
the folder).
"""
import argparse
import json
from pathlib import Path

from vpn_plugin.data_paths import row_config_path
from vpn_plugin.errors import (NON_NEGATIVE_INT, POSITIVE_INT, at_least, check_folder_target,
                               parse_once, path_argument, read_json, tool_main)
from vpn_plugin.locks import exclusive_lock, lock_path_of
from vpn_plugin.outputs import KINDS, add_overwrite_argument, check_output
from vpn_plugin.tool_choices import DEFAULT_DTYPES, DTYPES, FORMATS
# the generator (vpn_plugin.datasets: torch) is imported after the arguments are parsed
# (--help and refusals answer in ~0.1 s; tests/test_import_purity.py)

MANIFEST = 'synthetic_manifest.json'  # beside the features folder: the folder is ours


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--dataset', choices=('crosstask', 'niv', 'coin'))
    source.add_argument('--config', type=path_argument,
                        help="a dataset's config (e.g. one of your own, per-video "
                        "JSON); the features go to its feature_dir")
    parser.add_argument('--data-root', type=path_argument,
                        help='folder holding the crosstask/, niv/ and coin/ annotations (default '
                        "../shared/data of the repository); with --config: overrides the "
                        "config's data_root")
    parser.add_argument('--out', type=path_argument,
                        help='output folder (features/ is created in it); required '
                        'with --dataset')
    parser.add_argument('--seed', type=NON_NEGATIVE_INT, default=0)
    parser.add_argument('--difficulty', type=at_least(float, 0.0, high=1.0), default=0.5,
                        help='0 (easy: clear action signal) .. 1 (hard: weak signal, more noise)')
    parser.add_argument('--format', choices=tuple(FORMATS), default='npz',
                        help='npz: our layout; public: raw pickled dict named .npy, as the '
                        'real feature files')
    parser.add_argument('--frame-dim', type=POSITIVE_INT, default=512)
    parser.add_argument('--dtype', choices=DTYPES,
                        help='storage precision of the frames (default: float16 for coin, '
                        'float32 otherwise); the loader reads float32')
    add_overwrite_argument(parser, 'feature files in a folder this tool did not write')
    args = parse_once(parser, argv)
    args.dtype = args.dtype or DEFAULT_DTYPES.get(args.dataset, 'float32')
    return args


@tool_main
def main(argv=None):
    args = parse_args(argv)
    if args.config:
        taxonomy, videos, features = config_source(args)
    else:
        if not args.out:
            raise ValueError('--out is required with --dataset')
        from vpn_plugin.datasets.sources import default_data_root
        from vpn_plugin.datasets.synthetic import dataset_videos
        taxonomy, videos = dataset_videos(args.dataset,
                                          args.data_root or default_data_root(args.dataset))
        features = Path(args.out) / 'features'
    check_folder_target(features, 'feature folder', 'the synthetic feature files',
                        '--out' if args.out else '--cfg-options feature_dir=DIR')
    # one run per folder: two at once would each write a whole set, the manifest of either
    with exclusive_lock(lock_path_of(features), wait=False, what=f'feature folder {features}',
                        discard_if_refused=True):
        write_folder(args, taxonomy, videos, features)


def write_folder(args, taxonomy, videos, features: Path) -> None:
    """The synthetic features of ``videos`` into ``features``, with the manifest beside it."""
    from vpn_plugin.datasets.provenance import feature_files, write_provenance
    from vpn_plugin.datasets.synthetic import (SyntheticFeatureGenerator, synthetic_record,
                                               write_manifest, write_synthetic_features)
    earlier = earlier_run(features)
    check_feature_folder(features, videos, args, earlier is not None)
    had_files = bool(earlier) and features.is_dir() and bool(feature_files(features))
    remove_other_format(features, videos, args.format, earlier)
    generator = SyntheticFeatureGenerator(taxonomy, args.frame_dim, args.difficulty, args.seed)
    print(f'{args.dataset or args.config}: {len(videos)} videos -> {features} ({args.format}, '
          f'{args.dtype})')
    info = write_synthetic_features(videos, generator, features, args.format,
                                    dataset=args.dataset or 'custom', dtype=args.dtype)
    # the config as results rows record it (one file however typed: H12 of the fifteenth pass)
    settings = dict(vars(args), config=args.config and row_config_path(args.config))
    record = synthetic_record(settings, info)
    write_manifest(features.parent, record)  # beside the folder: it is ours to replace
    write_provenance(features, record)  # inside it: travels with the features
    say_replaced(features, earlier if had_files else None, record, videos)
    print(json.dumps(info))


SETTINGS = ('dataset', 'config', 'seed', 'difficulty', 'frame_dim', 'dtype')


def _setting(key: str, value):
    """A recorded setting as compared: an absolute config path in its results-row form
    (``row_config_path``: an earlier manifest may hold the path as it was typed)."""
    if key == 'config' and isinstance(value, str) and Path(value).is_absolute():
        return row_config_path(value)
    return value


def say_replaced(features: Path, earlier, record: dict, videos) -> None:
    """An earlier synthetic run into ``features`` with other settings (another seed,
    difficulty, dataset, ...) had its files replaced under the same names: said, so that a
    checkpoint trained on them is not taken to still match; and its files of videos this run
    does not write (another dataset's) are named, since they now carry this run's record.
    ``earlier``: None when the folder held no feature file before (nothing was replaced)."""
    if not earlier:
        return
    changed = [f'{key} {earlier.get(key)!r} -> {record.get(key)!r}' for key in SETTINGS
               if _setting(key, earlier.get(key)) != _setting(key, record.get(key))]
    if changed:
        print(f'{features}: replaced the features of the earlier run ({", ".join(changed)}); '
              'checkpoints trained on the earlier ones no longer match these')
    from vpn_plugin.datasets.provenance import feature_files
    ours = {v.feature for v in videos}
    others = sorted(p.name for p in feature_files(features) if p.stem not in ours)
    if others:
        print(f'warning: {features} also holds {len(others)} feature file(s) of no video of '
              f'this run (e.g. {others[0]}), left by an earlier run: remove them, or use a '
              'folder per dataset')


def earlier_run(features: Path):
    """The record of an earlier synthetic run into ``features`` (``<out>/synthetic_manifest.json``
    recognised as ours, vpn_plugin/outputs.py), else None."""
    manifest = features.parent / MANIFEST
    if manifest.is_file() and KINDS['synthetic_manifest'].recognise(manifest):
        return read_json(manifest, 'synthetic manifest')
    return None


def check_feature_folder(features: Path, videos, args, earlier: bool) -> None:
    """Synthetic features may replace earlier synthetic ones (``earlier``: the folder's
    manifest is ours) but not, without ``--overwrite``, feature files of another origin (a
    config's real ``feature_dir``), nor a manifest of another tool (vpn_plugin/outputs.py)."""
    manifest = features.parent / MANIFEST
    check_output(manifest, 'synthetic_manifest', '--out', (args.config,), args.overwrite)
    if earlier or args.overwrite or not features.is_dir():
        return
    suffix = FORMATS[args.format]
    existing = [v.feature for v in videos if (features / f'{v.feature}{suffix}').exists()]
    if existing:
        raise ValueError(f'{features}: holds {len(existing)} feature file(s) this tool would '
                         f'replace (e.g. {existing[0]}{suffix}) and no {MANIFEST} of an earlier '
                         'synthetic run beside it: real features would be lost. Choose another '
                         '--out, or pass --overwrite')


def remove_other_format(features: Path, videos, fmt: str, record) -> None:
    """An earlier synthetic run of another ``--format`` into the same folder (``record``: its
    manifest, :func:`earlier_run`) left a file per video that the loader would find beside
    the new one (``X.npy`` beside ``X.npz`` is refused): they are removed, and said."""
    earlier = (record or {}).get('format')
    if earlier in FORMATS and earlier != fmt:
        stale = [features / f'{v.feature}{FORMATS[earlier]}' for v in videos]
        stale = [path for path in stale if path.is_file()]
        for path in stale:
            path.unlink()
        print(f'{features}: removed the {len(stale)} {FORMATS[earlier]} file(s) of the earlier '
              f'--format {earlier} run')


def config_source(args) -> tuple:
    """(taxonomy, videos, feature folder) of ``--config``; its frame_dim must match."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.datasets.synthetic import config_videos
    cfg = load_config(args.config, data_root=args.data_root)
    taxonomy, videos, frame_dim = config_videos(cfg)
    if frame_dim != args.frame_dim:
        raise ValueError(f'{args.config}: the datasets read frame_dim={frame_dim}; give '
                         f'--frame-dim {frame_dim}')
    return taxonomy, videos, Path(args.out) / 'features' if args.out else Path(cfg.feature_dir)


if __name__ == '__main__':
    main()

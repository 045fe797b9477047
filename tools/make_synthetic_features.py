"""Write synthetic S3D-like features for every annotated video of CrossTask, NIV or COIN.

    python tools/make_synthetic_features.py --dataset crosstask --data-root ../shared/data \
        --out data/synthetic/crosstask [--seed 0] [--difficulty 0.5] [--format npz|public] \
        [--dtype float32|float16]

Writes ``<out>/features/<task>_<vid>.npz`` (our layout, the default) or, with ``--format
public``, ``<task>_<vid>.npy`` = a raw pickle of the dict as the public S3D files are
(CrossTask: frames_features, steps_ids, cls, start, end; NIV: frames_features, num_steps,
steps_ids, steps_starts, steps_ends; COIN: frames_features), one 512-d vector per second; and
``<out>/synthetic_manifest.json``. COIN's 10,070 videos are stored as float16 by default
(``--dtype``; within 2**-11 relative of the float32 values, read back as float32).
The generator is documented in vpn_plugin/datasets/synthetic.py.
"""
import argparse
import json
from pathlib import Path

from vpn_plugin.datasets.synthetic import (DEFAULT_DTYPES, DTYPES, FORMATS,
                                           SyntheticFeatureGenerator, dataset_videos,
                                           difficulty_params, write_manifest,
                                           write_synthetic_features)
from vpn_plugin.errors import tool_main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', choices=('crosstask', 'niv', 'coin'), required=True)
    parser.add_argument('--data-root', default='../shared/data',
                        help='folder holding the crosstask/, niv/ and coin/ annotations')
    parser.add_argument('--out', required=True, help='output folder (features/ is created in it)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--difficulty', type=float, default=0.5,
                        help='0 (easy: clear action signal) .. 1 (hard: weak signal, more noise)')
    parser.add_argument('--format', choices=tuple(FORMATS), default='npz',
                        help='npz: our layout; public: raw pickled dict named .npy, as the '
                        'real feature files')
    parser.add_argument('--frame-dim', type=int, default=512)
    parser.add_argument('--dtype', choices=DTYPES,
                        help='storage precision of the frames (default: float16 for coin, '
                        'float32 otherwise); the loader reads float32')
    args = parser.parse_args(argv)
    args.dtype = args.dtype or DEFAULT_DTYPES.get(args.dataset, 'float32')
    return args


@tool_main
def main(argv=None):
    args = parse_args(argv)
    taxonomy, videos = dataset_videos(args.dataset, args.data_root)
    generator = SyntheticFeatureGenerator(taxonomy, args.frame_dim, args.difficulty, args.seed)
    out = Path(args.out)
    print(f'{args.dataset}: {len(videos)} videos -> {out / "features"} ({args.format}, '
          f'{args.dtype})')
    info = write_synthetic_features(videos, generator, out / 'features', args.format,
                                    dataset=args.dataset, dtype=args.dtype)
    write_manifest(out, dict(vars(args), **info, params=difficulty_params(args.difficulty)))
    print(json.dumps(info))


if __name__ == '__main__':
    main()

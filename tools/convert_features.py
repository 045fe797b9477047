"""Convert public pickled-dict ``.npy`` feature files to our safe ``.npz`` layout, once.

    python tools/convert_features.py --src /path/to/processed_data --dst data/crosstask/features

Each ``<task>_<vid>.npy`` (a pickled dict with ``frames_features`` (seconds, 512)) becomes
``<dst>/<task>_<vid>.npz`` holding ``frames_features`` and every other numeric array field of
the dict. Unpickling runs code from the files: convert only files you trust. Afterwards set
``feature_dir=<dst>`` and keep ``allow_pickle=False`` in the dataset config.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

from vpn_plugin.datasets.features import FEATURE_KEY, load_features


def convert_file(src: Path, dst: Path, frame_dim: int) -> None:
    """One pickled .npy -> .npz; the frames are validated (shape, NaN/inf) first."""
    frames = load_features(src, frame_dim, allow_pickle=True, vid=src.stem)
    record = np.load(src, allow_pickle=True)
    extra = {}
    if record.dtype == object:
        for key, value in record.item().items():
            array = np.asarray(value)
            if key != FEATURE_KEY and array.dtype != object:
                extra[str(key)] = array
    np.savez(dst, **{FEATURE_KEY: frames}, **extra)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--src', required=True, help='folder of public .npy feature files')
    parser.add_argument('--dst', required=True, help='output folder for .npz files')
    parser.add_argument('--frame-dim', type=int, default=512)
    parser.add_argument('--overwrite', action='store_true')
    args = parser.parse_args(argv)
    files = sorted(Path(args.src).glob('*.npy'))
    if not files:
        print(f'error: no .npy files in {args.src}', file=sys.stderr)
        return 2
    dst = Path(args.dst)
    dst.mkdir(parents=True, exist_ok=True)
    done = kept = 0
    for i, src in enumerate(files, 1):
        out = dst / f'{src.stem}.npz'
        if out.exists() and not args.overwrite:
            kept += 1
        else:
            convert_file(src, out, args.frame_dim)
            done += 1
        if i % 100 == 0 or i == len(files):
            print(f'\r  {i}/{len(files)} files', end='', file=sys.stderr, flush=True)
    print(f'\nconverted {done} files, kept {kept} existing .npz (use --overwrite) in {dst}')
    return 0


if __name__ == '__main__':
    sys.exit(main())

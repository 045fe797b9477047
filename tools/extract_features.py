"""Extract the datasets' per-second S3D features from video files, as P3IV made the public ones.

    python tools/extract_features.py VIDEO_OR_DIR... --out DIR --weights s3d_howto100m.pth
    tools/dist_extract.sh NPROC VIDEO_OR_DIR... --out DIR --weights ...   (processes / GPUs / nodes)
    tools/slurm_extract.sh PARTITION JOB_NAME VIDEO_OR_DIR... --out DIR --weights ...

Default recipe (P3IV raw_data_process): 16 fps, centre square crop, 224 x 224, JPEG quality-95
round trip, non-overlapping 16-frame chunks (the last padded with black), uint8 / 255; S3D
(MIL-NCE HowTo100M) ``video_embedding``: one 512-d row per chunk, about one per second. Each
step is an option. Writes ``DIR/<name>.npz`` (``frames_features`` (N, 512)), the layout the
dataset configs read: ``--feature-dir DIR`` trains and tests on it unchanged. Resumable
(finished videos are skipped; files appear complete or not at all); unreadable videos are
listed with the reason in ``DIR/failures.tsv`` and make the run exit 1. ``DIR/provenance.json``
records the recipe, the weights file and its sha256 (``--random-weights``: kind
``random-weights``, unusable) and the folder's fingerprint, so every results row trained on
these features says what they are (vpn_plugin/datasets/provenance.py).
"""
import argparse
import sys
from pathlib import Path

from vpn_plugin.errors import (NON_NEGATIVE_INT, POSITIVE_INT, parse_once, path_argument,
                               tool_main)
from vpn_plugin.video.recipe import add_recipe_arguments, recipe_from_args, row_seconds_problem
from vpn_plugin.errors import checked_device
# torch and the extraction (vpn_plugin.video's torch modules) are imported after the arguments
# are parsed (--help and refusals answer in ~0.1 s; tests/test_import_purity.py)

LAUNCHERS = ('none', 'pytorch', 'slurm')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('inputs', type=path_argument, nargs='+', metavar='VIDEO_OR_DIR')
    parser.add_argument('--out', type=path_argument,
                        required=True, help='folder of the feature files')
    parser.add_argument('--weights', type=path_argument, metavar='PTH',
                        help='s3d_howto100m.pth (S3D_HowTo100M README)')
    parser.add_argument('--random-weights', action='store_true',
                        help='random S3D weights, ONLY for pipeline checks: the output is '
                             'marked unusable')
    add_recipe_arguments(parser)
    parser.add_argument('--naming', choices=('stem', 'parent_stem'), default='stem',
                        help='file name: the video stem (default) or <folder>_<stem> '
                             '(CrossTask: videos/<task>/<vid>.mp4 -> <task>_<vid>.npz)')
    parser.add_argument('--batch-chunks', type=POSITIVE_INT, default=8,
                        help='chunks per network call (default 8)')
    parser.add_argument('--num-workers', type=NON_NEGATIVE_INT, default=2,
                        help='DataLoader decoding workers per process (default 2)')
    parser.add_argument('--device', default=None, help='default: the local GPU, else cpu')
    parser.add_argument('--launcher', choices=LAUNCHERS, default='none')
    return parse_once(parser, argv)


def distributed(launcher: str):
    """(rank, world size, device) of this process; initialises torch.distributed."""
    import torch
    if launcher == 'none':
        return 0, 1, 'cuda' if torch.cuda.is_available() else 'cpu'
    from mmengine.dist import get_dist_info, init_dist
    init_dist(launcher, backend='nccl' if torch.cuda.is_available() else 'gloo')
    rank, world = get_dist_info()
    device = f'cuda:{torch.cuda.current_device()}' if torch.cuda.is_available() else 'cpu'
    return rank, world, device


def settings_of(args, recipe) -> dict:
    """What the folder's features depend on (``extraction.json``): the weights by content, so
    that other weights under the same name and size are another recipe."""
    return dict(recipe=recipe.as_dict(), network='S3D video_embedding', naming=args.naming,
                weights='random' if args.random_weights else
                f'{Path(args.weights).name} (sha256 {weights_sha256(args.weights)})')


def weights_sha256(path) -> str:
    """sha256 of the weights file, read once per run (the record and the provenance)."""
    from vpn_plugin.datasets.provenance import file_sha256
    key = str(Path(path).resolve())
    if key not in _SHA256:
        _SHA256[key] = file_sha256(path)
    return _SHA256[key]


_SHA256: dict = {}


def provenance_record(args, recipe) -> dict:
    """The folder's provenance record (kind ``extracted`` or ``random-weights``)."""
    record = dict(settings_of(args, recipe), tool='extract_features.py')
    if args.random_weights:
        return dict(record, kind='random-weights', usable=False)
    return dict(record, kind='extracted', weights=Path(args.weights).name,
                weights_sha256=weights_sha256(args.weights))


@tool_main
def main(argv=None):
    args = parse_args(argv)
    if args.random_weights and args.weights:
        raise ValueError('--weights and --random-weights exclude each other')
    import numpy as np
    import torch
    import vpn_plugin.mm  # noqa: F401  (compat: CPU gloo, checkpoint loading)
    from vpn_plugin.apis.video import RANDOM_WEIGHTS_WARNING, load_s3d_for_tool
    from vpn_plugin.compat import shutdown_distributed
    from vpn_plugin.datasets.provenance import write_provenance
    from vpn_plugin.video import extract_videos, list_videos, merge_failures
    from vpn_plugin.video.extract import (VIDEO_EXTENSIONS, linked_folders, non_videos,
                                          output_names)

    recipe = recipe_from_args(args)
    problem = row_seconds_problem(recipe.as_dict())
    if problem:  # no reader would take the features (datasets.features.checked_frames)
        raise ValueError(f'{problem}; nothing was extracted')
    videos, linked = list_videos(args.inputs), linked_folders(args.inputs)
    not_searched = (f'{len(linked)} linked folder(s) not searched (a link can loop): '
                    f'{", ".join(str(p) for p in linked[:5])}{", ..." if len(linked) > 5 else ""}'
                    ' (give a linked folder as an input to extract its videos)') if linked else ''
    if not videos:
        raise FileNotFoundError(f'no video file in {args.inputs}'
                                + (f'; {not_searched}' if not_searched else ''))
    output_names(videos, args.naming)  # two videos writing one file: refused before the weights
    rank, world, device = distributed(args.launcher)
    if not_searched and rank == 0:
        print(f'skipped {not_searched}', file=sys.stderr)
    skipped = non_videos(args.inputs, args.out)
    if skipped and rank == 0:
        print(f'skipped {len(skipped)} file(s) not named as videos ({", ".join(VIDEO_EXTENSIONS)}'
              f'): {", ".join(p.name for p in skipped[:5])}{", ..." if len(skipped) > 5 else ""}'
              ' (rename a video to one of these extensions to extract it)', file=sys.stderr)
    s3d = load_s3d_for_tool(args.weights, args.random_weights,
                            checked_device(args.device) if args.device else device)
    extra = dict(usable=np.bool_(not args.random_weights))
    if args.random_weights:
        extra['warning'] = np.str_(RANDOM_WEIGHTS_WARNING)
    result = extract_videos(s3d, videos, args.out, recipe, naming=args.naming, rank=rank,
                            world_size=world, num_workers=args.num_workers,
                            batch_chunks=args.batch_chunks, extra=extra,
                            settings=settings_of(args, recipe),
                            barrier=torch.distributed.barrier if world > 1 else lambda: None)
    print(f'rank {rank}/{world}: {len(result.done)} written, {len(result.skipped)} already '
          f'there, {len(result.failed)} failed; {result.frames} frames in '
          f'{result.seconds:.1f} s' + (f'; {len(result.damaged)} written from damaged data '
                                        '(named above)' if result.damaged else ''))
    if world > 1:
        torch.distributed.barrier()
    failures = merge_failures(args.out, world) if rank == 0 else []
    if rank == 0:
        write_provenance(args.out, provenance_record(args, recipe))
    shutdown_distributed()
    if args.random_weights:
        print(f'WARNING: {RANDOM_WEIGHTS_WARNING}')
    if failures:
        raise ValueError(f'{len(failures)} video(s) could not be read (no feature file '
                         f'written for them), listed with the reason in {args.out}/'
                         f'failures.tsv; first: {failures[0]}')
    return 1 if result.failed else 0


if __name__ == '__main__':
    status = main()
    from vpn_plugin.compat import exit_distributed_rank  # (torch: not for --help)
    exit_distributed_rank(status)
    sys.exit(status)

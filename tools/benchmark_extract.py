"""Where the time of feature extraction goes: decoding vs the S3D network, in frames per second.

    nice -n 10 python tools/benchmark_extract.py [--seconds 20] [--batches 1 8] [--device cpu]

Decoding: a synthetic video (ffmpeg ``testsrc2``, ``--width`` x ``--height`` at 30 fps, H.264)
decoded with the default recipe (16 fps, centre crop, 224 x 224), with and without the JPEG
round trip. Network: S3D (random weights; the speed does not depend on them) on 16-frame
chunks at ``--size``, per batch size, timed after a warm-up call; frames/s = chunks x 16 /
seconds. Prints one table and whether the network at the largest batch is at least as fast
per chunk as at batch 1.
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from vpn_plugin.errors import POSITIVE_INT, parse_once, tool_main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=POSITIVE_INT, default=20, help='video length')
    parser.add_argument('--width', type=POSITIVE_INT, default=640)
    parser.add_argument('--height', type=POSITIVE_INT, default=360)
    parser.add_argument('--size', type=POSITIVE_INT, default=224, help='network input side')
    parser.add_argument('--batches', type=POSITIVE_INT, nargs='+', default=[1, 8],
                        help='chunks per network call to time (default 1 8)')
    parser.add_argument('--repeats', type=POSITIVE_INT, default=3)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    return parse_once(parser, argv)


def make_video(path: Path, seconds: int, width: int, height: int) -> None:
    from vpn_plugin.video.decode import ffmpeg_executable
    subprocess.run([ffmpeg_executable(), '-v', 'error', '-f', 'lavfi', '-i',
                    f'testsrc2=size={width}x{height}:rate=30', '-t', str(seconds), '-pix_fmt',
                    'yuv420p', '-c:v', 'libx264', '-y', str(path)], check=True)


def time_decoding(path: Path, recipe, repeats: int):
    from vpn_plugin.video import decode_video
    times, frames = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        frames = len(decode_video(path, recipe))
        times.append(time.perf_counter() - start)
    return frames, statistics.median(times)


def time_network(s3d, batch: int, size: int, repeats: int, device: str) -> float:
    """Median seconds of one call on ``batch`` chunks (B, 3, 16, size, size)."""
    x = torch.rand(batch, 3, 16, size, size, device=device)
    times = []
    with torch.no_grad():
        s3d(x)  # warm-up
        for _ in range(repeats):
            if device.startswith('cuda'):
                torch.cuda.synchronize()
            start = time.perf_counter()
            s3d(x)
            if device.startswith('cuda'):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


@tool_main
def main(argv=None):
    args = parse_args(argv)
    from vpn_plugin.errors import checked_device
    args.device = checked_device(args.device)  # before a traceback from torch
    import vpn_plugin.mm  # noqa: F401
    from vpn_plugin.apis import init_s3d
    from vpn_plugin.video import FrameRecipe
    print(f'torch {torch.__version__}, {torch.get_num_threads()} threads, device '
          f'{args.device}' + (f' ({torch.cuda.get_device_name()})'
                              if args.device.startswith('cuda') else ''))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        video = Path(folder) / 'bench.mp4'
        make_video(video, args.seconds, args.width, args.height)
        for label, quality in (('decode + crop + 224 + JPEG q95', 95),
                               ('decode + crop + 224 (no JPEG)', None)):
            frames, seconds = time_decoding(video, FrameRecipe(jpeg_quality=quality),
                                            args.repeats)
            rows.append((f'{label} ({args.width}x{args.height} H.264)', frames / seconds))
    s3d = init_s3d(random_weights=True, device=args.device)
    per_chunk = {}
    for batch in args.batches:
        seconds = time_network(s3d, batch, args.size, args.repeats, args.device)
        per_chunk[batch] = seconds / batch
        rows.append((f'S3D {args.size}px, batch {batch} chunks ({seconds / batch * 1e3:.0f} '
                     'ms/chunk)', 16 * batch / seconds))
    for label, fps in rows:
        print(f'{label:<60} {fps:10.1f} frames/s')
    decode_fps, network_fps = rows[0][1], 16 / min(per_chunk.values())
    share = (1 / network_fps) / (1 / network_fps + 1 / decode_fps)
    print(f'where the time goes (one process, recipe with JPEG, best batch): network '
          f'{100 * share:.1f} %, decoding {100 * (1 - share):.1f} %')
    largest = max(args.batches)
    if 1 in per_chunk and largest > 1:
        ratio = per_chunk[1] / per_chunk[largest]
        print(f'batch {largest} vs 1: {ratio:.2f}x the per-chunk speed '
              f'({"not slower" if ratio >= 1 else "SLOWER"} per chunk)')
    return 0


if __name__ == '__main__':
    sys.exit(main())

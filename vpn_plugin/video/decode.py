"""Video file -> uint8 RGB frames (T, S, S, 3), streamed in blocks, with the ffmpeg binary that
the ``imageio-ffmpeg`` package ships (so P3IV's exact ffmpeg filters apply); then the JPEG
round trip of the recipe (PIL, as P3IV)."""
from __future__ import annotations

import io
import math
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

from ..errors import path_kind
from .recipe import FrameRecipe


class UnreadableVideoError(ValueError):
    """A video file ffmpeg cannot decode (or that holds no frame); names the file and why."""

    def __init__(self, path, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f'{path}: {reason}')


def ffmpeg_executable() -> str:
    try:
        import imageio_ffmpeg
    except ImportError as error:
        raise ImportError('video decoding needs the imageio-ffmpeg package (pip install '
                          "'imageio-ffmpeg>=0.5,<0.7'; it ships the ffmpeg binary)") from error
    return imageio_ffmpeg.get_ffmpeg_exe()


def ffmpeg_command(path, recipe: FrameRecipe) -> list:
    return [ffmpeg_executable(), '-nostdin', '-v', 'error', '-i', str(path),
            '-vf', recipe.ffmpeg_filter(), '-an', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:']


def iter_frame_blocks(path, recipe: FrameRecipe, block_frames: int) -> Iterator[np.ndarray]:
    """Blocks of up to ``block_frames`` frames (n, S, S, 3) uint8, JPEG round trip applied.
    Raises ``UnreadableVideoError`` (missing file, ffmpeg error, no frame, truncated frame)
    after the blocks it could read: a caller keeps nothing of a video that fails."""
    path = Path(path)
    if not path.is_file():
        raise UnreadableVideoError(path, 'no such file' if not path.exists() else
                                   f'not a regular file ({path_kind(path)})')
    probe_video(path)
    frame_bytes = recipe.size * recipe.size * 3
    with tempfile.TemporaryFile() as errors:  # ffmpeg's messages: unnamed, in $TMPDIR
        process = subprocess.Popen(ffmpeg_command(path, recipe), stdout=subprocess.PIPE,
                                   stderr=errors, stdin=subprocess.DEVNULL)
        total = 0
        try:
            while True:
                data = _read_exactly(process.stdout, block_frames * frame_bytes)
                if len(data) % frame_bytes:
                    raise UnreadableVideoError(path, 'ffmpeg output ends inside a frame')
                if data:
                    total += len(data) // frame_bytes
                    frames = np.frombuffer(data, np.uint8).reshape(-1, recipe.size,
                                                                   recipe.size, 3)
                    yield jpeg_round_trip(frames, recipe.jpeg_quality)
                if len(data) < block_frames * frame_bytes:
                    break
        finally:
            if process.poll() is None:
                process.kill()
            process.stdout.close()
            code = process.wait()
        if code != 0:
            errors.seek(0)
            raise UnreadableVideoError(path, f'ffmpeg failed (exit {code}): '
                                             f'{_last_line(errors.read())}')
        if total == 0:
            raise UnreadableVideoError(path, 'no video frame decoded (no video stream, or an '
                                             'empty one)')


IMAGE_FORMATS = ('image2',)  # and every '*_pipe' demuxer (png_pipe, jpeg_pipe): a still image


def probe_video(path) -> None:
    """What ffmpeg finds in ``path`` (``ffmpeg -i``: its container and streams), so that a file
    that is no video is refused by name instead of decoded into features: a still image
    (a PNG named ``.mp4`` would give one frame), a file with no video stream (audio only: an
    ``.mp4`` of a podcast), or one ffmpeg cannot open. ``UnreadableVideoError`` saying which."""
    result = subprocess.run([ffmpeg_executable(), '-hide_banner', '-nostdin', '-i', str(path)],
                            stdin=subprocess.DEVNULL, capture_output=True)
    lines = result.stderr.decode('utf-8', 'replace').splitlines()
    container = next((line.split(',', 1)[1].rsplit(', from', 1)[0].strip()
                      for line in lines if line.startswith('Input #0,')), None)
    if container is None:
        raise UnreadableVideoError(path, f'ffmpeg cannot open it as a video: '
                                         f'{_last_line(result.stderr)}')
    streams = [line.split(': ', 1)[1].strip() for line in lines
               if line.strip().startswith('Stream #0:') and ': ' in line]
    if container.endswith('_pipe') or container in IMAGE_FORMATS:
        raise UnreadableVideoError(path, f'a still image ({container}), not a video')
    if not any(s.startswith('Video:') and 'attached pic' not in s for s in streams):
        raise UnreadableVideoError(path, 'no video stream (ffmpeg finds: '
                                         f'{"; ".join(streams) or "no stream"})')


DURATION = re.compile(rb'Duration: (\d+):(\d\d):(\d\d(?:\.\d+)?)')


def probe_frames(path, recipe: FrameRecipe):
    """The frames decoding ``path`` with ``recipe`` will give, from the container's duration
    (``ffmpeg -i``: the header only, no decoding) x ``recipe.fps``; None when the file states
    no duration or the recipe keeps the file's own frames. An estimate, for progress lines."""
    if recipe.fps is None:
        return None
    try:
        probe = subprocess.run([ffmpeg_executable(), '-nostdin', '-hide_banner', '-i', str(path)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = DURATION.search(probe.stderr)
    if not found:
        return None
    hours, minutes, seconds = (float(part) for part in found.groups())
    return math.ceil((hours * 3600 + minutes * 60 + seconds) * recipe.fps)


def decode_video(path, recipe: FrameRecipe = FrameRecipe()) -> np.ndarray:
    """All frames of ``path`` (T, S, S, 3) uint8 (for short videos and tests; the extractor
    streams blocks)."""
    return np.concatenate(list(iter_frame_blocks(path, recipe, 1024)))


def jpeg_round_trip(frames: np.ndarray, quality) -> np.ndarray:
    """Each frame JPEG-encoded (PIL, ``quality``, ``optimize=True``) and decoded; None: as is."""
    if quality is None:
        return frames
    from PIL import Image
    out = np.empty_like(frames)
    for i, frame in enumerate(frames):
        buffer = io.BytesIO()
        Image.fromarray(frame).save(buffer, 'jpeg', quality=int(quality), optimize=True)
        buffer.seek(0)
        out[i] = np.asarray(Image.open(buffer).convert('RGB'))
    return out


def _read_exactly(stream, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = stream.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b''.join(parts)


def _last_line(raw: bytes) -> str:
    lines = [line.strip() for line in raw.decode('utf-8', 'replace').splitlines() if line.strip()]
    return lines[-1] if lines else 'no message'

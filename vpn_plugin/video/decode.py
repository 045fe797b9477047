"""Video file -> uint8 RGB frames (T, S, S, 3), streamed in blocks, with the ffmpeg binary that
the ``imageio-ffmpeg`` package ships (so P3IV's exact ffmpeg filters apply); then the JPEG
round trip of the recipe (PIL, as P3IV)."""
from __future__ import annotations

import io
import math
import os
import re
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Tuple

import numpy as np

from ..errors import link_problem, path_kind
from .recipe import FrameRecipe, check_recipe, row_seconds_problem


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


def ffmpeg_input(path) -> str:
    """``path`` as ffmpeg's ``-i`` argument: ``file:`` and the absolute path, so that a file
    named like one of ffmpeg's protocols (``concat:a.mp4`` decoded ``a.mp4``; ``file:x.mp4``
    opened ``x.mp4``) is the file read."""
    return 'file:' + os.path.abspath(path)


def ffmpeg_command(path, recipe: FrameRecipe) -> list:
    return [ffmpeg_executable(), '-nostdin', '-v', 'error', '-i', ffmpeg_input(path),
            '-vf', recipe.ffmpeg_filter(), '-an', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:']


def iter_frame_blocks(path, recipe: FrameRecipe, block_frames: int,
                      header: Optional[VideoHeader] = None,
                      damage: Optional[list] = None) -> Iterator[np.ndarray]:
    """Blocks of up to ``block_frames`` frames (n, S, S, 3) uint8, JPEG round trip applied.
    ``header``: the file's :func:`probe_video` when the caller already has it (else probed
    here). Raises ``UnreadableVideoError`` (missing file, no video, ffmpeg error, no frame,
    truncated frame) after the blocks it could read: a caller keeps nothing of a video that
    fails. ``damage``: a list that gets one line (:func:`damage_note`) when ffmpeg decoded the
    file but reported errors (damaged data: the frames there are concealed or repeated);
    without it that is a ``UserWarning``."""
    check_recipe(recipe)
    path = Path(path)
    if header is None:
        header = probe_video(path)
    check_time_step(path, header, recipe)
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
        errors.seek(0)
        messages = errors.read()
        if code != 0:
            raise UnreadableVideoError(path, f'ffmpeg failed (exit {code}): '
                                             f'{_last_line(messages)}')
        if messages.strip():
            note = damage_note(messages)
            if damage is None:
                warnings.warn(f'{path}: {note}', stacklevel=2)
            else:
                damage.append(note)
        if total == 0:
            stated = header.seconds if header is not None else None
            if recipe.fps is not None and stated:
                raise UnreadableVideoError(path, f'no frame: fps={recipe.fps:g} samples none of '
                                                 f'its {stated:g} s (a frame every '
                                                 f'{1 / recipe.fps:g} s)')
            raise UnreadableVideoError(path, 'no video frame decoded (no video stream, or an '
                                             'empty one)')


IMAGE_FORMATS = ('image2',)  # and every '*_pipe' demuxer (png_pipe, jpeg_pipe): a still image
STREAM_FPS = re.compile(r'(\d+(?:\.\d+)?) fps\b')
STREAM_TBR = re.compile(r'(\d+(?:\.\d+)?)(k?) tbr\b')  # '16 tbr', '1k tbr'
DURATION = re.compile(r'Duration: (\d+):(\d\d):(\d\d(?:\.\d+)?)')


@dataclass(frozen=True)
class VideoHeader:
    """What ``ffmpeg -i`` reads from a file's header (no decoding)."""
    container: str
    streams: Tuple[str, ...]
    seconds: Optional[float]  # the stated duration; None when the file states none


def probe_video(path) -> VideoHeader:
    """The header of ``path`` (``ffmpeg -i``: its container, streams and duration), so that a
    file that is no video is refused by name instead of decoded into features: a missing file
    or no regular file, a still image (a PNG named ``.mp4`` would give one frame), a file with
    no video stream (audio only: an ``.mp4`` of a podcast), or one ffmpeg cannot open.
    ``UnreadableVideoError`` saying which."""
    path = Path(path)
    if not path.is_file():
        frames = (' (a folder of frames is no video: ffmpeg -framerate FPS -i '
                  f'{path}/%04d.jpg makes one)') if path.is_dir() else ''
        absent = link_problem(path) or 'no such file'  # a broken link never exists
        raise UnreadableVideoError(path, absent if not path.exists() else
                                   f'not a regular file ({path_kind(path)}); expected a video '
                                   f'file{frames}')
    if path.stat().st_size == 0:
        raise UnreadableVideoError(path, 'an empty file (0 bytes), not a video')
    result = subprocess.run([ffmpeg_executable(), '-hide_banner', '-nostdin', '-i',
                             ffmpeg_input(path)],
                            stdin=subprocess.DEVNULL, capture_output=True)
    if result.returncode < 0:  # killed by a signal: ffmpeg crashed on the file
        raise UnreadableVideoError(path, f'ffmpeg crashed reading its header (signal '
                                         f'{-result.returncode}): a damaged file, or a '
                                         'container this ffmpeg cannot read; convert it to '
                                         'another container (e.g. .mkv) and retry')
    text = result.stderr.decode('utf-8', 'replace')
    lines = text.splitlines()
    container = next((line.split(',', 1)[1].split(', from ', 1)[0].strip()
                      for line in lines if line.startswith('Input #0,')), None)
    if container is None:
        raise UnreadableVideoError(path, f'ffmpeg cannot open it as a video: '
                                         f'{_last_line(result.stderr)}')
    streams = tuple(line.split(': ', 1)[1].strip() for line in lines
                    if line.strip().startswith('Stream #0:') and ': ' in line)
    if container.endswith('_pipe') or container in IMAGE_FORMATS:
        raise UnreadableVideoError(path, f'a still image ({container}), not a video')
    if container == 'gif' and _source_frames(path) == 1:  # a GIF is an image or an animation
        raise UnreadableVideoError(path, 'a still image (a GIF of one frame), not a video')
    videos = [s for s in streams if s.startswith('Video:') and 'attached pic' not in s]
    if not videos:
        raise UnreadableVideoError(path, 'no video stream (ffmpeg finds: '
                                         f'{"; ".join(streams) or "no stream"})')
    if len(videos) > 1:  # ffmpeg would pick one by its own rule, recorded nowhere
        raise UnreadableVideoError(path, f'{len(videos)} video streams ({"; ".join(videos)}); '
                                         'expected one: keep the one to extract (ffmpeg -i '
                                         f'{path} -map 0:v:N -c copy <new file>)')
    found = DURATION.search(text)
    seconds = None
    if found:
        hours, minutes, rest = (float(part) for part in found.groups())
        seconds = hours * 3600 + minutes * 60 + rest
    return VideoHeader(container, streams, seconds)


def _source_frames(path) -> Optional[int]:
    """The frames of the file's video stream as stored (decoded, no rate conversion: GIFs are
    small); None when ffmpeg does not say."""
    result = subprocess.run([ffmpeg_executable(), '-hide_banner', '-nostdin', '-i',
                             ffmpeg_input(path), '-map', '0:v:0', '-fps_mode', 'passthrough',
                             '-f', 'null', '-'], stdin=subprocess.DEVNULL, capture_output=True)
    counts = re.findall(rb'frame=\s*(\d+)', result.stderr)
    return int(counts[-1]) if counts else None


def expected_frames(header: VideoHeader, recipe: FrameRecipe) -> Optional[int]:
    """The frames decoding the file with ``recipe`` will give, from its stated duration x
    ``recipe.fps`` (the file's own frames: the rate its video stream states); None when the
    file states neither. An estimate, for progress lines."""
    fps = recipe.fps if recipe.fps is not None else stream_fps(header)
    if fps is None or header.seconds is None:
        return None
    return math.ceil(header.seconds * fps)


def stream_fps(header: VideoHeader) -> Optional[float]:
    """The rate of the frames ffmpeg gives for the file's own frames (``ffmpeg -i``: its 'tbr',
    '16 tbr': a variable-rate video's frames come out at that constant rate, repeated or
    dropped; 8 then 24 fps, stated '15.51 fps', gives 16 frames a second), else the rate it
    states ('30 fps'); None when it states neither."""
    video = [s for s in header.streams if s.startswith('Video:')]
    tbr = next((m for m in map(STREAM_TBR.search, video) if m), None)
    if tbr:
        return float(tbr.group(1)) * (1000 if tbr.group(2) else 1)
    found = next((m for m in map(STREAM_FPS.search, video) if m), None)
    return float(found.group(1)) if found else None


def stream_rate_words(header: VideoHeader) -> str:
    """What is known of :func:`stream_fps`, for messages: "the file's own 30 fps" when the
    stream states the rate ffmpeg gives its frames at; a 'tbr' of another rate than the one
    stated (a variable frame rate) or none stated is named as ffmpeg's 'tbr', never as the
    file's own rate."""
    video = [s for s in header.streams if s.startswith('Video:')]
    tbr = next((m for m in map(STREAM_TBR.search, video) if m), None)
    stated = next((m for m in map(STREAM_FPS.search, video) if m), None)
    fps = stream_fps(header)
    if tbr is None or (stated is not None and float(stated.group(1)) == fps):
        return f"the file's own {fps:g} fps"
    average = (f'the stream states {float(stated.group(1)):g} fps on average: a variable frame '
               'rate' if stated else 'the stream states no rate')
    return (f"{fps:g} fps (ffmpeg's 'tbr' of its video stream, the rate it gives its frames "
            f'at; {average})')


def check_time_step(path, header: VideoHeader, recipe: FrameRecipe) -> None:
    """``UnreadableVideoError`` unless ``recipe`` gives one feature row per second of this
    video (``row_seconds_problem`` over its seconds: rows of about a second read only while
    they drift less than half a second over the video): with the file's own frames
    (``recipe.fps`` None, ``--native-fps``) a row is ``recipe.chunk`` frames at the rate the
    video states (16 at 30 fps: 0.53 s, which every reader would take for a second); a file
    that states no rate cannot be told."""
    native = None
    if recipe.fps is not None and row_seconds_problem(recipe.as_dict()):
        return  # the recipe alone says it: refused before any video by the tools
    if recipe.fps is None:
        native = stream_fps(header)
        if native is None:
            raise UnreadableVideoError(path, 'its video stream states no frame rate, so the '
                                             'seconds of a feature row of its own frames '
                                             '(--native-fps) cannot be told; give --fps')
    rows = (None if header.seconds is None
            else math.ceil(header.seconds * (recipe.fps or native) / recipe.chunk))
    problem = row_seconds_problem(recipe.as_dict(), native, rows,
                                  stream_rate_words(header) if native is not None else '')
    if problem:
        raise UnreadableVideoError(path, f'{problem}: give --fps {recipe.chunk} (its frames '
                                         f'resampled to {recipe.chunk} per second)')


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


def damage_note(messages: bytes) -> str:
    """What ffmpeg's errors on a file it decoded to the end mean for its features."""
    count = len([line for line in messages.splitlines() if line.strip()])
    return (f'ffmpeg decoded it but reported {count} error line(s) (last: '
            f'{_last_line(messages)}): damaged data, whose frames ffmpeg concealed, '
            'repeated or could not decode; its features are kept (re-encode or replace the '
            'file to extract it cleanly)')


def _last_line(raw: bytes) -> str:
    lines = [line.strip() for line in raw.decode('utf-8', 'replace').splitlines() if line.strip()]
    return lines[-1] if lines else 'no message'

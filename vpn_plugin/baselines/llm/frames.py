"""Frames of the start and goal clips for the VLM baseline, as base64 image content."""
from __future__ import annotations

import base64
from pathlib import Path

import numpy as np

from ...config_types import Count, NonNegative, PathLike, Positive, checked_arguments
from ...errors import link_problem, plain_text

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp')
VIDEO_SUFFIXES = ('.mp4', '.avi', '.mkv', '.webm', '.mov')


@checked_arguments
def clip_frame_times(start_s: NonNegative, end_s: NonNegative, num_frames: Count) -> np.ndarray:
    """``num_frames`` times evenly inside [start_s, end_s] (segment centres)."""
    if end_s < start_s:
        raise ValueError(f'clip [{start_s}, {end_s}] s: expected end >= start')
    return start_s + (np.arange(num_frames) + 0.5) * (end_s - start_s) / num_frames


@checked_arguments
def find_video_source(video_root: PathLike, vid: str) -> Path:
    """``<root>/<vid>.<video ext>`` or a frames folder ``<root>/<vid>/``."""
    root = Path(video_root)
    if (root / vid).is_dir():
        return root / vid
    for suffix in VIDEO_SUFFIXES:
        if (root / f'{vid}{suffix}').is_file():
            return root / f'{vid}{suffix}'
    import glob
    other = sorted(p.name for p in root.glob(f'{glob.escape(vid)}.*')
                   if p.suffix.lower() in VIDEO_SUFFIXES and p.suffix not in VIDEO_SUFFIXES)
    hint = (f'; the folder holds {" and ".join(other)}, whose extension differs only by case '
            '(not read: rename it)') if other else ''
    raise FileNotFoundError(f'video {plain_text(vid)}: neither a folder '
                            f'{plain_text(root / vid)} nor a file {plain_text(root / vid)}'
                            f'{{{",".join(VIDEO_SUFFIXES)}}}{plain_text(hint)}')


@checked_arguments
def read_clip_frames(source: PathLike, start_s: NonNegative, end_s: NonNegative,
                     num_frames: Count, *, folder_fps: Positive = 1.0,
                     max_side: Count = 512) -> list[bytes]:
    """JPEG bytes of ``num_frames`` frames of [start_s, end_s] from a video file or a folder.

    A folder holds one image per frame, numbered (``1.jpg`` or ``0001.jpg`` .. as ffmpeg's
    ``%d.jpg`` / ``%04d.jpg`` write them, from 0 or 1, none missing), at ``folder_fps`` frames
    per second; other images in it are refused (:func:`_numbered_frames`). A time up to one frame past the last is read at the last frame
    (annotations round to seconds); a clip further past the end is refused (a truncated
    folder or video, another frame rate than ``folder_fps``), naming the times and the length.
    """
    source = Path(source)
    times = clip_frame_times(start_s, end_s, num_frames)
    frames = (_read_folder(source, times, folder_fps) if source.is_dir()
              else _read_video(source, times))
    return [_encode_jpeg(frame, max_side, source) for frame in frames]


def _read_folder(folder: Path, times: np.ndarray, fps: float) -> list[np.ndarray]:
    import cv2
    files = _numbered_frames(folder)
    _check_within(f'frames folder {folder}', times, fps, len(files),
                  f'{fps:g} frames per second (--frames-fps)')
    frames = []
    for t in times:
        path = files[min(int(t * fps), len(files) - 1)]
        image = cv2.imread(str(path))
        if image is None:
            raise ValueError(f'frame {path}: {_unreadable(path)}; expected an image file '
                             f'OpenCV decodes ({", ".join(IMAGE_SUFFIXES)})')
        frames.append(image)
    return frames


def _unreadable(path: Path) -> str:
    """Why OpenCV read no image from ``path``: a broken link, a folder, an empty file, or a
    file it does not decode."""
    if link_problem(path):
        return link_problem(path)
    if path.is_dir():
        return 'a folder, not an image file'
    if path.is_file() and path.stat().st_size == 0:
        return 'empty (0 bytes)'
    return 'OpenCV cannot decode it as an image'


def _numbered_frames(folder: Path) -> list[Path]:
    """The images of a frames folder in time order: one name pattern with a frame number
    (``0001.jpg``, ``frame_12.png``, ``frame_0001_v2.jpg``: :func:`_frame_numbers`), numbers
    consecutive from 0 or 1.
    Anything else is refused, naming the files: an image without a number (``cover.jpg``) or
    of another pattern (``._0001.jpg``) would be counted as frames after the last one, a
    number given twice (``1.jpg`` beside ``0001.jpg``, ``0001.png`` beside ``0001.jpg``,
    ``img_0001.jpg`` beside ``frame_0001.jpg``: two extractions) as two frames, a missing
    number (``0011.jpg``) would shift every later time by a frame."""
    images = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not images:
        raise FileNotFoundError(f'frames folder {folder}: no images ({", ".join(IMAGE_SUFFIXES)})')
    metadata = [p.name for p in images if p.name.startswith('._') and p.is_file()
                and _head(p) == APPLE_DOUBLE]
    if metadata:  # named as an image, it is none: "two images of one frame" would be false
        raise ValueError(f'frames folder {folder}: {metadata[0]} is macOS metadata (an '
                         f'AppleDouble "._" file, {len(metadata)} such), no image; expected only '
                         'the frames in the folder (delete the "._" files, e.g. dot_clean)')
    parsed = _frame_numbers(images)
    unnumbered = [path.name for path, match in parsed.items() if match is None]
    if unnumbered:
        example = next((p.name for p, m in parsed.items() if m), '0001.jpg')
        raise ValueError(f'frames folder {folder}: {unnumbered[0]} is no numbered frame like '
                         f'{example} ({len(unnumbered)} such image(s)); expected only the frames '
                         f'in the folder, numbered (move {unnumbered[0]} out)')
    numbered, patterns = {}, {}
    for path, (before, digits, after) in parsed.items():
        number = int(digits)
        if number in numbered:
            raise ValueError(f'frames folder {folder}: {numbered[number].name} and {path.name} '
                             f'are two images of one frame (number {number}); expected one '
                             'image per frame (remove one of the two extractions)')
        numbered[number] = path
        patterns.setdefault((before, after, path.suffix.lower()), path.name)
    if len(patterns) > 1:
        first, second = list(patterns.values())[:2]
        raise ValueError(f'frames folder {folder}: {first} and {second} are named in '
                         f'{len(patterns)} different ways; expected the frames of one '
                         'extraction only, one name pattern (remove the other images)')
    numbers = sorted(numbered)
    missing = sorted(set(range(min(numbers[0], 1), numbers[-1] + 1)) - set(numbers))
    if missing:
        raise ValueError(f'frames folder {folder}: frame number(s) {_ranges(missing)} missing '
                         f'among {numbered[numbers[0]].name} .. {numbered[numbers[-1]].name}; '
                         'expected consecutive frames from 0 or 1 (a missing frame would '
                         'shift every later time by a frame)')
    return [numbered[n] for n in numbers]


APPLE_DOUBLE = b'\x00\x05\x16\x07'  # the first bytes of a macOS "._" metadata file


def _head(path: Path) -> bytes:
    with open(path, 'rb') as handle:
        return handle.read(len(APPLE_DOUBLE))


def _frame_numbers(images: list) -> dict:
    """``{path: (text before, frame number digits, text after)}`` (None: no digit in the name).
    The frame number is the run of digits that varies among the images named alike (same text
    around the digits, same suffix): ``frame_0001_v2.jpg``, ``0001_640x480.png``; the last run
    when none or several vary (one image; ``img1_0001.jpg`` beside ``img2_0001.jpg``, then
    named in two ways)."""
    import re
    groups, found = {}, {}
    for path in images:
        parts = re.split(r'([0-9]+)', path.stem)  # text, digits, text, ..., text
        if len(parts) == 1:
            found[path] = None
            continue
        groups.setdefault((tuple(parts[0::2]), path.suffix.lower()), []).append((path, parts))
    varying = {key: [run for run in range(len(members[0][1]) // 2)
                     if len({int(parts[2 * run + 1]) for _, parts in members}) > 1]
               for key, members in groups.items()}
    # where the images named alike vary in one run, after which text: an image named apart
    # with that text before a run (`img0014 (1).jpg` beside `img0001.jpg`) has its number there
    numbered_after = {key[0][run] for key, runs in varying.items() if len(runs) == 1
                      for run in runs}
    for key, members in groups.items():
        runs = len(members[0][1]) // 2
        run = varying[key][0] if len(varying[key]) == 1 else next(
            (r for r in range(runs) if not varying[key] and key[0][r] in numbered_after),
            runs - 1)
        at = 2 * run + 1
        for path, parts in members:
            found[path] = (''.join(parts[:at]), parts[at], ''.join(parts[at + 1:]))
    return {path: found[path] for path in images}


def _ranges(numbers: list) -> str:
    """'11, 15-17' of sorted ints (at most 5 runs shown)."""
    runs, start = [], numbers[0]
    for previous, number in zip(numbers, numbers[1:] + [None]):
        if number != previous + 1:
            runs.append(str(start) if start == previous else f'{start}-{previous}')
            start = number
    return ', '.join(runs[:5]) + (f' (and {len(runs) - 5} more runs)' if len(runs) > 5 else '')


def _check_within(source: str, times: np.ndarray, fps: float, count: int, rate: str) -> None:
    """Refuse clip times (s) more than one frame past the ``count`` frames of ``source``."""
    late = times[np.floor(times * fps) > count]
    if len(late):
        raise ValueError(f'{source}: the clip frame at {late[0]:.2f} s lies past its end ('
                         f'{count} frames at {rate}: {count / fps:.2f} s); expected frames '
                         'that cover the annotated segments (a truncated folder or video, '
                         'or another frame rate)')


def _read_video(path: Path, times: np.ndarray) -> list[np.ndarray]:
    import cv2
    capture = cv2.VideoCapture(str(path))
    try:
        if not capture.isOpened():
            size = path.stat().st_size if path.is_file() else None
            why = 'it is empty (0 bytes)' if size == 0 else 'OpenCV cannot open it'
            raise ValueError(f'video {path}: {why}; expected a video file OpenCV decodes '
                             f'({", ".join(VIDEO_SUFFIXES)}), or a folder of its frames')
        fps = capture.get(cv2.CAP_PROP_FPS) or 0.0
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        if fps <= 0 or count <= 0:
            raise ValueError(f'video {path}: unknown frame rate ({fps}) or frame count ({count})')
        _check_within(f'video {path}', times, fps, count, f'{fps:g} frames per second')
        frames = []
        for t in times:
            capture.set(cv2.CAP_PROP_POS_FRAMES, min(int(t * fps), count - 1))
            ok, image = capture.read()
            if not ok:
                raise ValueError(f'video {path}: cannot decode the frame at {t:.2f} s')
            frames.append(image)
        return frames
    finally:
        capture.release()


def _encode_jpeg(image: np.ndarray, max_side: int, source: Path) -> bytes:
    import cv2
    scale = max_side / max(image.shape[:2])
    if scale < 1:
        image = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    ok, buffer = cv2.imencode('.jpg', image)
    if not ok:
        raise ValueError(f'{source}: a frame could not be encoded as JPEG')
    return buffer.tobytes()


def image_parts(jpegs: list[bytes]) -> list[dict]:
    """Chat-completions ``image_url`` content parts holding base64 data URLs."""
    return [{'type': 'image_url',
             'image_url': {'url': 'data:image/jpeg;base64,' + base64.b64encode(j).decode('ascii')}}
            for j in jpegs]

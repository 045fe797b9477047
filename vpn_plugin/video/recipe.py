"""The frame recipe of the public S3D features (P3IV's ``raw_data_process``), each step named.

Default = P3IV: the whole video at 16 fps (ffmpeg ``fps``), the centre square of side
min(w, h), scaled to 224 x 224 (ffmpeg ``scale``, default flags), RGB; each frame through a
JPEG quality-95 round trip (PIL, ``optimize=True``; P3IV stored frames as JPEG in TFRecords);
non-overlapping 16-frame chunks, the last one padded with black; uint8 / 255, no mean/std.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Optional

import numpy as np

from ..errors import POSITIVE_FLOAT, POSITIVE_INT, at_least, check_number

CROPS = ('center', 'none')
MAX_FPS = 1000  # a frame per millisecond: more only repeats decoded frames
MAX_SIZE = 1024
DEFAULT_FPS = 16.0
ROW_SECONDS_TOLERANCE = 0.1  # "about one per second": chunk 32 at 30 fps (1.07 s) may read,
MAX_DRIFT_SECONDS = 0.5  # while its rows drift less than half a second (row_seconds_problem)


@dataclasses.dataclass(frozen=True)
class FrameRecipe:
    """How frames are made from a video file (module docstring).

    fps: frames per second sampled by ffmpeg's ``fps`` filter (None: the file's own frames).
    crop: 'center' (square of side min(w, h), as P3IV) or 'none' (the whole frame, squashed).
    size: output side in pixels (square frames).
    jpeg_quality: JPEG round trip quality (1-100), None for no round trip.
    chunk: frames per network input (one feature row per chunk).
    """
    fps: Optional[float] = 16.0
    crop: str = 'center'
    size: int = 224
    jpeg_quality: Optional[int] = 95
    chunk: int = 16

    def __post_init__(self):
        # the kinds first ('16' or 64.0 failed later in a comparison or in PIL, naming no field)
        check_number('FrameRecipe fps', self.fps, optional=True)
        for name in ('size', 'chunk', 'jpeg_quality'):
            check_number(f'FrameRecipe {name}', getattr(self, name), integer=True,
                         optional=name == 'jpeg_quality')
        if self.fps is not None and not 0 < self.fps <= MAX_FPS:
            raise ValueError(f'fps={self.fps:g}: expected a positive number of frames per second '
                             f'up to {MAX_FPS} (or --native-fps: the file\'s own frames); '
                             'beyond it ffmpeg repeats every decoded frame (--fps 1e9 made a 3 s '
                             'clip 187,500,000 chunks)')
        if self.crop not in CROPS:
            raise ValueError(f'crop={self.crop!r} is unknown; expected one of {CROPS}')
        if not 2 <= self.size <= MAX_SIZE or self.size % 2:
            raise ValueError(f'size={self.size}: expected an even number of pixels in 2..'
                             f'{MAX_SIZE} (S3D pairs pixels; the public features use 224, and '
                             'a block of 1024 decoded frames of size x size x 3 bytes is held '
                             'in memory)')
        if self.jpeg_quality is not None and not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f'jpeg_quality={self.jpeg_quality}: expected 1..100 or None')
        if self.chunk < 2 or self.chunk % 2:
            raise ValueError(f'chunk={self.chunk}: expected an even number of frames >= 2')

    def ffmpeg_filter(self) -> str:
        """The ``-vf`` chain: P3IV's ffmpeg-python graph ``fps -> crop -> scale`` (commas in
        the expressions escaped, as ffmpeg's filtergraph syntax needs)."""
        steps = [] if self.fps is None else [f'fps={self.fps:g}']
        if self.crop == 'center':
            side = r'min(iw\,ih)'
            steps.append(f'crop={side}:{side}:(iw-{side})*0.5:(ih-{side})*0.5')
        steps.append(f'scale={self.size}:{self.size}')
        return ','.join(steps)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def check_recipe(recipe, where: str = 'recipe') -> FrameRecipe:
    """``recipe`` must be a :class:`FrameRecipe` (a dict of its fields failed later as
    "'dict' object has no attribute 'chunk'"): ``TypeError`` naming ``where`` otherwise."""
    if not isinstance(recipe, FrameRecipe):
        raise TypeError(f'{where}={recipe!r}: expected a vpn_plugin.video.FrameRecipe (e.g. '
                        'FrameRecipe(size=224); a dict of its fields: FrameRecipe(**fields))')
    return recipe


def add_recipe_arguments(parser) -> None:
    """The recipe's command-line options (``tools/extract_features.py``, ``tools/plan.py
    --video``), P3IV's values as defaults."""
    group = parser.add_argument_group('frame recipe (default: P3IV, the public features)')
    group.add_argument('--fps', type=POSITIVE_FLOAT, default=None,
                       help=f'frames per second sampled by ffmpeg (default {DEFAULT_FPS:g})')
    group.add_argument('--native-fps', action='store_true',
                       help="keep the file's own frames (no fps filter)")
    group.add_argument('--crop', choices=CROPS, default='center',
                       help='center: square of side min(w, h) (default); none: whole frame')
    group.add_argument('--size', type=POSITIVE_INT, default=224,
                       help='frame side in pixels after scaling (default 224)')
    group.add_argument('--jpeg-quality', type=at_least(int, 0, high=100), default=95,
                       help='JPEG round trip quality, 0 for none (default 95, as P3IV)')
    group.add_argument('--chunk', type=POSITIVE_INT, default=16,
                       help='frames per feature row (default 16: non-overlapping, last padded)')


def recipe_from_args(args) -> FrameRecipe:
    if args.native_fps and args.fps is not None:
        raise ValueError(f'--native-fps and --fps {args.fps:g} exclude each other (--native-fps '
                         "keeps the file's own frames; --fps samples that many per second)")
    fps = None if args.native_fps else DEFAULT_FPS if args.fps is None else args.fps
    return FrameRecipe(fps=fps, crop=args.crop,
                       size=args.size, jpeg_quality=args.jpeg_quality or None,
                       chunk=args.chunk)


def row_seconds_problem(recipe, native_fps: Optional[float] = None,
                        rows: Optional[float] = None, native_words: str = '') -> str:
    """'' when a frame recipe (``{'fps', 'chunk', ...}``, or its JSON text as extraction records
    it in a feature file's ``recipe`` field) gives one feature row per second, the time base
    of every annotation and plan time (row t = second t; the public features: 16 frames at
    16 fps); else what it gives instead. A recipe without an fps (the file's own frames,
    ``--native-fps``) is judged at ``native_fps``, the rate the video states
    (``decode.check_time_step``); without it, it cannot be told here. Rows of about a second
    (within ``ROW_SECONDS_TOLERANCE``) read only while ``rows`` of them (a file's rows, a
    video's seconds; unknown: None) drift less than ``MAX_DRIFT_SECONDS`` from their seconds:
    16 frames at 15 fps (1.067 s) are 6 s off after 92 rows. ``native_words``: what is known of
    ``native_fps`` (``decode.stream_rate_words``; default "the file's own N fps")."""
    recipe = recipe_dict(recipe)
    if recipe is None:
        return ''
    fps, chunk = recipe.get('fps'), recipe.get('chunk')
    native = fps is None and native_fps is not None
    if native:
        fps = native_fps
    if not _is_number(fps) or not _is_number(chunk) or fps <= 0:
        return ''
    seconds = chunk / fps
    drift = abs(seconds - 1) * rows if rows is not None else 0.0
    if abs(seconds - 1) <= ROW_SECONDS_TOLERANCE and drift <= MAX_DRIFT_SECONDS:
        return ''
    own = native_words or f"the file's own {fps:g} fps"
    rate = f'{own} (--native-fps)' if native else f'{fps:g} fps'
    over = (f' (over {rows:g} rows the last one is {drift:.3g} s off its second; at most '
            f'{MAX_DRIFT_SECONDS:g} s read)' if abs(seconds - 1) <= ROW_SECONDS_TOLERANCE
            else '')
    return (f'frame recipe chunk {chunk:g} at {rate}: one feature row per {seconds:.4g} s'
            f'{over}; expected one row per second (chunk = fps, as the public features: 16 '
            'frames at 16 fps), the time base of annotations and plan times (row t = second t)')


def recipe_number_problem(recipe, native_fps=None) -> str:
    """'' unless ``recipe`` is a frame recipe (a mapping, or its JSON text, with ``fps`` or
    ``chunk``) whose time step cannot be told: ``chunk`` not a positive number, ``fps`` neither
    a positive number nor null, or ``native_fps`` (given: not None) not a positive number; else
    what is wrong (a recorded recipe no reader can judge is never taken for one row per
    second)."""
    twice = _keys_given_twice(recipe)
    recipe = recipe_dict(recipe)
    if recipe is None or not {'fps', 'chunk'} & set(recipe):
        return ''
    fps, chunk = recipe.get('fps'), recipe.get('chunk')
    wrong = [f'"{name}" given twice (JSON keeps the last)' for name in twice] + [
        f'no "{name}"' if name not in recipe else f'{name} = {value!r}'
        for name, value in (('chunk', chunk), ('fps', fps))
        if name not in recipe or not (_is_number(value) and value > 0)
        and not (name == 'fps' and value is None)]
    if native_fps is not None and not (_is_number(native_fps) and native_fps > 0):
        wrong.append(f'native_fps = {native_fps!r}')
    if not wrong:
        return ''
    return (f'frame recipe {json.dumps(recipe, sort_keys=True, default=str)[:200]}: '
            f'{", ".join(wrong)}; expected chunk a positive number of frames, fps a positive '
            'number of frames per second (or null with a positive "native_fps"): the seconds '
            'of a row cannot be told otherwise')


def _is_number(value) -> bool:
    """A finite real number (a bool is not one)."""
    import math
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, (bool, np.bool_)) and math.isfinite(value))


def _keys_given_twice(recipe) -> list:
    """The keys a recipe's JSON text gives more than once (json.loads keeps the last: the
    record says two things), [] for anything else."""
    if isinstance(recipe, np.ndarray) and recipe.ndim == 0:
        recipe = recipe.item()
    if not isinstance(recipe, (str, bytes)):
        return []
    twice = []

    def pairs_hook(pairs):
        keys = [key for key, _ in pairs]
        twice.extend(sorted({key for key in keys if keys.count(key) > 1}))
        return dict(pairs)
    try:
        json.loads(recipe, object_pairs_hook=pairs_hook)
    except ValueError:
        return []
    return twice


def recipe_dict(recipe) -> Optional[dict]:
    """A recorded frame recipe (a dict, its JSON text, or a 0-d array of it) as a dict; None
    when it is none of these."""
    if isinstance(recipe, np.ndarray) and recipe.ndim == 0:
        recipe = recipe.item()
    if isinstance(recipe, (str, bytes)):
        try:
            recipe = json.loads(recipe)
        except ValueError:
            return None
    return recipe if isinstance(recipe, dict) else None

"""Per-video feature files and the start/goal observation recipes.

Layouts (one feature vector per second, shape (L, D), D = 512 for S3D):

* public: ``<task>_<vid>.npy`` holding a pickled dict with key ``frames_features``; read only
  when ``allow_pickle=True`` (unpickling runs code from the file);
* ours (safe): ``<task>_<vid>.npz`` with array ``frames_features`` (no pickle); written by
  ``tools/make_synthetic_features.py --format npz`` and ``tools/convert_features.py``.

Observation recipes, for a step with whole-second times (s, e) in a video of L frames, every
frame index clamped to [0, L-1]:

* ``'concat3'`` (PDPP / ViterbiPlanNet, 3D): start = frames s, s+1, s+2 concatenated;
  goal = frames e-2, e-1, e concatenated;
* ``'mean3'`` (SCHEMA, D): start = mean of frames s-1, s, s+1; goal = mean of e-1, e, e+1.

The start state of a window is taken at its first step's start, the goal state at its last
step's end.
"""
from pathlib import Path

import numpy as np

from .annotations import BadVideoError

RECIPES = ('concat3', 'mean3')
FEATURE_KEY = 'frames_features'


def observation_dim(recipe: str, frame_dim: int) -> int:
    """Size of one observation vector for a recipe."""
    check_recipe(recipe)
    return 3 * frame_dim if recipe == 'concat3' else frame_dim


def check_recipe(recipe: str) -> None:
    if recipe not in RECIPES:
        raise ValueError(f'observation recipe {recipe!r} is unknown; expected one of {RECIPES}')


def find_feature_file(feature_dir, stem: str) -> Path:
    """``<feature_dir>/<stem>.npz`` if it exists, else ``<stem>.npy`` (may not exist)."""
    npz = Path(feature_dir) / f'{stem}.npz'
    return npz if npz.exists() else Path(feature_dir) / f'{stem}.npy'


def load_features(path, frame_dim: int, allow_pickle: bool = False, vid: str = '') -> np.ndarray:
    """Read one video's frames -> (L, D) float32; BadVideoError names the file and problem."""
    path = Path(path)
    if not path.exists():
        raise BadVideoError(vid, 'missing feature file', f'feature file {path} does not exist '
                            f'(video {vid})')
    frames = _read_frames(path, allow_pickle, vid)
    if frames.ndim != 2 or frames.shape[0] < 1 or frames.shape[1] != frame_dim:
        raise BadVideoError(vid, 'wrong feature dimension',
                            f'{path}: field "{FEATURE_KEY}" has shape {frames.shape}; expected '
                            f'(seconds, {frame_dim})')
    if not np.isfinite(frames).all():
        bad = np.flatnonzero(~np.isfinite(frames).all(axis=1))
        raise BadVideoError(vid, 'NaN/inf frames',
                            f'{path}: field "{FEATURE_KEY}" has NaN/inf values in frames '
                            f'{bad[:10].tolist()} ({len(bad)} frames)')
    return frames.astype(np.float32, copy=False)


def _read_frames(path: Path, allow_pickle: bool, vid: str) -> np.ndarray:
    try:
        if path.suffix == '.npz':
            with np.load(path, allow_pickle=False) as data:
                return np.asarray(data[FEATURE_KEY])
        with open(path, 'rb') as f:
            if f.read(6) != b'\x93NUMPY':
                raise ValueError('not a NumPy .npy file')
        data = np.load(path, allow_pickle=allow_pickle)
        if data.dtype == object:
            return np.asarray(data.item()[FEATURE_KEY], dtype=np.float32)
        return data
    except ValueError as err:
        if path.suffix == '.npy' and 'allow_pickle' in str(err):
            raise ValueError(
                f'{path} is a pickled .npy (the public feature layout); unpickling can run '
                'arbitrary code, so it is read only with allow_pickle=True in the dataset config. '
                'Either set allow_pickle=True if you trust the file, or convert the features once '
                'with tools/convert_features.py to the safe .npz layout.') from err
        raise BadVideoError(vid, 'unreadable feature file', f'cannot read {path}: {err}') from err
    except Exception as err:  # zip, pickle and OS errors of a damaged file
        raise BadVideoError(vid, 'unreadable feature file',
                            f'cannot read field "{FEATURE_KEY}" of {path}: {err!r}') from err


def frame_indices(recipe: str, start: int, end: int, length: int) -> tuple:
    """Frame indices (3,) of the start and goal observation of a step, clamped to the video."""
    if recipe == 'concat3':
        first, last = [start, start + 1, start + 2], [end - 2, end - 1, end]
    else:
        first, last = [start - 1, start, start + 1], [end - 1, end, end + 1]
    return np.clip(first, 0, length - 1), np.clip(last, 0, length - 1)


def observe(frames: np.ndarray, indices: np.ndarray, recipe: str) -> np.ndarray:
    """frames (L, D), indices (3,) -> observation (3D,) for concat3 or (D,) for mean3."""
    picked = frames[indices]
    return picked.reshape(-1) if recipe == 'concat3' else picked.mean(axis=0)


def check_times(path, vid: str, times, length: int) -> None:
    """Every step must lie in the video; the end may equal L (annotation rounded up)."""
    for start, end in times:
        if start < 0 or start > length - 1 or end < start or end > length:
            raise BadVideoError(vid, 'step time outside the video',
                                f'{path}: step times start={start}, end={end} s are outside the '
                                f'video of {length} frames (field "{FEATURE_KEY}")')


def window_observations(frames: np.ndarray, times, recipe: str, observed_steps: int) -> tuple:
    """One window's (start (D',), goal (D',), observed (k, D')) from frames (L, D)."""
    length = len(frames)
    start_idx, _ = frame_indices(recipe, times[0][0], times[0][1], length)
    goal_idx = [frame_indices(recipe, s, e, length)[1] for s, e in times]
    start = observe(frames, start_idx, recipe)
    goal = observe(frames, goal_idx[-1], recipe)
    observed = np.stack([observe(frames, goal_idx[j], recipe) for j in range(observed_steps)]) \
        if observed_steps else np.zeros((0, start.shape[0]), np.float32)
    return start, goal, observed

"""Start/goal observations of a planning window, and what becomes of steps past the video.

Recipes, for a step with whole-second times (s, e) in a video of L frames; the start
observation is taken at t = s, the goal observation at t = e:

* ``'authors'`` (the paper configs; ViterbiPlanNet's ``dataset/dataloader.py`` with M=2):
  frames ``max(0, t-1) .. min(t+1, L-1)``, the last one replayed until there are 3,
  concatenated (3D): t=0 -> 0,1,1; t=L-1 -> L-2,L-1,L-1; otherwise t-1,t,t+1. A time
  t >= L (kept only by window policy ``'keep'``) is read at t = L-1.
* ``'concat3'`` (PDPP's ``dataloader/data_load.py`` with M=3): start = frames s, s+1, s+2,
  moved back to L-3 .. L-1 when it runs past the video; goal = frames e'-2, e'-1, e' with
  e' = max(2, e); concatenated (3D); indices then clamped to [0, L-1] (a goal past the video,
  where PDPP's loader fails, or a video shorter than 3 frames).
* ``'kepp'`` (KEPP's ``step/`` and ``plan/`` loaders: PDPP's, "modified to load data similar to
  other papers"): start = frames s-1, s, s+1 (0, 1, 2 at s = 0; L-3 .. L-1 when s+3 > L); goal =
  frames e'-1, e', e'+1 with e' = max(2, e) (e'-2 .. e' when e' >= L-1); concatenated (3D);
  indices then clamped to [0, L-1].
* ``'mean3'`` (SCHEMA's loaders with M=2): the mean of the frames max(0, t-1) .. min(t+1, L-1)
  (D): two frames at either end of the video (a clamped index is not counted twice).

The start state of a window is its first step's start observation, the goal state its last
step's end observation (plan revision: ``observed`` = the end observations of steps 1..k).

Window policies, for a step that ends at or past the video's last frame (e >= L) or starts
before it (s < 0), which real annotations sometimes do:

* ``'keep'`` (default): every window is kept with its annotated labels; the step is observed
  at the video's last frames. Such windows are counted as ``'clamped'``.
* ``'authors'`` (the authors' loader): the step takes the previous kept step's observations
  AND action (``'relabelled'``); a first step has nothing to copy and is dropped, so later
  steps shift left and the window is padded at its end by repeating its last kept step; a
  window with no step inside the video is ``'dropped'``.
"""
from typing import Optional, Sequence, Tuple

import numpy as np

from ..config_types import Count, checked_arguments
from ..errors import check_choice

RECIPES = ('authors', 'concat3', 'kepp', 'mean3')
WINDOW_POLICIES = ('keep', 'authors')
CONCATENATED = ('authors', 'concat3', 'kepp')


@checked_arguments
def observation_dim(recipe: str, frame_dim: Count) -> int:
    """Size of one observation vector for a recipe."""
    check_choice('observation', recipe, RECIPES)
    return 3 * frame_dim if recipe in CONCATENATED else frame_dim


def _around(t: int, length: int) -> list:
    """The authors' 3 frames around second t (module docstring)."""
    t = min(t, length - 1)
    frames = list(range(max(0, t - 1), min(t + 2, length)))
    return frames + [frames[-1]] * (3 - len(frames))


def frame_indices(recipe: str, start: int, end: int, length: int) -> tuple:
    """Frame indices (3,), (3,) of the start and goal observation of a step."""
    if recipe == 'authors':
        return np.array(_around(start, length)), np.array(_around(end, length))
    if recipe == 'concat3':
        first = max(0, start) if max(0, start) + 3 <= length else length - 3
        last = max(2, end)
        first, last = [first, first + 1, first + 2], [last - 2, last - 1, last]
    elif recipe == 'kepp':
        first = max(0, start)
        first = (first - 1 if first else 0) if first + 3 <= length else length - 3
        last = max(2, end)
        last = last - 2 if last >= length - 1 else last - 1
        first, last = [first, first + 1, first + 2], [last, last + 1, last + 2]
    else:
        first, last = [start - 1, start, start + 1], [end - 1, end, end + 1]
    return np.clip(first, 0, length - 1), np.clip(last, 0, length - 1)


def outside_video(start: int, end: int, length: int) -> bool:
    """True for a step the authors' loader cannot observe (e >= L or s < 0)."""
    return start < 0 or end >= length


def step_map(times: Sequence[Tuple[int, int]], length: int, policy: str
             ) -> Optional[Tuple[int, ...]]:
    """Which annotated step supplies each of the T steps of a window: (T,) indices into
    ``times``; None when the window is dropped. ``'keep'``: the identity."""
    if policy == 'keep':
        return tuple(range(len(times)))
    kept = []
    for i, (start, end) in enumerate(times):
        if not outside_video(start, end, length):
            kept.append(i)
        elif kept:
            kept.append(kept[-1])
    if not kept:
        return None
    return tuple(kept + [kept[-1]] * (len(times) - len(kept)))


def observe(frames: np.ndarray, indices: np.ndarray, recipe: str) -> np.ndarray:
    """frames (L, D), indices (3,) -> observation (3D,) (concatenated) or (D,) (mean3: the
    mean of the distinct frames, as SCHEMA's ``np.mean(frames[max(0, t-1):t+2])``)."""
    if recipe in CONCATENATED:
        return frames[indices].reshape(-1)
    return frames[np.unique(indices)].mean(axis=0)


def window_observations(frames: np.ndarray, times, recipe: str, observed_steps: int,
                        steps: Optional[Sequence[int]] = None) -> tuple:
    """One window's (start (D',), goal (D',), observed (k, D')) from frames (L, D).

    ``steps`` (T,): the step map of ``step_map`` (default: the identity)."""
    length = len(frames)
    steps = range(len(times)) if steps is None else steps
    chosen = [times[j] for j in steps]
    start = observe(frames, frame_indices(recipe, *chosen[0], length)[0], recipe)
    ends = [observe(frames, frame_indices(recipe, s, e, length)[1], recipe)
            for s, e in chosen[:observed_steps] + chosen[-1:]]
    observed = (np.stack(ends[:observed_steps]) if observed_steps
                else np.zeros((0, start.shape[0]), np.float32))
    return start, ends[-1], observed

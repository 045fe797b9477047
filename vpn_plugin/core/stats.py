"""Percentile bootstrap over seeds, as the authors compute it (``calculate_results.py``).

The paper reports a metric as ``mean ± width`` where width = p95 - p5 of the means of
``num_resamples`` resamples (with replacement) of the per-seed values: the FULL width of the
90% percentile interval, not its half. Resampling mirrors the authors' script: a
``random.Random(seed)`` stream (their ``random.seed(42)``), one ``choice`` per drawn seed, and
numpy's default ('linear') percentiles; K = 1000 resamples (their ``n_iterations=1000``).
With the same per-seed values in the same order, ``bootstrap_ci(values)`` gives the authors'
numbers for the first metric their script bootstraps (SR); later metrics use a fresh stream
here, where their script continues one stream.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import random
from typing import Annotated, Optional, Tuple

import numpy as np

from ..config_types import Count, Range, Seed, checked_arguments
from ..tool_choices import AUTHORS_RESAMPLES  # noqa: F401  (calculate_results.py's K)

AUTHORS_SEED = 42          # calculate_results.py: random.seed(42)
# The one rule of every table and figure: fewer seeds give the mean only, no interval and no
# significance mark (two seeds' "bootstrap interval" is two points: at most 3 distinct means)
MIN_SEEDS_FOR_CI = 3
# The authors' draw is one Python ``choice`` per drawn seed: K = 1e6 resamples of 5 seeds take
# about 18 s and 200 MB per interval (measured); a larger K would run for hours without a word
MAX_RESAMPLES = 1_000_000
RESAMPLES_LIMIT_WHY = ("the authors' draw costs about 18 s and 200 MB per table cell and "
                       'million resamples; their K is 1000')
# A 90 % percentile interval of K resampled means reads its ends at positions 0.05 (K-1) and
# 0.95 (K-1): below 20 resamples they fall within one order statistic of the extremes (K=1: one
# mean, an "interval" that can exclude the seeds' mean; K=10: the 2nd and 9th of ten)
MIN_RESAMPLES = 20
RESAMPLES_FLOOR_WHY = ('a 90 % percentile interval needs enough resamples for its 5 % and '
                       '95 % quantiles to be distinct order statistics; the authors use 1000')
# Scores that differ by less than this share of their size differ by round-off only (a float64
# carries about 16 digits; sums of a few hundred scores lose a few): no significant difference
ROUND_OFF = 1e-12
ConfidenceLevel = Annotated[float, Range(0, 1, low_open=True, high_open=True)]  # 0.90: 90 %


def shows_ci(num_seeds: int) -> bool:
    """Whether ``num_seeds`` seeds get a confidence interval (:data:`MIN_SEEDS_FOR_CI`)."""
    return num_seeds >= MIN_SEEDS_FOR_CI


@checked_arguments
def seed_interval(scores, num_resamples: Count = AUTHORS_RESAMPLES,
                  level: ConfidenceLevel = 0.90, seed: Seed = AUTHORS_SEED) -> Tuple[float, Optional[float], Optional[float]]:
    """(mean, low, high) of per-seed ``scores`` (n,): :func:`bootstrap_ci` when
    :func:`shows_ci` allows one, else (mean, None, None). Tables and figures both ask this."""
    check_resamples(num_resamples, level=level)
    scores = _as_scores(scores, 'scores')
    if not shows_ci(len(scores)):
        return float(scores.mean()), None, None
    return bootstrap_ci(scores, num_resamples, level, seed)


def _as_scores(values, name: str) -> np.ndarray:
    """(n,) float64 scores from a list, array or tensor of numbers (a bool or a string is no
    score: ``True`` would count as 1, ``'12.5'`` be parsed)."""
    if values is None or isinstance(values, (str, bytes, dict, set)) or not (
            hasattr(values, '__len__') or isinstance(values, numbers.Real)):
        raise TypeError(f'{name} is a {type(values).__name__}; expected one score per seed '
                        '(n,): a list, array or tensor of numbers')
    if hasattr(values, 'detach'):  # a torch tensor, e.g. one that requires grad
        values = values.detach().cpu()
        # numpy has no bfloat16: scores of any float dtype are read as float64
        values = (values.double() if values.is_floating_point() else values).numpy()
    if np.ma.is_masked(values):  # np.asarray would average the masked seeds' values
        raise ValueError(f'{name} is a masked array with masked entries at '
                         f'{np.flatnonzero(np.ma.getmaskarray(values)).tolist()}; expected one '
                         'score per seed that ran (drop the missing seeds: values.compressed())')
    _check_entries(values, name)
    if isinstance(values, (list, tuple)) and all(isinstance(v, numbers.Real) for v in values) \
            and any(not isinstance(v, (int, float, np.number)) for v in values):
        with contextlib.suppress(OverflowError):  # Fraction(31, 1): a real number numpy
            values = [float(v) for v in values]     # holds as an object

    try:
        given = np.asarray(values)
    except ValueError as error:  # ragged nested lists
        raise ValueError(f'{name} is no (n,) array of scores ({error})') from None
    if given.size and (given.dtype == bool or not np.issubdtype(given.dtype, np.number)
                       or np.iscomplexobj(given)):
        raise TypeError(f'{name} holds {given.dtype} values {given.tolist()!r:.80}; expected '
                        'real numbers (one score per seed)')
    array = given.astype(np.float64)
    if array.ndim > 1:  # (seeds, metrics) flattened would mix metrics into one mean
        raise ValueError(f'{name} has shape {array.shape}; expected one score per seed (n,)')
    array = array.reshape(-1)
    if array.size == 0:
        raise ValueError(f'{name} is empty; expected at least one score')
    if not np.isfinite(array).all():
        position = int(np.flatnonzero(~np.isfinite(array))[0])
        raise ValueError(f'{name}[{position}] = {float(array[position])!r} among '
                         f'{array.tolist()!r:.80}; expected a finite score (a NaN is a seed '
                         'whose metric was never computed: averaged, it would make the whole '
                         'cell NaN)')
    with np.errstate(over='ignore'):
        overflows = not np.isfinite(np.abs(array).sum())
    if overflows:
        raise ValueError(f'{name} holds values up to {np.abs(array).max():.3g}, whose sum '
                         'overflows float64; expected scores (e.g. percent)')
    return array


def _check_entries(values, name: str) -> None:
    """Each entry of a 1-D list or tuple (or object array) of scores is a real number, not a
    bool (``True`` would count as 1), a string (``'12.5'`` would be parsed, ``'n/a'`` refused
    as a dtype) or ``None``; the first that is not is named with its position. NaN and the
    dtype of numeric arrays are checked after conversion, by :func:`_as_scores`."""
    if isinstance(values, np.ndarray) and values.dtype != object:
        return
    if not isinstance(values, (list, tuple, np.ndarray)):
        return
    for position, value in enumerate(values):
        if isinstance(value, (list, tuple, np.ndarray)) and getattr(value, 'ndim', 1) != 0:
            continue  # nested: the shape check names it
        if getattr(value, 'ndim', None) == 0 and hasattr(value, 'item'):
            value = value.item()  # a 0-d array or tensor
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f'{name}[{position}] = {value!r} ({type(value).__name__}) among '
                            f'{list(values)!r:.80}; expected a real number, one score per '
                            'seed (a bool would count as 1 or 0, a string is no score)')


def _check_seeds(scores: np.ndarray, name: str) -> None:
    """The one rule (:data:`MIN_SEEDS_FOR_CI`): no interval nor significance from fewer
    seeds (one seed's "interval" is a point, read as certainty)."""
    if not shows_ci(len(scores)):
        raise ValueError(f'{name} has {len(scores)} score(s); expected at least '
                         f'{MIN_SEEDS_FOR_CI} seeds for a bootstrap interval (fewer give the '
                         'mean only, no interval nor significance: seed_interval)')


def check_resamples(num_resamples: int, name: str = 'num_resamples',
                    level: float = 0.90) -> int:
    """The one bound of a bootstrap's K (every interval, table, figure and ``report.py`` flag
    goes through it; its kind is checked by ``checked_arguments``): ``MIN_RESAMPLES`` ..
    ``MAX_RESAMPLES``, each with its reason; a wider ``level`` needs more (:func:`min_resamples`:
    K=20 at 99 % reads its ends off the two extreme resampled means). Returns it."""
    floor = min_resamples(level)
    if num_resamples < floor:
        why = RESAMPLES_FLOOR_WHY if floor == MIN_RESAMPLES else (
            f'a {level:.4g} percentile interval reads its ends at the {(1 - level) / 2:.4g} and '
            f'{(1 + level) / 2:.4g} quantiles of the resampled means: below {floor} resamples '
            'they are the extreme ones')
        raise ValueError(f'{name}={num_resamples}; expected at least {floor} ({why})')
    if num_resamples > MAX_RESAMPLES:
        raise ValueError(f'{name}={num_resamples}; expected {floor} .. {MAX_RESAMPLES} '
                         f'({RESAMPLES_LIMIT_WHY})')
    return num_resamples


@checked_arguments
def min_resamples(level: ConfidenceLevel = 0.90) -> int:
    """The fewest resamples a ``level`` interval is read from: each tail, (1 - level) / 2 of
    K, holds at least one resampled mean (20 at 90 %, 40 at 95 %, 200 at 99 %)."""
    return max(MIN_RESAMPLES, math.ceil(round(2.0 / (1.0 - level), 6)))


def _percentiles(statistics: np.ndarray, level: float) -> Tuple[float, float]:
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(statistics, [tail, 100.0 - tail])
    return float(low), float(high)


def _resample_indices(rng: random.Random, size: int, num_resamples: int) -> np.ndarray:
    """(K, size) indices drawn with replacement, one ``rng.choice`` each (the authors' draw)."""
    choices = range(size)
    return np.array([[rng.choice(choices) for _ in range(size)]
                     for _ in range(num_resamples)], dtype=np.int64)


@checked_arguments
def bootstrap_ci(scores, num_resamples: Count = AUTHORS_RESAMPLES,
                 level: ConfidenceLevel = 0.90, seed: Seed = AUTHORS_SEED) -> Tuple[float, float, float]:
    """(mean, low, high): the mean of ``scores`` (n,) and its percentile-bootstrap interval.

    ``num_resamples`` resamples of the n scores with replacement; [low, high] are the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of the resampled means. The
    paper's "±" is ``high - low``.
    """
    check_resamples(num_resamples, level=level)
    scores = _as_scores(scores, 'scores')
    _check_seeds(scores, 'scores')
    index = _resample_indices(random.Random(seed), len(scores), num_resamples)
    low, high = _percentiles(scores[index].mean(1), level)
    return float(scores.mean()), low, high


@checked_arguments
def bootstrap_difference(a, b, num_resamples: Count = AUTHORS_RESAMPLES,
                         level: ConfidenceLevel = 0.90, seed: Seed = AUTHORS_SEED, *,
                         paired: bool = False
                         ) -> Tuple[float, float, float, bool]:
    """(delta, low, high, significant) for ``mean(a) - mean(b)``; a (n_a,), b (n_b,).

    ``paired=False`` (default, the paper): each replicate draws A* from ``a`` and B* from
    ``b`` independently (seed i of two models is not a matched pair), delta* = mean(A*) -
    mean(B*). ``paired=True`` (``a[i]``, ``b[i]`` share seed i) resamples pair indices jointly.
    [low, high] is the percentile interval of delta*; ``significant`` iff 0 lies outside it
    by more than round-off (:data:`ROUND_OFF` of the largest score).
    """
    check_resamples(num_resamples, level=level)
    a, b = _as_scores(a, 'a'), _as_scores(b, 'b')
    if paired and len(a) != len(b):
        raise ValueError(f'paired bootstrap got {len(a)} scores in a and {len(b)} in b; '
                         'expected one pair per seed (or pass paired=False)')
    _check_seeds(a, 'a')
    _check_seeds(b, 'b')
    rng = random.Random(seed)
    if paired:
        index = _resample_indices(rng, len(a), num_resamples)
        deltas = (a[index] - b[index]).mean(1)
    else:
        deltas = (a[_resample_indices(rng, len(a), num_resamples)].mean(1)
                  - b[_resample_indices(rng, len(b), num_resamples)].mean(1))
    low, high = _percentiles(deltas, level)
    # an interval that leaves out 0 by no more than round-off (scores equal but for their
    # last bits: one metric summed in another order) is no difference: compared at the
    # scale of the scores, never at the last bit of their floats
    noise = ROUND_OFF * max(float(np.abs(a).max()), float(np.abs(b).max()))
    return float(a.mean() - b.mean()), low, high, not (low <= noise and high >= -noise)


# How ``limit`` windows are drawn (a results row's ``settings.sample_draw``, test_metrics.json's
# ``sample_draw``): within each task from the windows ordered by their identity
# (``datasets.annotations.window_key``), so the same videos listed in any order give the same
# windows. Rows and metrics without it were drawn by the windows' positions in the lists.
SAMPLE_DRAW = 'window_identity_v2'


@checked_arguments
def stratified_sample(tasks, limit: Count | None, seed: Seed = 0, *, keys) -> np.ndarray:
    """Indices (sorted) of ``limit`` windows drawn without replacement, stratified over tasks.

    Each task gets its share of ``limit`` in proportion to its windows (largest remainders
    round), drawn uniformly within the task's windows ordered by their identity ``keys`` (M,)
    (``PlanningDataset.window_keys()``) with ``numpy.random.default_rng(seed)``
    (:data:`SAMPLE_DRAW`): the sample has the test set's task mix, not the first task's
    windows, and depends only on the windows and the seed, never on the order of the lists
    they were read from. ``limit`` None or at least the number of windows: every window. The
    one window sampler: ``llm_eval.py --limit``, ``PlanningDataset(limit=)``
    (``tools/test.py --limit``, smoke runs).
    """
    given = np.asarray(tasks)
    if given.size and not np.issubdtype(given.dtype, np.integer):  # 1.7 is not a task index
        raise TypeError(f'tasks hold {given.dtype} values; expected integer task indices')
    if given.ndim > 1:  # flattened, the indices would point into no list of windows
        raise ValueError(f'tasks has shape {given.shape}; expected one task index per window '
                         '(M,)')
    tasks = given.astype(np.int64).reshape(-1)
    keys = np.asarray(keys)
    if keys.shape != tasks.shape or (keys.size and not np.issubdtype(keys.dtype, np.integer)):
        raise ValueError(f'keys {keys.dtype} {keys.shape}: expected one integer window key per '
                         f'window {tasks.shape} (PlanningDataset.window_keys())')
    if limit is None or limit >= len(tasks):
        return np.arange(len(tasks))
    names, counts = np.unique(tasks, return_counts=True)
    quotas = limit * counts / len(tasks)
    shares = np.floor(quotas).astype(np.int64)
    by_remainder = np.argsort(-(quotas - shares), kind='stable')
    shares[by_remainder[:limit - shares.sum()]] += 1
    rng = np.random.default_rng(seed)
    order = np.argsort(keys, kind='stable')  # by identity: the lists' order plays no part
    picked = [order[rng.choice(np.flatnonzero(tasks[order] == task), share, replace=False)]
              for task, share in zip(names, shares)]
    return np.sort(np.concatenate(picked))

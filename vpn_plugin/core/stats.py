"""Percentile bootstrap confidence intervals (over seeds), as in the paper's supplementary.

Resampling uses a seeded ``numpy.random.Generator``, so the same inputs and seed always give
the same interval.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np


def _as_scores(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if array.size == 0:
        raise ValueError(f'{name} is empty; expected at least one score')
    if not np.isfinite(array).all():
        raise ValueError(f'{name} holds NaN or infinite values: {array.tolist()}')
    return array


def _check_options(num_resamples: int, level: float) -> None:
    if num_resamples < 1:
        raise ValueError(f'num_resamples={num_resamples}; expected >= 1')
    if not 0 < level < 1:
        raise ValueError(f'level={level}; expected a confidence level in (0, 1)')


def _percentiles(statistics: np.ndarray, level: float) -> Tuple[float, float]:
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(statistics, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_ci(scores, num_resamples: int = 100, level: float = 0.90,
                 seed: int = 0) -> Tuple[float, float, float]:
    """(mean, low, high): the mean of ``scores`` (n,) and its percentile-bootstrap CI.

    ``num_resamples`` resamples of n scores with replacement; [low, high] are the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of the resampled means.
    """
    _check_options(num_resamples, level)
    scores = _as_scores(scores, 'scores')
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(scores), size=(num_resamples, len(scores)))
    low, high = _percentiles(scores[index].mean(1), level)
    return float(scores.mean()), low, high


def bootstrap_difference(a, b, num_resamples: int = 1000, level: float = 0.90, seed: int = 0,
                         *, paired: bool = True) -> Tuple[float, float, float, bool]:
    """(delta, low, high, significant) for ``mean(a) - mean(b)``.

    ``paired=True`` (default; ``a[i]`` and ``b[i]`` share seed i) resamples the indices of the
    pairs jointly; ``paired=False`` resamples ``a`` and ``b`` independently. ``significant`` is
    True iff 0 lies outside the percentile CI [low, high].
    """
    _check_options(num_resamples, level)
    a, b = _as_scores(a, 'a'), _as_scores(b, 'b')
    rng = np.random.default_rng(seed)
    if paired:
        if len(a) != len(b):
            raise ValueError(f'paired bootstrap got {len(a)} scores in a and {len(b)} in b; '
                             'expected one pair per seed (or pass paired=False)')
        index = rng.integers(0, len(a), size=(num_resamples, len(a)))
        deltas = (a[index] - b[index]).mean(1)
    else:
        index_a = rng.integers(0, len(a), size=(num_resamples, len(a)))
        index_b = rng.integers(0, len(b), size=(num_resamples, len(b)))
        deltas = a[index_a].mean(1) - b[index_b].mean(1)
    low, high = _percentiles(deltas, level)
    return float(a.mean() - b.mean()), low, high, not (low <= 0.0 <= high)

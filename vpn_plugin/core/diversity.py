"""Decoding diversity: entropy of predicted plans and their Jensen-Shannon divergence from the
ground-truth plan distribution, on windows that share start and goal actions.

Plain numpy; no mmaction/mmengine import. Logarithms are base 2 (bits), so the JS divergence
lies in [0, 1].
"""
from collections import Counter, defaultdict

import numpy as np

from ..config_types import Count, checked_arguments
from .metrics import as_plans
from .pkg import pkg_row_tolerance

SUM_TOLERANCE = 1e-9


def plan_distribution(plans) -> dict:
    """Empirical distribution {plan tuple: probability} of plans (M, T)."""
    plans = as_plans(plans, 'plans', allow_no_plan=True)  # "no plan" is one more outcome
    if len(plans) == 0:
        raise ValueError('plan_distribution needs at least one plan, got an empty (0, T) array')
    counts = Counter(map(tuple, plans.tolist()))
    return {plan: count / len(plans) for plan, count in counts.items()}


def _check_distribution(distribution: dict, name: str) -> np.ndarray:
    """The probabilities of ``distribution`` (finite, >= 0, summing to 1), else ValueError."""
    values = list(distribution.values())
    probs = np.array(values, dtype=np.float64)
    # at the scale of the values: float32 probabilities of 1/3 sum to 1 + 3e-8
    tolerance = max((float(pkg_row_tolerance(dtype, len(values), SUM_TOLERANCE))
                     for dtype in {getattr(v, 'dtype', np.dtype(np.float64)) for v in values}),
                    default=SUM_TOLERANCE)
    if not (np.isfinite(probs).all() and (probs >= 0).all()
            and abs(probs.sum() - 1.0) <= tolerance):
        raise ValueError(f'{name} has probabilities {probs.tolist()[:8]} (sum '
                         f'{float(probs.sum())!r}); expected finite values >= 0 summing to 1 '
                         '(plan_distribution)')
    return probs


@checked_arguments
def entropy_bits(distribution: dict) -> float:
    """Shannon entropy (bits) of a {outcome: probability} distribution."""
    probs = _check_distribution(distribution, 'distribution')
    probs = probs[probs > 0]
    return float(-(probs * np.log2(probs)).sum())


@checked_arguments
def js_divergence(p: dict, q: dict) -> float:
    """Jensen-Shannon divergence (bits) between two {outcome: probability} distributions."""
    _check_distribution(p, 'p'), _check_distribution(q, 'q')
    support = sorted(set(p) | set(q))
    p_vec = np.array([p.get(x, 0.0) for x in support])
    q_vec = np.array([q.get(x, 0.0) for x in support])
    mixture = (p_vec + q_vec) / 2
    return float((_kl_bits(p_vec, mixture) + _kl_bits(q_vec, mixture)) / 2)


def _kl_bits(p, q):
    mask = p > 0
    return (p[mask] * np.log2(p[mask] / q[mask])).sum()


@checked_arguments
def decoding_diversity(pred, gt, min_group_size: Count = 2) -> dict:
    """Diversity of predicted plans within groups of windows sharing GT start and goal actions.

    Args:
        pred: (M, T) predicted plans.
        gt: (M, T) ground-truth plans; a group is the windows with equal ``gt[:, 0]`` and
            ``gt[:, -1]``; groups smaller than ``min_group_size`` are skipped.
    Returns:
        dict with the mean over groups of ``pred_entropy``, ``gt_entropy`` (bits) and
        ``js_divergence`` (bits, pred vs GT), plus ``num_groups`` and ``num_windows`` used
        and ``largest_group`` (its windows; ``pred_entropy`` <= log2 of it).
    """
    pred, gt = as_plans(pred, 'pred', allow_no_plan=True), as_plans(gt, 'gt')
    if pred.shape != gt.shape:
        raise ValueError(f'pred {pred.shape} and gt {gt.shape} must have the same (M, T) shape')
    groups = defaultdict(list)
    for index, (first, last) in enumerate(zip(gt[:, 0].tolist(), gt[:, -1].tolist())):
        groups[(first, last)].append(index)
    kept = [rows for rows in groups.values() if len(rows) >= min_group_size]
    if not kept:
        raise ValueError(f'no group of windows sharing start and goal actions has at least '
                         f'min_group_size={min_group_size} windows (M={len(gt)})')
    stats = np.array([_group_stats(pred[rows], gt[rows]) for rows in kept])
    pred_entropy, gt_entropy, jsd = stats.mean(0)
    return dict(pred_entropy=float(pred_entropy), gt_entropy=float(gt_entropy),
                js_divergence=float(jsd), num_groups=len(kept),
                num_windows=int(sum(map(len, kept))), largest_group=max(map(len, kept)))


def _group_stats(pred, gt):
    p, q = plan_distribution(pred), plan_distribution(gt)
    return entropy_bits(p), entropy_bits(q), js_divergence(p, q)

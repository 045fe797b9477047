"""Decoding diversity against hand computations and scipy."""
import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import entropy

from vpn_plugin.core.diversity import (decoding_diversity, entropy_bits, js_divergence,
                                       plan_distribution)


def test_hand_computed_group():
    # one group (start 1, goal 9): GT plans A, A, B, B; predictions A, A, A, C
    gt = [[1, 2, 9], [1, 2, 9], [1, 3, 9], [1, 3, 9]]
    pred = [[1, 2, 9], [1, 2, 9], [1, 2, 9], [1, 4, 9]]
    result = decoding_diversity(pred, gt)
    # H(pred) = -(3/4 log2 3/4 + 1/4 log2 1/4); H(gt) = 1 bit
    assert result['pred_entropy'] == pytest.approx(-(0.75 * np.log2(0.75) + 0.25 * np.log2(0.25)))
    assert result['gt_entropy'] == pytest.approx(1.0)
    # M = {A: 5/8, B: 1/4, C: 1/8}; JS = (KL(P||M) + KL(Q||M)) / 2
    kl_p = 0.75 * np.log2(0.75 / 0.625) + 0.25 * np.log2(0.25 / 0.125)
    kl_q = 0.5 * np.log2(0.5 / 0.625) + 0.5 * np.log2(0.5 / 0.25)
    assert result['js_divergence'] == pytest.approx((kl_p + kl_q) / 2)
    assert (result['num_groups'], result['num_windows']) == (1, 4)


def test_against_scipy_on_random_groups():
    rng = np.random.default_rng(0)
    gt = np.concatenate([np.stack([np.full(30, s), rng.integers(0, 3, 30), np.full(30, g)], 1)
                         for s, g in ((0, 5), (1, 6))])
    pred = gt.copy()
    pred[:, 1] = rng.integers(0, 4, len(pred))
    result = decoding_diversity(pred, gt)
    expected_h, expected_js = [], []
    for rows in (slice(0, 30), slice(30, 60)):
        support = sorted(set(map(tuple, pred[rows].tolist())) | set(map(tuple, gt[rows].tolist())))
        p = np.array([np.mean([tuple(r) == x for r in pred[rows].tolist()]) for x in support])
        q = np.array([np.mean([tuple(r) == x for r in gt[rows].tolist()]) for x in support])
        expected_h.append(entropy(p, base=2))
        expected_js.append(jensenshannon(p, q, base=2) ** 2)  # scipy returns the JS distance
    assert result['pred_entropy'] == pytest.approx(np.mean(expected_h))
    assert result['js_divergence'] == pytest.approx(np.mean(expected_js))


def test_extremes_and_small_groups():
    gt = [[0, 1, 2], [0, 3, 2], [7, 7, 7]]
    assert decoding_diversity(gt, gt)['js_divergence'] == pytest.approx(0.0)
    disjoint = decoding_diversity([[0, 5, 2], [0, 5, 2], [7, 7, 7]], gt)
    assert disjoint['js_divergence'] == pytest.approx(1.0) and disjoint['pred_entropy'] == 0.0
    assert disjoint['num_groups'] == 1  # the singleton (7, 7) group is skipped
    assert entropy_bits(plan_distribution([[1], [2], [3], [4]])) == pytest.approx(2.0)
    assert js_divergence({(1,): 1.0}, {(1,): 1.0}) == 0.0
    with pytest.raises(ValueError, match='min_group_size=5'):
        decoding_diversity(gt, gt, min_group_size=5)
    with pytest.raises(ValueError, match='same'):
        decoding_diversity([[0, 1]], [[0, 1, 2]])

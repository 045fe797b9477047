"""Planning metrics on hand-made cases and bootstrap statistics on known answers."""
import numpy as np
import pytest
import torch

from vpn_plugin.core import (METRIC_NAMES, bootstrap_ci, bootstrap_difference,
                             per_sample_scores, planning_metrics)


def test_metrics_on_hand_made_plans():
    gt = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    pred = [[1, 2, 3],   # all right
            [5, 4, 6],   # last right, same action set
            [7, 1, 1]]   # first right, set {7, 1} vs {7, 8, 9}: IoU 1/4
    metrics = planning_metrics(np.array(pred), np.array(gt))
    assert metrics['success_rate'] == pytest.approx(100 / 3)
    assert metrics['mean_accuracy'] == pytest.approx(100 * (3 + 1 + 1) / 9)
    assert metrics['miou_set'] == pytest.approx(100 * (1 + 1 + 0.25) / 3)
    assert metrics['first_accuracy'] == pytest.approx(200 / 3)
    assert metrics['last_accuracy'] == pytest.approx(200 / 3)
    # legacy: per sample sum(p & g) / sum(p | g) over the integer ids
    legacy = [1.0, (4 + 4 + 6) / (5 + 5 + 6), (7 + 0 + 1) / (7 + 9 + 9)]
    assert metrics['miou_legacy'] == pytest.approx(100 * np.mean(legacy))
    assert set(metrics) == set(METRIC_NAMES)


def test_legacy_miou_depends_on_label_ids_but_set_miou_does_not():
    pred, gt = np.array([[1, 2]]), np.array([[2, 1]])
    relabel = {1: 4, 2: 3}
    pred2, gt2 = np.vectorize(relabel.get)(pred), np.vectorize(relabel.get)(gt)
    assert planning_metrics(pred, gt)['miou_set'] == planning_metrics(pred2, gt2)['miou_set']
    assert planning_metrics(pred, gt)['miou_legacy'] == pytest.approx(0.0)  # 1&2 = 0
    assert planning_metrics(pred2, gt2)['miou_legacy'] == pytest.approx(0.0)  # 4&3 = 0
    assert planning_metrics(np.array([[3, 1]]), np.array([[1, 3]]))['miou_legacy'] == \
        pytest.approx(100 * (1 + 1) / (3 + 3))


def test_per_sample_mean_equals_metric_and_accepts_torch():
    rng = np.random.default_rng(0)
    gt = rng.integers(0, 5, size=(50, 4))
    pred = np.where(rng.random((50, 4)) < 0.6, gt, rng.integers(0, 5, size=(50, 4)))
    scores = per_sample_scores(torch.from_numpy(pred), torch.from_numpy(gt))
    metrics = planning_metrics(pred, gt)
    for name in METRIC_NAMES:
        assert scores[name].shape == (50,)
        assert scores[name].mean() == pytest.approx(metrics[name])
    # independent of sample order
    order = rng.permutation(50)
    assert planning_metrics(pred[order], gt[order]) == pytest.approx(metrics)


@pytest.mark.parametrize('chunk', [1, 7, 50])
def test_per_sample_scores_do_not_depend_on_batching(chunk):
    """Chunks scored separately (as batches / processes would) and pooled == one call; the
    set IoU is checked against plain Python sets."""
    rng = np.random.default_rng(1)
    gt = rng.integers(0, 9, size=(50, 3))
    pred = np.where(rng.random((50, 3)) < 0.5, gt, rng.integers(0, 9, size=(50, 3)))
    whole = per_sample_scores(pred, gt)
    parts = [per_sample_scores(pred[i:i + chunk], gt[i:i + chunk]) for i in range(0, 50, chunk)]
    for name in METRIC_NAMES:
        np.testing.assert_array_equal(np.concatenate([p[name] for p in parts]), whole[name])
    expected = [100 * len(set(p) & set(g)) / len(set(p) | set(g)) for p, g in zip(pred, gt)]
    np.testing.assert_allclose(whole['miou_set'], expected)


@pytest.mark.parametrize('pred, gt, message', [
    (np.zeros((2, 3), int), np.zeros((2, 4), int), 'expected equal'),
    (np.zeros((2, 3)), np.zeros((2, 3), int), 'integer action ids'),
    (np.full((1, 2), -1), np.zeros((1, 2), int), 'negative'),
    (np.zeros((0, 3), int), np.zeros((0, 3), int), 'no samples'),
])
def test_bad_plans_get_clear_errors(pred, gt, message):
    with pytest.raises((ValueError, TypeError), match=message):
        planning_metrics(pred, gt)


# ----------------------------------------------------------------------------- bootstrap
def test_constant_scores_give_zero_width_ci():
    assert bootstrap_ci(np.full(5, 42.0)) == pytest.approx((42.0, 42.0, 42.0))


def test_bootstrap_ci_matches_percentiles_of_resampled_means():
    scores = np.array([1.0, 2.0, 3.0, 10.0])
    mean, low, high = bootstrap_ci(scores, num_resamples=2000, level=0.8, seed=3)
    assert mean == pytest.approx(4.0)
    # oracle: exact distribution of the mean of 4 draws with replacement, by enumeration
    grid = np.array(np.meshgrid(*[scores] * 4)).reshape(4, -1).mean(0)
    exact_low, exact_high = np.percentile(grid, [10, 90])
    assert low == pytest.approx(exact_low, abs=0.4) and high == pytest.approx(exact_high, abs=0.4)
    assert bootstrap_ci(scores, seed=3) == bootstrap_ci(scores, seed=3)


def test_large_difference_is_significant_identical_is_not():
    rng = np.random.default_rng(0)
    b = rng.normal(50, 1, size=5)
    delta, low, high, significant = bootstrap_difference(b + 10, b)
    assert delta == pytest.approx(10.0) and low == pytest.approx(10) and significant
    delta, low, high, significant = bootstrap_difference(b, b)
    assert (delta, low, high, significant) == (0.0, 0.0, 0.0, False)
    noisy = rng.normal(50, 5, size=5)
    assert not bootstrap_difference(noisy, noisy[::-1], paired=False)[3]


def test_bootstrap_bad_input():
    with pytest.raises(ValueError, match='empty'):
        bootstrap_ci([])
    with pytest.raises(ValueError, match='NaN'):
        bootstrap_ci([1.0, np.nan])
    with pytest.raises(ValueError, match='paired'):
        bootstrap_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match='level'):
        bootstrap_ci([1.0], level=1.5)


def test_paired_difference_matches_exact_bootstrap_distribution():
    """Oracle: all 4^4 equally likely resamples of the paired differences, enumerated."""
    a = np.array([50.0, 52.0, 47.0, 58.0])
    b = np.array([49.0, 48.0, 48.0, 50.0])  # differences 1, 4, -1, 8
    delta, low, high, significant = bootstrap_difference(a, b, num_resamples=4000,
                                                         level=0.9, seed=5)
    grid = np.array(np.meshgrid(*[a - b] * 4)).reshape(4, -1).mean(0)
    exact_low, exact_high = np.percentile(grid, [5, 95])
    assert delta == pytest.approx(3.0)
    assert low == pytest.approx(exact_low, abs=0.3) and high == pytest.approx(exact_high, abs=0.3)
    assert significant == (not exact_low <= 0 <= exact_high)
    symmetric = bootstrap_difference([1.0, 3.0, 1.0, 3.0], [3.0, 1.0, 3.0, 1.0])
    assert symmetric[0] == 0.0 and symmetric[1] < 0 < symmetric[2] and not symmetric[3]

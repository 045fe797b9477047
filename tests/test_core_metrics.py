"""Planning metrics on hand-made cases and bootstrap statistics on known answers."""
import numpy as np
import pytest
import torch

from vpn_plugin.core import (METRIC_NAMES, bootstrap_ci, bootstrap_difference, miou_batch,
                             no_plan, per_sample_scores, planning_metrics)


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
    (np.full((1, 2), -2), np.zeros((1, 2), int), 'negative'),
    (np.array([[-1, 3]]), np.zeros((1, 2), int), r'negative action id -1 in plan 0 \(\[-1, 3\]\)'),
    (np.zeros((1, 2), int), np.full((1, 2), -1), 'gt holds negative'),
    (np.zeros((0, 3), int), np.zeros((0, 3), int), 'no samples'),
])
def test_bad_plans_get_clear_errors(pred, gt, message):
    with pytest.raises((ValueError, TypeError), match=message):
        planning_metrics(pred, gt)


def test_a_window_without_a_plan_scores_zero_on_every_metric():
    """Issue 33, item 2: the legacy bitwise formula credited an out-of-taxonomy sentinel
    (23.86 mIoU on NIV for prose replies). -1 & id = id, so without the rule a no-plan row
    would even score a legacy IoU of 100 * sum(gt) / sum(-1 | gt) ... here: by hand."""
    gt = np.array([[1, 2, 3], [4, 5, 6], [3, 3, 3]])
    pred = np.array([no_plan(3), [4, 5, 6], no_plan(3)])
    scores = per_sample_scores(pred, gt)
    for name in METRIC_NAMES:
        np.testing.assert_array_equal(scores[name], [0.0, 100.0, 0.0], err_msg=name)
    assert planning_metrics(pred, gt)['miou_legacy'] == pytest.approx(100 / 3)
    # the former sentinel [N] * T scores a legacy IoU > 0: the reason for the rule
    assert planning_metrics(np.array([[48, 48, 48]]), np.array([[16, 32, 48]]))[
        'miou_legacy'] > 0
    # PDPP's batch IoU: the no-plan rows add no predicted action, their truth stays in G
    assert miou_batch(pred, gt, 3) == pytest.approx(100 * 3 / 6)  # {4,5,6} / {1..6}
    assert miou_batch(pred[:1], gt[:1], 1) == 0.0


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


def authors_bootstrap(data, n_iterations=1000, seed=42):
    """Oracle: the authors' calculate_results.py ``bootstrap`` after ``random.seed(42)``,
    transcribed (module-level ``random``, ``random.choice`` on the values, ``np.mean``,
    ``np.percentile`` 5 and 95); returns (lower, upper)."""
    import random
    random.seed(seed)
    means = []
    for _ in range(n_iterations):
        means.append(np.mean([random.choice(data) for _ in range(len(data))]))
    return np.percentile(means, 5), np.percentile(means, 95)


@pytest.mark.parametrize('values', [[31.2, 35.9, 29.4, 40.3, 33.0],
                                    [12.5, 80.0, 47.1, 33.3, 61.7, 20.9]])
def test_bootstrap_ci_reproduces_the_authors_script(values):
    mean, low, high = bootstrap_ci(values)
    lower, upper = authors_bootstrap(list(values))
    assert mean == pytest.approx(np.mean(values))
    assert (low, high) == pytest.approx((lower, upper), abs=1e-9)
    assert (low, high) != pytest.approx(authors_bootstrap(list(values), seed=0), abs=1e-9)


def exact_mean_distribution(values):
    """Every one of the n^n equally likely bootstrap resamples of ``values``, its mean."""
    n = len(values)
    return np.array(np.meshgrid(*[np.asarray(values, float)] * n)).reshape(n, -1).mean(0)


def test_width_is_the_percentile_spread_of_resampled_means():
    """Oracle: the exact bootstrap distribution, enumerated; Monte-Carlo tolerance."""
    values = [40.0, 55.0, 47.0, 62.0, 51.0]
    mean, low, high = bootstrap_ci(values, num_resamples=20000, seed=1)
    exact_low, exact_high = np.percentile(exact_mean_distribution(values), [5, 95])
    assert high - low == pytest.approx(exact_high - exact_low, abs=0.5)
    assert (high - low) / 2 != pytest.approx(exact_high - exact_low, abs=0.5)


def test_unpaired_difference_matches_the_exact_independent_distribution():
    """Oracle: delta* = mean(A*) - mean(B*) over all (4^4)^2 equally likely resample pairs."""
    a, b = [50.0, 52.0, 47.0, 58.0], [49.0, 48.0, 44.0, 50.0]
    deltas = np.subtract.outer(exact_mean_distribution(a), exact_mean_distribution(b))
    exact_low, exact_high = np.percentile(deltas, [5, 95])
    delta, low, high, significant = bootstrap_difference(a, b, num_resamples=20000, seed=2)
    assert delta == pytest.approx(np.mean(a) - np.mean(b))
    assert (low, high) == pytest.approx((exact_low, exact_high), abs=0.25)
    assert significant == (not exact_low <= 0 <= exact_high)


def test_correlated_seeds_wide_unpaired_narrow_paired():
    """Seed i of A is seed i of B plus ~1: the seeds spread far more than the gap. The paper's
    independent resampling sees the spread (not significant); pairing removes it."""
    b = np.array([30.0, 45.0, 60.0, 38.0, 52.0])
    a = b + np.array([1.2, 0.8, 1.0, 1.1, 0.9])
    delta, low, high, significant = bootstrap_difference(a, b)
    exact = np.subtract.outer(exact_mean_distribution(a), exact_mean_distribution(b))
    exact_low, exact_high = np.percentile(exact, [5, 95])
    assert (low, high) == pytest.approx((exact_low, exact_high), abs=1.5)
    assert high - low > 15 and not significant
    _, paired_low, paired_high, paired_significant = bootstrap_difference(a, b, paired=True)
    paired_exact = np.percentile(exact_mean_distribution(a - b), [5, 95])
    assert (paired_low, paired_high) == pytest.approx(tuple(paired_exact), abs=0.05)
    assert paired_high - paired_low < 0.5 and paired_significant


def test_large_difference_is_significant_identical_is_not():
    rng = np.random.default_rng(0)
    b = rng.normal(50, 1, size=5)
    delta, low, high, significant = bootstrap_difference(b + 10, b, paired=True)
    assert delta == pytest.approx(10.0) and low == pytest.approx(10) and significant
    assert bootstrap_difference(b + 10, b)[3]
    delta, low, high, significant = bootstrap_difference(b, b, paired=True)
    assert (delta, low, high, significant) == (0.0, 0.0, 0.0, False)
    delta, low, high, significant = bootstrap_difference(b, b)
    assert delta == 0.0 and low < 0 < high and not significant
    noisy = rng.normal(50, 5, size=5)
    assert not bootstrap_difference(noisy, noisy[::-1])[3]


def test_bootstrap_bad_input():
    with pytest.raises(ValueError, match='empty'):
        bootstrap_ci([])
    with pytest.raises(ValueError, match='NaN'):
        bootstrap_ci([1.0, np.nan])
    with pytest.raises(ValueError, match='paired'):
        bootstrap_difference([1.0, 2.0], [1.0], paired=True)
    assert bootstrap_difference([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match='expected at least 3 seeds'):  # no interval from 1
        bootstrap_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match='level'):
        bootstrap_ci([1.0], level=1.5)


def test_paired_difference_matches_exact_bootstrap_distribution():
    """Oracle: all 4^4 equally likely resamples of the paired differences, enumerated."""
    a = np.array([50.0, 52.0, 47.0, 58.0])
    b = np.array([49.0, 48.0, 48.0, 50.0])  # differences 1, 4, -1, 8
    delta, low, high, significant = bootstrap_difference(a, b, num_resamples=4000,
                                                         level=0.9, seed=5, paired=True)
    grid = np.array(np.meshgrid(*[a - b] * 4)).reshape(4, -1).mean(0)
    exact_low, exact_high = np.percentile(grid, [5, 95])
    assert delta == pytest.approx(3.0)
    assert low == pytest.approx(exact_low, abs=0.3) and high == pytest.approx(exact_high, abs=0.3)
    assert significant == (not exact_low <= 0 <= exact_high)
    symmetric = bootstrap_difference([1.0, 3.0, 1.0, 3.0], [3.0, 1.0, 3.0, 1.0], paired=True)
    assert symmetric[0] == 0.0 and symmetric[1] < 0 < symmetric[2] and not symmetric[3]


def test_miou_batch_is_one_set_iou_per_batch_weighted_by_size():
    """PDPP's batch-level mIoU by hand: batches {0, 1} and {2} of 2; one batch of 3."""
    gt = [[1, 2], [3, 4], [5, 6]]
    pred = [[1, 9], [3, 4], [7, 8]]
    # batch 1: P = {1, 9, 3, 4}, G = {1, 2, 3, 4}: 3/5; batch 2: {7, 8} vs {5, 6}: 0
    assert miou_batch(pred, gt, 2) == pytest.approx(100 * (0.6 * 2 + 0 * 1) / 3)
    assert miou_batch(pred, gt, 3) == pytest.approx(100 * 3 / 9)  # {1,3,4} of {1..9}
    assert miou_batch(pred, gt, 1000) == miou_batch(pred, gt, 3)
    rng = np.random.default_rng(0)
    gt, pred = rng.integers(0, 9, (50, 4)), rng.integers(0, 9, (50, 4))
    assert miou_batch(pred, gt, 1) == pytest.approx(planning_metrics(pred, gt)['miou_set'])
    assert miou_batch(pred, gt, 50) > miou_batch(pred, gt, 5) > miou_batch(pred, gt, 1)
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match='batch_size'):
            miou_batch(pred, gt, bad)

"""PKG counting (hand-counted cases), coverage, union and the seeded perturbations."""
import math

import numpy as np
import pytest
import torch

from vpn_plugin.core import (build_pkg, edge_dropout, label_noise, pkg_coverage,
                             pkg_log_transitions, subsample_sequences, union_pkg, weight_noise)


def test_video_mode_counts_each_pair_once():
    # pairs: 0->1, 1->2, 0->1, 1->0  => row 0: {1: 2}, row 1: {2: 1, 0: 1}
    pkg = build_pkg([[0, 1, 2], [0, 1, 0]], 4, count_mode='video')
    expected = np.zeros((4, 4))
    expected[0, 1] = 1.0
    expected[1, 0] = expected[1, 2] = 0.5
    np.testing.assert_array_equal(pkg, expected)
    assert pkg.dtype == np.float64
    assert not np.isnan(pkg).any() and (pkg[2:] == 0).all()  # rows 2, 3 never left


def test_window_mode_counts_each_pair_once_per_sliding_window():
    # video 0 1 2 3 with horizon 3: windows [0 1 2] and [1 2 3]
    # counts: 0->1 once, 1->2 twice, 2->3 once
    video = build_pkg([[0, 1, 2, 3]], 4, count_mode='video')
    window = build_pkg([[0, 1, 2, 3], [2, 1]], 4, count_mode='window', horizon=3)
    explicit = build_pkg([[0, 1, 2], [1, 2, 3]], 4, count_mode='window')
    np.testing.assert_array_equal(window, explicit)  # [2, 1] is shorter than horizon
    np.testing.assert_array_equal(video, explicit)  # one successor per row here
    weighted = build_pkg([[0, 1, 2, 1, 3]], 4, count_mode='window', horizon=3)
    # windows [0 1 2] [1 2 1] [2 1 3]: 1->2 twice, 1->3 once
    assert weighted[1, 2] == pytest.approx(2 / 3) and weighted[1, 3] == pytest.approx(1 / 3)
    assert build_pkg([[0, 1, 2, 1, 3]], 4, count_mode='video')[1, 2] == pytest.approx(1 / 2)


def test_smoothing_only_on_observed_rows():
    pkg = build_pkg([[0, 1]], 3, smoothing=1.0, count_mode='video')
    np.testing.assert_allclose(pkg[0], [1 / 4, 2 / 4, 1 / 4])
    assert (pkg[1:] == 0).all()


@pytest.mark.parametrize('sequences, kwargs, message', [
    ([[0, 5]], {}, 'sequence 0 has action id 5; expected 0..3'),
    ([[0, 1], [-1, 0]], {}, 'sequence 1 has action id -1'),
    ([[0, 1]], dict(count_mode='clip'), "count_mode='clip'"),
    ([[0.5, 1]], {}, 'expected integer action ids'),
    ([[0, 1]], dict(smoothing=-1), 'smoothing=-1'),
])
def test_build_pkg_bad_input(sequences, kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        build_pkg(sequences, 4, **kwargs)


def test_log_transitions_forbid_zero_edges_or_clamp():
    pkg = np.array([[0.0, 1.0], [0.0, 0.0]])
    log_t = pkg_log_transitions(pkg)
    assert log_t[0, 0] == -math.inf and log_t[0, 1] == 0 and (log_t[1] == -math.inf).all()
    clamped = pkg_log_transitions(pkg, clamp=1e-10, dtype=torch.float64)
    assert clamped[0, 0].item() == pytest.approx(math.log(1e-10))


@pytest.mark.parametrize('pkg, message', [
    (np.array([[0.5, 0.6], [0, 0]]), 'row 0 sums to 1.1'),
    (np.array([[1.5, -0.5], [0, 0]]), r'pkg\[0, 1\] = -0.5 is negative'),
    (np.array([[np.nan, 1], [0, 0]]), 'NaN'),
    (np.ones((2, 3)) / 3, 'square'),
])
def test_invalid_pkg_gets_clear_error(pkg, message):
    with pytest.raises(ValueError, match=message):
        pkg_log_transitions(pkg)


def test_coverage_percent_of_sequences_inside_the_graph():
    pkg = build_pkg([[0, 1, 2]], 3, count_mode='video')
    assert pkg_coverage([[0, 1, 2], [0, 1], [2, 0], [1]], pkg) == pytest.approx(75.0)


def test_union_pkg_unites_edges_and_averages_observed_rows():
    a = build_pkg([[0, 1]], 3, count_mode='video')
    b = [[0, 2], [1, 2]]
    union = union_pkg(a, b, num_actions=3)
    np.testing.assert_allclose(union, [[0, 0.5, 0.5], [0, 0, 1], [0, 0, 0]])
    with pytest.raises(ValueError, match='num_actions'):
        union_pkg(a, b)


def test_edge_dropout_removes_fraction_seeded():
    pkg = build_pkg([[0, 1, 2, 3, 0, 2, 1, 3, 1, 0]], 4, count_mode='video')
    edges = int((pkg > 0).sum())
    dropped = edge_dropout(pkg, 0.5, seed=1)
    assert int((dropped > 0).sum()) == edges - round(0.5 * edges)
    assert ((dropped > 0) <= (pkg > 0)).all()
    sums = dropped.sum(1)
    assert np.all(np.isclose(sums, 1) | (sums == 0))
    np.testing.assert_array_equal(dropped, edge_dropout(pkg, 0.5, seed=1))
    assert not np.array_equal(dropped, edge_dropout(pkg, 0.5, seed=2))


def test_weight_noise_keeps_edge_set_and_normalisation():
    pkg = build_pkg([[0, 1, 2, 0, 2, 1, 0]], 3, count_mode='video')
    noisy = weight_noise(pkg, 0.05, seed=0)
    assert ((noisy > 0) <= (pkg > 0)).all() and not np.allclose(noisy, pkg)
    np.testing.assert_allclose(noisy.sum(1), 1)
    np.testing.assert_array_equal(noisy, weight_noise(pkg, 0.05, seed=0))
    np.testing.assert_array_equal(weight_noise(pkg, 0.0, seed=0), pkg)


def test_subsample_sequences_fraction_and_order():
    sequences = [[i] for i in range(10)]
    kept = subsample_sequences(sequences, 0.3, seed=0)
    assert len(kept) == 3 and kept == sorted(kept) and all(s in sequences for s in kept)
    assert kept == subsample_sequences(sequences, 0.3, seed=0)
    assert len(subsample_sequences(sequences, 0.01, seed=0)) == 1  # at least one
    with pytest.raises(ValueError, match=r'fraction=0.0; expected a finite number > 0'):
        subsample_sequences(sequences, 0.0, seed=0)  # no share of the data: not one sequence


def test_label_noise_replaces_fraction_within_task():
    task_actions = [[0, 1, 2], [3, 4, 5, 6]]
    sequences = [[0, 1, 2, 0], [3, 4, 5, 6, 3, 4]]
    noisy = label_noise(sequences, 0.5, task_actions, seed=0)
    changed = sum(a != b for s, n in zip(sequences, noisy) for a, b in zip(s, n))
    assert changed == 5  # round(0.5 * 10) labels, each replaced by another action
    assert set(noisy[0]) <= {0, 1, 2} and set(noisy[1]) <= {3, 4, 5, 6}
    assert noisy == label_noise(sequences, 0.5, task_actions, seed=0)
    assert label_noise(sequences, 0.0, task_actions) == sequences


def test_label_noise_uses_given_tasks_for_shared_actions():
    # action 0 belongs to both tasks; sequence 1 is of task 1 although it only shows action 0
    task_actions = [[0, 1], [0, 2, 3]]
    sequences = [[0, 0, 0], [0, 0, 0, 0]]
    noisy = label_noise(sequences, 1.0, task_actions, seed=0, tasks=[0, 1])
    assert noisy[0] == [1, 1, 1] and set(noisy[1]) <= {2, 3}
    inferred = label_noise(sequences, 1.0, task_actions, seed=0)
    assert inferred[1] == [1, 1, 1, 1]  # majority rule picks task 0 on the tie
    with pytest.raises(ValueError, match='one task index per sequence'):
        label_noise(sequences, 0.5, task_actions, tasks=[0])
    with pytest.raises(ValueError, match='task index 2'):
        label_noise(sequences, 0.5, task_actions, tasks=[0, 2])


@pytest.mark.parametrize('horizon', [2, 3, 5])
def test_window_mode_equals_counting_every_sliding_window_explicitly(horizon):
    """Oracle: enumerate the windows, count their pairs with a Counter, normalise by hand."""
    from collections import Counter
    rng = np.random.default_rng(horizon)
    videos = [rng.integers(0, 6, size=rng.integers(1, 9)).tolist() for _ in range(30)]
    counts = Counter()
    for video in videos:
        for start in range(len(video) - horizon + 1):
            window = video[start:start + horizon]
            counts.update(zip(window[:-1], window[1:]))
    expected = np.zeros((6, 6))
    for (i, j), count in counts.items():
        expected[i, j] = count
    sums = expected.sum(1, keepdims=True)
    expected = np.where(sums > 0, expected / np.where(sums > 0, sums, 1), 0)
    pkg = build_pkg(videos, 6, count_mode='window', horizon=horizon)
    np.testing.assert_allclose(pkg, expected, rtol=0, atol=1e-12)
    sums = pkg.sum(1)
    assert np.all(np.isclose(sums, 1) | (sums == 0)) and not np.isnan(pkg).any()

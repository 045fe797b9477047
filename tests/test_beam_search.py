"""pkg_beam_search against exhaustive enumeration of all paths."""
import itertools
import math

import pytest
import torch

from vpn_plugin.core.beam_search import pkg_beam_search


def random_log_pkg(num_actions, density, seed):
    generator = torch.Generator().manual_seed(seed)
    weights = torch.rand(num_actions, num_actions, generator=generator)
    weights[torch.rand(num_actions, num_actions, generator=generator) > density] = 0
    probs = weights / weights.sum(1, keepdim=True).clamp(min=1e-12)
    return torch.log(probs)  # -inf where no edge


def brute_force(log_transitions, first, last, horizon):
    """Best score of all N^(T-2) paths from first to last (itertools oracle)."""
    best_score, best_paths = -math.inf, []
    for middle in itertools.product(range(log_transitions.shape[0]), repeat=horizon - 2):
        path = (first,) + middle + (last,)
        score = sum(float(log_transitions[a, b]) for a, b in zip(path, path[1:]))
        if score > best_score + 1e-9:
            best_score, best_paths = score, [path]
        elif abs(score - best_score) <= 1e-9:
            best_paths.append(path)
    return best_score, best_paths


@pytest.mark.parametrize('horizon', [2, 3, 4, 5])
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_exhaustive_beam_equals_brute_force(horizon, seed):
    num_actions = 5
    log_a = random_log_pkg(num_actions, density=0.6, seed=seed)
    first = torch.arange(num_actions).repeat_interleave(num_actions)
    last = torch.arange(num_actions).repeat(num_actions)
    paths, scores = pkg_beam_search(log_a, first, last, horizon,
                                    beam_width=num_actions ** max(horizon - 2, 1))
    for path, score, a, b in zip(paths.tolist(), scores.tolist(), first.tolist(), last.tolist()):
        best_score, best_paths = brute_force(log_a, a, b, horizon)
        if math.isinf(best_score):
            assert math.isinf(score)
        else:
            assert score == pytest.approx(best_score)
            assert tuple(path) in best_paths


def test_narrow_beam_score_is_the_score_of_its_path():
    log_a = random_log_pkg(8, density=0.5, seed=3)
    first, last = torch.tensor([0, 1, 2, 3]), torch.tensor([7, 6, 5, 4])
    paths, scores = pkg_beam_search(log_a, first, last, horizon=5, beam_width=2)
    for path, score, a, b in zip(paths.tolist(), scores.tolist(), first.tolist(), last.tolist()):
        assert path[0] == a and path[-1] == b
        recomputed = sum(float(log_a[x, y]) for x, y in zip(path, path[1:]))
        assert score == pytest.approx(recomputed) or (math.isinf(score) and math.isinf(recomputed))
        assert score <= brute_force(log_a, a, b, 5)[0] + 1e-5  # float32 sums


def test_reachability_pruning_finds_the_only_path_with_beam_one():
    # chain 0->1->2->3 plus a tempting high-probability dead end 0->4 (4 has no way out)
    probs = torch.zeros(5, 5)
    probs[0, 1], probs[0, 4] = 0.1, 0.9
    probs[1, 2] = probs[2, 3] = 1.0
    paths, scores = pkg_beam_search(torch.log(probs), torch.tensor([0]), torch.tensor([3]),
                                    horizon=4, beam_width=1)
    assert paths.tolist() == [[0, 1, 2, 3]] and scores.item() == pytest.approx(math.log(0.1))


def test_horizon_one_and_bad_input():
    log_a = random_log_pkg(4, 1.0, 0)
    assert pkg_beam_search(log_a, torch.tensor([2]), torch.tensor([3]), 1)[0].tolist() == [[2]]
    with pytest.raises(ValueError, match='last actions must be in'):
        pkg_beam_search(log_a, torch.tensor([0]), torch.tensor([4]), 3)
    with pytest.raises(ValueError, match=r'must be \(N, N\)'):
        pkg_beam_search(log_a[:3], torch.tensor([0]), torch.tensor([1]), 3)

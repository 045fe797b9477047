"""Baseline planners: PKG beam search planner and uniform-emission PKG decoding."""
import itertools
import math

import pytest
import torch

from vpn_plugin.baselines import PKGBeamSearchPlanner, UniformEmissionPlanner
from mmaction.registry import MODELS


def chain_pkg(num_actions=6):
    """A random dense PKG (N, N) of log probabilities, fixed seed."""
    generator = torch.Generator().manual_seed(0)
    probs = torch.rand(num_actions, num_actions, generator=generator) ** 4
    return torch.log(probs / probs.sum(1, keepdim=True))


def best_path(log_a, horizon, first=None, last=None):
    """Exhaustive oracle: the highest-scoring path with optional fixed endpoints."""
    best, best_score = None, -math.inf
    for path in itertools.product(range(log_a.shape[0]), repeat=horizon):
        if (first is not None and path[0] != first) or (last is not None and path[-1] != last):
            continue
        score = sum(float(log_a[a, b]) for a, b in zip(path, path[1:]))
        if score > best_score:
            best, best_score = path, score
    return list(best)


def toy_batch(num_actions=6, horizon=4, feature_dim=8):
    """Four samples whose first/last actions are a function of one-hot start/goal features."""
    firsts, lasts = torch.tensor([0, 1, 2, 3]), torch.tensor([5, 4, 3, 2])
    start = torch.nn.functional.one_hot(firsts, feature_dim).float()
    goal = torch.nn.functional.one_hot(lasts, feature_dim).float()
    plan = torch.stack([firsts, (firsts + 1) % num_actions, (lasts + 2) % num_actions, lasts], 1)
    return dict(start=start, goal=goal), dict(plan=plan[:, :horizon], task=torch.zeros(4).long(),
                                              index=torch.arange(4))


def test_beam_planner_learns_endpoints_and_decodes_the_best_pkg_path():
    torch.manual_seed(0)
    model = MODELS.build(dict(type='PKGBeamSearchPlanner', feature_dim=8, num_actions=6,
                              horizon=4, beam_width=36,
                              step_model=dict(type='EndpointMLP', hidden_dim=32, dropout=0.0)))
    log_a = chain_pkg()
    model.set_pkg(log_a.double().exp())
    inputs, samples = toy_batch()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(100):
        losses = model(inputs, samples, mode='loss')
        assert set(losses) == {'loss_first', 'loss_last'}
        optimizer.zero_grad()
        sum(losses.values()).backward()
        optimizer.step()
    model.eval()
    outputs = model(inputs, samples, mode='predict')
    for out, gt in zip(outputs, samples['plan']):
        pred = out.pred_plan.tolist()
        assert pred == best_path(log_a, 4, first=int(gt[0]), last=int(gt[-1]))
        assert out.gt_plan.tolist() == gt.tolist()


def test_beam_planner_follows_data_horizon():
    model = PKGBeamSearchPlanner(feature_dim=8, num_actions=6, horizon=4)
    model.set_pkg(chain_pkg().double().exp())
    inputs, samples = toy_batch(horizon=3)
    samples['plan'] = samples['plan'][:, :3]
    assert [len(o.pred_plan) for o in model(inputs, samples, mode='predict')] == [3] * 4


def test_uniform_emissions_decode_the_graphs_favourite_path():
    model = UniformEmissionPlanner(num_actions=5, horizon=3)
    log_a = chain_pkg(5)
    model.set_pkg(log_a.double().exp())
    inputs, samples = toy_batch(num_actions=5, horizon=3)
    outputs = model(inputs, samples, mode='predict')
    expected = best_path(log_a, 3)
    assert all(o.pred_plan.tolist() == expected for o in outputs)
    assert len(list(model.parameters())) == 0
    with pytest.raises(ValueError, match='no trainable parameters'):
        model(inputs, samples, mode='loss')


def test_pkg_shape_is_checked():
    model = UniformEmissionPlanner(num_actions=5, horizon=3)
    with pytest.raises(ValueError, match='num_actions=5'):
        model.set_pkg(torch.zeros(4, 4))


def test_predict_without_a_pkg_is_a_clear_error():
    model = UniformEmissionPlanner(num_actions=6, horizon=4)
    inputs, samples = toy_batch()
    with pytest.raises(RuntimeError, match='PKG was never filled'):
        model(inputs, samples, mode='predict')
    model.set_pkg(chain_pkg().double().exp())
    assert bool(model.pkg_ready) and len(model(inputs, samples, mode='predict')) == 4


def test_pkg_ready_travels_with_the_state_dict():
    model = UniformEmissionPlanner(num_actions=6, horizon=4)
    model.set_pkg(chain_pkg().double().exp())
    fresh = UniformEmissionPlanner(num_actions=6, horizon=4)
    fresh.load_state_dict(model.state_dict())
    assert bool(fresh.pkg_ready)
    assert torch.equal(fresh.log_transitions, model.log_transitions)
    # a checkpoint written before the flag existed carried a filled PKG
    old = {k: v for k, v in model.state_dict().items() if k != 'pkg_ready'}
    older = UniformEmissionPlanner(num_actions=6, horizon=4)
    older.load_state_dict(old, strict=True)
    assert bool(older.pkg_ready)


def test_beam_planner_without_a_pkg_path_emits_no_plan_which_scores_zero():
    """Issue 33, item 2: a window whose first and last actions no PKG path of T steps joins
    has no plan (core.metrics.NO_PLAN), scored 0 on every metric; the brute-force oracle
    confirms which windows have a path."""
    from vpn_plugin.core import METRIC_NAMES, NO_PLAN, per_sample_scores
    model = PKGBeamSearchPlanner(feature_dim=8, num_actions=6, horizon=4)
    cycle = torch.zeros(6, 6)
    cycle[torch.arange(6), (torch.arange(6) + 1) % 6] = 1.0  # 0 -> 1 -> ... -> 5 -> 0
    model.set_pkg(cycle.double())
    endpoints = torch.tensor([[0, 3], [0, 2], [4, 1], [2, 2]])  # (first, last) per window
    model.step_logits = lambda inputs, data_samples=None: torch.nn.functional.one_hot(
        endpoints, 6).float()
    inputs, samples = toy_batch()
    samples['plan'] = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 2], [4, 5, 0, 1], [2, 3, 4, 2]])
    plans = torch.stack([out.pred_plan for out in model(inputs, samples, mode='predict')])
    log_a = torch.log(cycle)
    for (first, last), plan in zip(endpoints.tolist(), plans.tolist()):
        try:
            expected = best_path(log_a, 4, first, last)
        except TypeError:  # the oracle found no finite-score path
            expected = [NO_PLAN] * 4
        assert plan == expected, (first, last, plan)
    assert plans[1].tolist() == [NO_PLAN] * 4 and plans[3].tolist() == [NO_PLAN] * 4
    scores = per_sample_scores(plans, samples['plan'])
    for name in METRIC_NAMES:  # window 1 would score first/last accuracy and legacy IoU
        assert scores[name][1] == 0 and scores[name][3] == 0, name
        assert scores[name][0] == 100 and scores[name][2] == 100, name

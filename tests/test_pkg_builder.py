"""The PKG as a config-built component: PKGBuilder, its perturbations, PKGHook, and a
parameter-free planner tested without a checkpoint through tools/test.py."""
import math
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import DATASETS, HOOKS, MODELS, TASK_UTILS
from vpn_plugin import core
from tiny_configs import save_recorded
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
NUM_ACTIONS, HORIZON = 6, 3
TASK_ACTIONS = [[0, 1, 2], [3, 4, 5]]


def fake_dataset(sequences, horizon=HORIZON):
    return SimpleNamespace(pkg_sequences=lambda mode: sequences, horizon=horizon,
                           taxonomy=SimpleNamespace(num_actions=NUM_ACTIONS,
                                                    task_actions=TASK_ACTIONS))


def builder(**options):
    return TASK_UTILS.build(dict(type='PKGBuilder', **options))


def planner(**pkg):
    return MODELS.build(dict(type='UniformEmissionPlanner', num_actions=NUM_ACTIONS,
                             horizon=HORIZON, pkg=dict(type='PKGBuilder', **pkg)))


def test_planner_counts_its_pkg_from_the_training_sequences():
    model = planner()
    model.build_pkg(fake_dataset([[0, 1, 2], [3, 4, 5], [0, 1, 1]]))
    probs = model.log_transitions.exp()
    assert math.isclose(float(probs[0, 1]), 1.0, rel_tol=1e-6)
    assert math.isclose(float(probs[1, 2]), 0.5, rel_tol=1e-6)
    assert float(probs[2].sum()) == 0.0  # action 2 never has a successor
    assert bool(model.pkg_ready)
    uniform = planner(perturbations=[dict(type='UniformGraph')])
    uniform.build_pkg(fake_dataset([[0, 1, 2]]))
    assert torch.allclose(uniform.log_transitions.exp(), torch.full((6, 6), 1 / 6))


def test_perturbations_are_seeded_and_applied_in_order():
    sequences = [[a, b, c] for a in range(3) for b in range(3) for c in range(3)]
    options = dict(perturbations=[dict(type='DataFraction', fraction=0.5),
                                  dict(type='EdgeDropout', fraction=0.5)], seed=3)
    first = builder(**options).build(fake_dataset(sequences), NUM_ACTIONS)
    second = builder(**options).build(fake_dataset(sequences), NUM_ACTIONS)
    other_seed = builder(**dict(options, seed=4)).build(fake_dataset(sequences), NUM_ACTIONS)
    full = builder().build(fake_dataset(sequences), NUM_ACTIONS)
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other_seed)
    assert (first > 0).sum() < (full > 0).sum()
    # the same steps by hand through the core functions
    kept = core.subsample_sequences(sequences, 0.5, seed=3)
    expected = core.edge_dropout(core.build_pkg(kept, NUM_ACTIONS, horizon=HORIZON), 0.5, seed=3)
    np.testing.assert_array_equal(first, expected)


@DATASETS.register_module(force=True)
class ExtraPKGSequences:
    """A dataset config for PKGBuilder.extra_datasets: only its sequences matter."""

    def __init__(self, sequences):
        self.sequences = sequences
        self.taxonomy = SimpleNamespace(num_actions=NUM_ACTIONS)

    def pkg_sequences(self, mode):
        return self.sequences


def test_union_pools_counts_or_averages_sources():
    train = [[0, 1, 2]] * 9  # 9 x (0 -> 1)
    extra_cfg = dict(type='ExtraPKGSequences', sequences=[[0, 2, 1]])  # 1 x (0 -> 2)
    pooled = builder(extra_datasets=[extra_cfg]).build(fake_dataset(train), NUM_ACTIONS)
    mean = builder(extra_datasets=[extra_cfg], union='mean').build(fake_dataset(train),
                                                                   NUM_ACTIONS)
    # row 0 by hand: pooled counts 9:1; the mean of the per-source rows (1, 0) and (0, 1)
    assert pooled[0, 1] == pytest.approx(0.9) and pooled[0, 2] == pytest.approx(0.1)
    assert mean[0, 1] == pytest.approx(0.5) and mean[0, 2] == pytest.approx(0.5)
    # row 1 (1 -> 2 only in train, 2 -> 1 only in extra): each source alone decides its row
    assert mean[1, 2] == pytest.approx(1.0) and mean[2, 1] == pytest.approx(1.0)


@pytest.mark.parametrize('options, message', [
    (dict(count_mode='pairs'), "count_mode='pairs'"),
    (dict(union='sum'), "union='sum'"),
    (dict(perturbations=[dict(type='EdgeDropout', fraction=1.5)]), 'fraction=1.5'),
    (dict(perturbations=[dict(type='DataFraction', fraction=0)]),
     r'DataFraction.fraction=0; expected a finite number > 0 and <= 1'),
    (dict(perturbations=[dict(type='WeightNoise', sigma=0.5),
                         dict(type='LabelNoise', fraction=0.1)]),
     'sequence perturbation .* must come before'),
])
def test_bad_builder_options_are_clear_errors(options, message):
    with pytest.raises(ValueError, match=message):
        builder(**options)


def test_training_set_of_another_horizon_is_refused():
    with pytest.raises(ValueError, match='horizon mismatch.*horizon=4.*model.horizon=3'):
        planner().build_pkg(fake_dataset([[0, 1, 2, 3]], horizon=4))


def fake_runner(model, loader):
    return SimpleNamespace(model=model, _train_dataloader=loader)


def test_pkg_hook_fills_an_empty_graph_and_keeps_a_loaded_one():
    model = planner()
    dataset = fake_dataset([[0, 1, 2]])
    HOOKS.build(dict(type='PKGHook')).before_test(fake_runner(model, SimpleNamespace(
        dataset=dataset)))
    assert bool(model.pkg_ready) and float(model.log_transitions.exp()[0, 1]) == 1.0
    model.set_pkg(np.full((NUM_ACTIONS, NUM_ACTIONS), 1 / NUM_ACTIONS))  # as a checkpoint would
    HOOKS.build(dict(type='PKGHook')).before_train(fake_runner(model, SimpleNamespace(
        dataset=dataset)))
    assert torch.allclose(model.log_transitions.exp(), torch.full((6, 6), 1 / 6))


def test_pkg_hook_leaves_models_without_a_graph_alone():
    model = torch.nn.Linear(2, 2)
    HOOKS.build(dict(type='PKGHook')).before_test(fake_runner(model, None))
    assert not hasattr(model, 'pkg_ready')


def test_pkg_hook_without_training_split_or_checkpoint_is_a_clear_error():
    with pytest.raises(ValueError, match='no train_dataloader.dataset and no checkpoint'):
        HOOKS.build(dict(type='PKGHook')).before_test(fake_runner(planner(), None))


# ------------------------------------------------ tools/test.py without a checkpoint
def tiny_uniform_config(tiny_crosstask, tmp_path) -> Path:
    """configs/baselines/uniform_emissions_crosstask_t3.py on the tiny CrossTask subset."""
    config = tmp_path / 'uniform_tiny.py'
    splits = ''.join(f"{split}_dataloader = dict(batch_size=64, dataset=dict(_delete_=True, "
                     f"**{tiny_crosstask[f'{split}_dataset']!r}))\n"
                     for split in ('train', 'val', 'test'))
    base = REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py'
    config.write_text(f'_base_ = [{str(base)!r}]\n' + splits)
    return config


def best_uniform_score(log_a: np.ndarray) -> float:
    """max over (a, b, c) of log A[a, b] + log A[b, c]: the best T=3 path under uniform
    emissions and prior, by enumerating all N^3 paths."""
    with np.errstate(invalid='ignore'):
        scores = log_a[:, :, None] + log_a[None, :, :]
    return float(np.nanmax(scores))


def test_uniform_emissions_without_checkpoint_decode_through_the_counted_pkg(
        tiny_crosstask, tmp_path):
    config = tiny_uniform_config(tiny_crosstask, tmp_path)
    out = tmp_path / 'predictions.pkl'
    metrics = load_tool('test').main([str(config), '--work-dir', str(tmp_path / 'work'),
                                     '--out', str(out)])
    plans = np.array([sample['pred_plan'].tolist() for sample in pickle.loads(out.read_bytes())])
    train = DATASETS.build(tiny_crosstask['train_dataset'])
    pkg = core.build_pkg(train.pkg_sequences('window'), 133, horizon=3)
    with np.errstate(divide='ignore'):
        log_a = np.log(pkg)
    assert (plans != 0).any(), 'the placeholder graph decodes every window to [0, 0, 0]'
    assert len(np.unique(plans, axis=0)) == 1  # no observation is used: one plan for all
    plan = plans[0]
    assert pkg[plan[0], plan[1]] > 0 and pkg[plan[1], plan[2]] > 0
    score = log_a[plan[0], plan[1]] + log_a[plan[1], plan[2]]
    assert score == pytest.approx(best_uniform_score(log_a), abs=1e-5)
    test_set = DATASETS.build(tiny_crosstask['test_dataset'])
    expected_sr = 100 * (test_set.plans == plan).all(1).mean()
    assert metrics['plan/success_rate'] == pytest.approx(expected_sr)


def test_a_checkpoints_pkg_is_kept_by_tools_test(tiny_crosstask, tmp_path):
    """The checkpoint's graph (only a -> a+1 edges) decides the plans, not a recount."""
    model = MODELS.build(dict(type='UniformEmissionPlanner', num_actions=133, horizon=3))
    chain = np.roll(np.eye(133), 1, axis=1)  # a -> a + 1 (mod N)
    model.set_pkg(chain)
    save_recorded(model, tmp_path / 'chain.pth', tiny_crosstask['test_dataset'])
    out = tmp_path / 'predictions.pkl'
    load_tool('test').main([str(tiny_uniform_config(tiny_crosstask, tmp_path)),
                           str(tmp_path / 'chain.pth'), '--work-dir', str(tmp_path / 'work'),
                           '--out', str(out)])
    for sample in pickle.loads(out.read_bytes()):
        first = int(sample['pred_plan'][0])
        assert sample['pred_plan'].tolist() == [first, (first + 1) % 133, (first + 2) % 133]

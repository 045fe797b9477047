"""Unit tests of CompactPlanNet and the text embeddings on small random tensors."""
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vpn_plugin.mm  # noqa: F401  (registration)
from vpn_plugin import core
from mmaction.registry import MODELS
from vpn_plugin.models import DECODE_MODES, horizon_queries, state_embeddings, state_texts

NUM_ACTIONS, NUM_TASKS, FEATURE_DIM, HORIZON = 6, 2, 10, 3
TASK_ACTIONS = [[0, 1, 2], [3, 4, 5]]


@pytest.fixture(scope='module')
def text_files(tmp_path_factory):
    """A 2-task taxonomy and its state descriptions (task names spelt differently on purpose)."""
    root = tmp_path_factory.mktemp('text')
    taxonomy = {'0_TaskA': {'0': 'pour water', '1': 'stir', '2': 'serve'},
                '1_Task B': {'3': 'cut', '4': 'paint', '5': 'attach'}}
    descriptions = {
        'Task A': {name: _states(name) for name in ('pour water', 'stir', 'serve')},
        'Task B': {name: _states(name) for name in ('cut', 'paint', 'attach')}}
    (root / 'taxonomy.json').write_text(json.dumps(taxonomy))
    (root / 'states.json').write_text(json.dumps(descriptions))
    return root


def _states(name):
    return {'description': name, 'before': [f'before {name} {i}' for i in range(3)],
            'after': [f'after {name} {i}' for i in range(3)]}


@pytest.fixture(scope='module')
def text_cfg(text_files):
    return dict(taxonomy=str(text_files / 'taxonomy.json'),
                state_descriptions=str(text_files / 'states.json'),
                cache_dir=str(text_files / 'cache'))


def build(text_cfg=None, **overrides):
    cfg = dict(type='CompactPlanNet', feature_dim=FEATURE_DIM, num_actions=NUM_ACTIONS,
               num_tasks=NUM_TASKS, horizon=HORIZON, embed_dim=16, num_heads=2, dropout=0.0,
               text_embeddings=text_cfg)
    if text_cfg is None:
        cfg['loss_weights'] = dict(align=0.0)
    cfg.update(overrides)
    return MODELS.build(cfg)


def batch(size=4, horizon=HORIZON, seed=0):
    gen = torch.Generator().manual_seed(seed)
    inputs = {'start': torch.randn(size, FEATURE_DIM, generator=gen),
              'goal': torch.randn(size, FEATURE_DIM, generator=gen)}
    plan = torch.randint(0, NUM_ACTIONS, (size, horizon), generator=gen)
    samples = {'plan': plan, 'task': plan[:, 0] // 3, 'index': torch.arange(size)}
    return inputs, samples


def chain_log_transitions():
    """PKG allowing only a -> a+1 within each task (and the last step back to the first)."""
    probs = torch.zeros(NUM_ACTIONS, NUM_ACTIONS)
    for actions in TASK_ACTIONS:
        for a, b in zip(actions, actions[1:] + actions[:1]):
            probs[a, b] = 1.0
    return probs.log()


def test_state_texts_match_tasks_by_normalised_name(text_files):
    before, after = state_texts(['pour water', 'cut'], ['TaskA', 'Task B'],
                                str(text_files / 'states.json'))
    assert before[0][0] == 'before pour water 0' and after[1][2] == 'after cut 2'


def test_missing_state_description_names_action(text_files):
    with pytest.raises(KeyError, match="'fly'"):
        state_texts(['fly'], ['Task A'], str(text_files / 'states.json'))


def test_state_embeddings_cached_and_normalised(text_cfg, tmp_path):
    names, tasks = ['pour water', 'stir'], ['Task A', 'Task A']
    before, after = state_embeddings(names, tasks, text_cfg['state_descriptions'],
                                     cache_dir=str(tmp_path))
    assert before.shape[:2] == (2, 3) and after.shape == before.shape
    assert torch.allclose(before.norm(dim=-1), torch.ones(2, 3), atol=1e-5)
    assert len(list(tmp_path.glob('states_*.pt'))) == 1
    again, _ = state_embeddings(names, tasks, text_cfg['state_descriptions'],
                                cache_dir=str(tmp_path), allow_encode=False)
    assert torch.equal(again, before)
    # different texts -> different key -> no stale cache
    with pytest.raises(FileNotFoundError, match='cache'):
        state_embeddings(['serve'], ['Task A'], text_cfg['state_descriptions'],
                         cache_dir=str(tmp_path), allow_encode=False)


def test_missing_text_embeddings_is_a_clear_error(text_cfg):
    with pytest.raises(ValueError, match='text_embeddings is missing'):
        build(None, loss_weights=dict(align=1.0))
    with pytest.raises(FileNotFoundError, match='no/such/encoder|could not be loaded'):
        build({**text_cfg, 'encoder': '/no/such/encoder', 'cache_dir': '/tmp/vpn_no_cache'})


def test_unknown_decode_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="decode='best'.*emission_argmax"):
        build(decode='best')


def test_losses_are_finite_and_switchable(text_cfg):
    model = build(text_cfg)
    model.set_pkg(chain_log_transitions().exp())
    losses = model(*batch(), mode='loss')
    assert set(losses) == {'loss_plan', 'loss_task', 'loss_align'}
    total = sum(losses.values())
    total.backward()
    assert torch.isfinite(total)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    only_plan = build(text_cfg, loss_weights=dict(align=0.0, task=0.0))
    assert set(only_plan(*batch(), mode='loss')) == {'loss_plan'}


def test_base_model_plan_loss_is_mse_on_emissions():
    model = build(use_dvl=False).eval()
    inputs, samples = batch()
    emissions = model(inputs, samples, mode='tensor')
    target = F.one_hot(samples['plan'], NUM_ACTIONS).float()
    expected = F.mse_loss(emissions, target, reduction='sum') / target[..., 0].numel()
    assert torch.allclose(model(inputs, samples, mode='loss')['loss_plan'], expected)


def test_alignment_loss_matches_multi_positive_cross_entropy(text_cfg):
    model = build(text_cfg)
    visual = torch.randn(2, 16)
    actions = torch.tensor([1, 4])
    states = model.state_before
    projected = F.normalize(model.text_projection(visual), dim=-1)
    logits = projected @ states.flatten(0, 1).t() / model.align_temperature
    probs = logits.softmax(-1).view(2, NUM_ACTIONS, 3)
    expected = -torch.log(probs[torch.arange(2), actions].sum(-1)).mean()
    assert torch.allclose(model.alignment_loss(visual, states, actions), expected, atol=1e-5)


@pytest.mark.parametrize('mode', DECODE_MODES)
def test_every_decode_mode_gives_plans(mode):
    model = build(decode=mode).eval()
    model.set_pkg(chain_log_transitions().exp())
    inputs, samples = batch(size=5)
    results = model(inputs, samples, mode='predict')
    assert len(results) == 5
    for i, sample in enumerate(results):
        assert sample.pred_plan.shape == (HORIZON,) and sample.pred_plan.dtype == torch.long
        assert sample.soft_plan.shape == sample.emissions.shape == (HORIZON, NUM_ACTIONS)
        assert torch.equal(sample.gt_plan, samples['plan'][i]) and int(sample.sample_idx) == i
    if mode.endswith('viterbi'):  # Viterbi plans follow PKG edges
        allowed = torch.isfinite(chain_log_transitions())
        for sample in results:
            plan = sample.pred_plan
            assert all(allowed[a, b] for a, b in zip(plan[:-1], plan[1:]))


def test_decode_modes_agree_with_their_definitions():
    model = build().eval()
    emissions = torch.rand(3, HORIZON, NUM_ACTIONS)
    assert torch.equal(model.decode_plan(emissions, mode='emission_argmax'),
                       emissions.argmax(-1))
    soft = model.soft_plan(emissions)
    assert torch.equal(model.decode_plan(emissions, mode='dvl_argmax'), soft.argmax(-1))
    # uniform PKG: Viterbi on emissions = per-step argmax
    assert torch.equal(model.decode_plan(emissions, mode='emission_viterbi'),
                       emissions.argmax(-1))


def test_horizon_queries():
    assert horizon_queries(6, 6, None) == [0, 1, 2, 3, 4, 5]
    assert horizon_queries(6, 3, 'ends') == [0, 1, 5]
    assert horizon_queries(6, 4, 'spread') == [0, 2, 3, 5]
    with pytest.raises(ValueError, match='horizon mismatch.*T=3.*horizon=6'):
        horizon_queries(6, 3, None)


def test_horizon_mismatch_errors_and_cross_horizon():
    model = build(horizon=6).eval()
    inputs, samples = batch(horizon=3)
    with pytest.raises(ValueError, match='horizon mismatch'):
        model(inputs, samples, mode='predict')
    with pytest.raises(ValueError, match='horizon mismatch'):
        model.train()(inputs, samples, mode='loss')
    cross = build(horizon=6, cross_horizon='ends').eval()
    cross.set_pkg(np.full((NUM_ACTIONS, NUM_ACTIONS), 1 / NUM_ACTIONS))
    results = cross(inputs, samples, mode='predict')
    assert results[0].pred_plan.shape == (3,)
    with pytest.raises(ValueError, match='horizon mismatch'):  # training stays strict
        cross.train()(inputs, samples, mode='loss')


def test_observed_steps_change_emissions():
    model = build().eval()
    inputs, samples = batch()
    plain = model(inputs, samples, mode='tensor')
    inputs['observed'] = torch.randn(4, 1, FEATURE_DIM)
    assert not torch.allclose(model(inputs, samples, mode='tensor'), plain)


def test_frozen_visual_encoder_gets_no_gradient(tmp_path):
    with pytest.raises(ValueError, match='freeze_visual=True needs model.init_visual_from'):
        build(freeze_visual=True)
    pretrained = build()
    torch.save({'state_dict': pretrained.state_dict()}, tmp_path / 'pre.pth')
    model = build(freeze_visual=True, init_visual_from=str(tmp_path / 'pre.pth'))
    for name, value in pretrained.visual_encoder.state_dict().items():
        assert torch.equal(model.visual_encoder.state_dict()[name], value)
    sum(model(*batch(), mode='loss').values()).backward()
    assert all(p.grad is None for p in model.visual_encoder.parameters())
    assert model.emission_head[0].weight.grad is not None


def test_stacked_dvl_layers_decode_the_first_layers_soft_plan():
    """dvl_layers=2 = a second DVL on log(soft plan of the first), through the same PKG."""
    model = build(dvl_layers=2).eval()
    model.log_transitions.copy_(torch.randn(NUM_ACTIONS, NUM_ACTIONS).log_softmax(-1))
    emissions = torch.rand(3, HORIZON, NUM_ACTIONS) + 0.01
    first = core.differentiable_viterbi(emissions.log(), model.log_transitions)[0]
    second = core.differentiable_viterbi(first.clamp(min=torch.finfo(first.dtype).tiny).log(),
                                         model.log_transitions)[0]
    torch.testing.assert_close(model.soft_plan(emissions), second, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(model.soft_plan(emissions), first, atol=1e-3)

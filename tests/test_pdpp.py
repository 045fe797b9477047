"""PDPP: the official code's function (its oracle fixture), the training recipe in the mmengine
Runner (task classifier first, steps per epoch, warm-up/step LR, EMA) and the PDPP step model
of the PKG beam search. Tiny sizes; full-size models are only built."""
import copy
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import MODELS
from mmengine.dataset import DefaultSampler
from test_baselines import best_path, chain_pkg
from tiny_configs import differing_tensors, trained_and_reused_pre_stage, write_tiny_config
from reference_fixtures import copy_fixture, reference_dir, shift_array
from tool_modules import load_tool
from vpn_plugin.core import diffusion
from vpn_plugin.data_paths import load_config
from vpn_plugin.engine import PDPPEMAHook, StepsPerEpochBatchSampler, TaskClassifierHook
from vpn_plugin.models.base_planner import num_parameters

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / 'configs/baselines/pdpp_crosstask_t3.py'

pytestmark = pytest.mark.usefixtures('single_thread')


# ------------------------------------------------------------------ the oracle fixture
@pytest.fixture(scope='module')
def fixture_dir() -> Path:
    return reference_dir('pdpp_small_t3')


def test_reference_fixture_passes(fixture_dir, capsys):
    assert load_tool('check_reference').main([str(fixture_dir)]) == 0
    report = capsys.readouterr().out
    assert 'parameters crosstask_133: U-Net 41,866,647 (official 41,866,647), task classifier ' \
           '7,094,290 (official 7,094,290) ok' in report
    for row in ('outputs.npz:ddim_states[step-by-step]', 'outputs.npz:ddim_final[free-running]',
                'outputs.npz:sched200_posterior_mean_coef2',
                'outputs.npz:lr_multipliers_30', 'outputs.npz:ema_new.fc4.weight',
                'grads.npz:model.ups.1.2.conv.weight', 'head_grads.npz:fc1.weight'):
        assert row in report
    assert '\nPASS\nsensitivity: widest tolerance ' in report
    # issue 37 item 10: one line per module of both weight files, each moving one weight by 0.05
    # and rerunning at the measured tolerances; every U-Net module fails a widened row
    lines = [line for line in report.splitlines() if line.startswith('sensitivity: ')
             and '(+0.05 on ' in line]
    assert len(lines) == 11 + 4, lines
    for line in lines:
        seen = re.search(r'rows fail, (\d+) of the (\d+) widened', line)
        assert seen, line
        if line.startswith('sensitivity: state_dict.npz:'):
            assert int(seen.group(1)) >= 1, line


def test_perturbed_fixture_fails(fixture_dir, tmp_path, capsys):
    copy_dir = copy_fixture(fixture_dir, tmp_path)
    for name, key, index, delta in (
            ('state_dict.npz', 'model.mid_block1.blocks.1.block.0.weight', (0, 0, 1), 0.05),
            ('outputs.npz', 'lr_multipliers_30', (7,), 0.01)):
        shift_array(copy_dir, name, key, index, delta)
    assert load_tool('check_reference').main([str(copy_dir)]) == 1
    failed = {line.split()[0] for line in capsys.readouterr().out.splitlines()
              if line.endswith('FAIL')}
    assert {'outputs.npz:x_recon', 'outputs.npz:x_recon_raw', 'outputs.npz:lr_multipliers_30',
            'outputs.npz:loss', 'outputs.npz:ddim_x_recon_raw[step-by-step]',
            'outputs.npz:ddim_states[step-by-step]'} <= failed
    assert any(name.startswith('grads.npz:') for name in failed)
    assert not any('head' in name or 'sched' in name for name in failed)


def test_a_nan_output_or_a_moved_schedule_buffer_fails(fixture_dir, tmp_path, capsys):
    """Issue 37 item 6: a NaN in x_start passed (its tolerance became inf), and betas[0] +0.05
    in state_dict.npz passed (the schedule was rebuilt from meta.json, the buffers unread)."""
    copy_dir = copy_fixture(fixture_dir, tmp_path)
    shift_array(copy_dir, 'outputs.npz', 'x_start', (0, 0, 0), np.nan)
    shift_array(copy_dir, 'state_dict.npz', 'betas', (0,), 0.05)
    assert load_tool('check_reference').main([str(copy_dir)]) == 1
    failed = {line.split()[0] for line in capsys.readouterr().out.splitlines()
              if line.endswith('FAIL')}
    assert failed == {'outputs.npz:x_start', 'state_dict.npz:betas'}


@pytest.mark.parametrize('field, value', [('horizon', 4), ('num_actions', 10), ('batch', 8)])
def test_a_fixture_whose_header_disagrees_with_its_arrays_is_refused(fixture_dir, tmp_path,
                                                                     monkeypatch, field, value):
    """Issue 33: meta.json edited to horizon=4 passed while everything ran at T=3."""
    import json
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    copy_dir = copy_fixture(fixture_dir, tmp_path)
    meta = json.loads((copy_dir / 'meta.json').read_text())
    (copy_dir / 'meta.json').write_text(json.dumps(dict(meta, **{field: value})))
    with pytest.raises(SystemExit) as stopped:
        load_tool('check_reference').main([str(copy_dir)])
    message = str(stopped.value.code)
    assert f'{copy_dir / "inputs.npz"}: ' in message and 'from meta.json' in message, message
    assert f'{field}={value}' in message, message


def test_full_size_parameter_counts_from_the_configs():
    model = MODELS.build(load_config(str(CONFIG)).model)  # built, not run
    assert num_parameters(model) == 41_866_647
    assert num_parameters(model.diffusion.task_head) == 7_094_290
    expected = {'niv': (41_741_109, 7_087_621), 'coin': (42_900_414, 7_177_396)}
    for dataset, (unet, head) in expected.items():
        with torch.device('meta'):
            built = MODELS.build(load_config(
                str(REPO / f'configs/baselines/pdpp_{dataset}_t3.py')).model)
        assert (num_parameters(built), num_parameters(built.diffusion.task_head)) == (unet, head)
    with torch.device('meta'):
        beam = MODELS.build(load_config(
            str(REPO / 'configs/baselines/pkg_beam_search_crosstask_t3.py')).model)
        mlp = MODELS.build(load_config(
            str(REPO / 'configs/baselines/pkg_beam_search_mlp_crosstask_t3.py')).model)
    assert num_parameters(beam) == 41_866_647 and num_parameters(mlp) == 855_050
    assert beam.step_model.middle_actions is False


# ------------------------------------------------------------------ core pieces
def test_weighted_mse_weights_and_the_step_model_target():
    generator = torch.Generator().manual_seed(0)
    pred, target = (torch.randn(2, 4, 2 + 3 + 5, generator=generator) for _ in range(2))
    squared = (pred - target) ** 2
    actions = slice(2, 5)
    expected = squared.sum() + 9 * (squared[:, 0, actions].sum() + squared[:, -1, actions].sum())
    assert torch.allclose(diffusion.weighted_mse(pred, target, 2, 3), expected)
    no_middle = expected - squared[:, 1:-1, actions].sum()
    assert torch.allclose(diffusion.weighted_mse(pred, target, 2, 3, 10., 0.), no_middle)
    plan, task = torch.tensor([[0, 1, 2, 1]]), torch.tensor([[0., 1.]])
    obs = torch.ones(1, 5)
    x0 = diffusion.plan_tensor(plan, task, obs, 2 * obs, 3, middle_actions=False)
    assert x0[0, :, 2:5].tolist() == [[1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 1, 0]]
    assert x0[0, :, 5:].sum(-1).tolist() == [5, 0, 0, 10] and (x0[..., :2] == task).all()


def sampler_batches(sampler, epochs):
    batches = []
    for epoch in epochs:
        sampler.sampler.set_epoch(epoch)  # what DistSamplerSeedHook does before each epoch
        batches += list(sampler)
    return batches


def test_steps_per_epoch_sampler_cycles_reshuffled_drop_last_passes():
    dataset = list(range(10))
    sampler = StepsPerEpochBatchSampler(DefaultSampler(dataset, shuffle=True, seed=3), 3, 4)
    assert len(sampler) == 4
    stream = sampler_batches(sampler, range(3))  # 12 steps = 4 passes of 3 batches
    for pass_index in range(4):
        order = DefaultSampler(dataset, shuffle=True, seed=3)
        order.set_epoch(pass_index)
        assert sum(stream[3 * pass_index:3 * pass_index + 3], []) == list(order)[:9]
    assert sampler_batches(sampler, [1, 2]) == stream[4:]  # a resumed run draws the same
    with pytest.raises(ValueError, match='fewer than one batch of 11'):
        list(StepsPerEpochBatchSampler(DefaultSampler(dataset), 11, 2))


class FakeRunner:
    def __init__(self, model, max_iters):
        self.model, self.max_iters, self.iter, self.epoch = model, max_iters, 0, 0


def test_ema_hook_follows_the_official_trainer():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    runner = FakeRunner(model, 450)
    hook = PDPPEMAHook()
    hook.before_run(runner)
    hook.before_train(runner)
    official = copy.deepcopy(model)  # utils/training.py Trainer.step_ema, every 10 steps
    for step in range(450):
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter))
        runner.iter = step
        hook.after_train_iter(runner, step)
        if step % 10 == 0:
            for ema, current in zip(official.parameters(), model.parameters()):
                ema.data = current.data.clone() if step < 400 else (
                    ema.data * 0.995 + 0.005 * current.data)
        if step in (5, 395, 449):
            for ema, reference in zip(hook.ema_model.module.parameters(), official.parameters()):
                assert torch.allclose(ema, reference, atol=1e-6), step


@pytest.mark.parametrize('kind', ['PDPP', 'CEFITO'])
@pytest.mark.parametrize('steps', [4, 10, 11, 23, 395, 400, 401])
def test_a_short_run_says_which_weights_its_ema_holds(kind, steps, monkeypatch):
    """The line a run shorter than the EMA's averaging logs names the weights the EMA (what
    validation, checkpoints and test.py use) holds at its end; checked against the hook itself
    run for ``steps`` steps on a model whose weights are the number of the last step. A CEFITO
    run of fewer than update_every steps (issue 38 item 2) tests its untrained initial weights."""
    from vpn_plugin.engine import ema as ema_module
    from vpn_plugin.engine.cefito_training import CEFITOEMAHook
    lines = []
    monkeypatch.setattr(ema_module, 'print_log', lambda text, **kw: lines.append((text, kw)))
    model = nn.Linear(1, 1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(0.0)  # the initial weights
    runner = FakeRunner(model, steps)
    hook = PDPPEMAHook() if kind == 'PDPP' else CEFITOEMAHook(start_step=400, update_every=10)
    hook.before_run(runner)
    hook.before_train(runner)
    for step in range(steps):
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.fill_(step + 1.0)
        runner.iter = step
        hook.after_train_iter(runner, step)
    held = float(next(hook.ema_model.module.parameters()).flatten()[0])
    if held != int(held):  # averaged (decay 0.995): no line
        assert lines == [], lines
        return
    assert len(lines) == 1, lines
    text, options = lines[0]
    if held == 0:
        assert 'are the initial weights, untrained' in text and options['level'] > 20
    else:
        assert f'are the model after step {int(held)} of {steps} ' in text


# ------------------------------------------------------------------ learning and sampling
def toy_diffusion(**changes):
    options = dict(feature_dim=8, num_actions=6, num_tasks=2, horizon=3, dim=32, n_timesteps=20)
    return MODELS.build(dict(type='PDPPDiffusion', **options, **changes))


def toy_batch():
    start = torch.nn.functional.one_hot(torch.tensor([0, 1, 2, 3]), 8).float()
    goal = torch.nn.functional.one_hot(torch.tensor([4, 5, 6, 7]), 8).float()
    plan = torch.tensor([[0, 1, 2], [3, 4, 5], [1, 3, 5], [2, 2, 0]])
    return dict(start=start, goal=goal), dict(plan=plan, task=torch.tensor([0, 1, 0, 1]),
                                              index=torch.arange(4))


def test_gradients_reach_the_unet_through_the_projections():
    torch.manual_seed(0)
    module = toy_diffusion()
    inputs, samples = toy_batch()
    x0 = module.target(samples['plan'], samples['task'], inputs)
    t, noise = torch.tensor([0, 5, 10, 19]), torch.randn_like(x0)
    optimizer = torch.optim.Adam(module.unet.parameters(), lr=3e-3, fused=True)
    losses = []
    for _ in range(25):
        loss = module.training_terms(x0, t, noise, samples['task'], inputs)['loss']
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    assert all(p.grad is None for p in module.task_head.parameters())  # stage 1 is apart
    with pytest.raises(RuntimeError, match='task classifier was never trained'):
        module.action_scores(inputs, samples)


def test_pdpp_planner_decodes_and_refuses_bad_settings():
    model = MODELS.build(dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=2, horizon=3,
                              dim=32, n_timesteps=20, decode='viterbi'))
    log_a = chain_pkg(6)
    log_a[:, 5] = -math.inf  # no edge into action 5
    model.set_pkg((log_a.exp() / log_a.exp().sum(1, keepdim=True)).double())
    model.diffusion.classifier_ready.fill_(True)
    inputs, samples = toy_batch()
    outputs = model(inputs, samples, mode='predict')
    assert all(5 not in o.pred_plan[1:].tolist() and o.action_scores.shape == (3, 6)
               for o in outputs)
    halves = [model({k: v[part] for k, v in inputs.items()},
                    {k: v[part] for k, v in samples.items()}, mode='predict')
              for part in (slice(0, 1), slice(1, 4))]
    for alone, together in zip(halves[0] + halves[1], outputs):  # per-window x_T
        assert torch.equal(alone.action_scores, together.action_scores)
    with pytest.raises(ValueError, match=r'task ids in \[0, 1\] but model.num_tasks=1'):
        MODELS.build(dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=1, horizon=3,
                          dim=32, n_timesteps=20))(inputs, samples, mode='loss')
    with pytest.raises(ValueError, match='have 8 dims but model.feature_dim=9'):
        MODELS.build(dict(type='PDPP', feature_dim=9, num_actions=6, num_tasks=2, horizon=3,
                          dim=32, n_timesteps=20))(inputs, samples, mode='loss')
    samples['plan'] = samples['plan'][:, :2]
    with pytest.raises(ValueError, match='horizon mismatch'):
        model(inputs, samples, mode='predict')
    for changes, message in ((dict(horizon=2), 'needs T >= 3'),
                             (dict(n_timesteps=5), r'model\.n_timesteps=5: fewer diffusion'),
                             (dict(dim=48), 'multiple of 32'),
                             (dict(decode='beam'), "model.decode='beam'; expected one of")):
        options = dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=2, horizon=3,
                       dim=32, n_timesteps=20)
        with pytest.raises(ValueError, match=message):
            MODELS.build(dict(options, **changes))


def test_beam_search_with_the_pdpp_step_model():
    torch.manual_seed(0)
    model = MODELS.build(dict(type='PKGBeamSearchPlanner', feature_dim=8, num_actions=6,
                              horizon=4, beam_width=36,
                              step_model=dict(type='PDPPDiffusion', num_tasks=2, dim=32,
                                              n_timesteps=20, middle_actions=False)))
    assert num_parameters(model) == num_parameters(model.step_model.unet)
    log_a = chain_pkg(6)
    model.set_pkg(log_a.double().exp())
    model.step_model.classifier_ready.fill_(True)
    inputs, samples = toy_batch()
    samples['plan'] = torch.cat([samples['plan'], samples['plan'][:, :1]], 1)
    assert set(model(inputs, samples, mode='loss')) == {'loss_diffusion'}
    model.eval()
    ends = model.step_logits(inputs, samples).argmax(-1)
    for output, (first, last) in zip(model(inputs, samples, mode='predict'), ends.tolist()):
        assert output.pred_plan.tolist() == best_path(log_a, 4, first=first, last=last)


# ------------------------------------------------------------------ the Runner, two stages
@pytest.fixture(scope='module')
def tiny_config(tiny_crosstask, tmp_path_factory) -> Path:
    """configs/baselines/pdpp_crosstask_t3.py at tiny sizes (a child config file): 512-d
    observations, U-Net dim 32, 20 diffusion steps, 2 epochs of 3 steps of batch 32."""
    body = ("model = dict(feature_dim=512, num_tasks=3, dim=32, n_timesteps=20)\n"
            "train_cfg = dict(max_epochs=2, val_interval=2)\n"
            "default_hooks = dict(checkpoint=dict(interval=2, save_best=None),\n"
            "                     logger=dict(interval=50))\n")
    return write_tiny_config(tmp_path_factory.mktemp('pdpp') / 'tiny_pdpp.py', CONFIG,
                             body, tiny_crosstask, batch_size=32, steps_per_epoch=3)


@pytest.mark.usefixtures('single_thread')
def test_a_restart_reusing_the_saved_classifier_trains_the_same_u_net(tiny_config, tmp_path):
    """Training the classifier draws random numbers, reusing its file draws none: the
    classifier runs on its own seeded streams (as train_mlp.py, a process of its own), so a
    restart of the run that reuses it trains the U-Net from the same streams, bit for bit."""
    trained, reused = trained_and_reused_pre_stage(tiny_config, tmp_path, 'task_classifier.pth',
                                                   'epoch_2.pth')
    assert len(trained['state_dict']) > 100
    assert differing_tensors(trained, reused) == []


def head_state(module):
    return {k: v.clone() for k, v in module.task_head.state_dict().items()}


def test_train_py_runs_both_stages_then_test_py(tiny_config, tmp_path):
    config = tiny_config
    load_tool('train').main([str(config), '--work-dir', str(tmp_path / 'run')])
    log = next((tmp_path / 'run').glob('*/*.log')).read_text()
    assert 'trained diffusion.task_head for 6 steps' in log  # as many as the diffusion's
    assert re.search(r'TaskClassifierHook: diffusion.task_head: 1/6 steps \(17%\), 0:00:\d\d '
                     r'elapsed, ETA 0:00:\d\d, loss \d', log)  # progress (issue 38)
    # which weights the EMA (validated, saved, tested) holds: the copy after step 1 of 6
    assert ('PDPPEMAHook: 6 training steps, ending before step 401 where the EMA starts '
            'averaging: the EMA weights (what validation scores, every checkpoint stores as its '
            'state_dict and tools/test.py tests) are the model after step 1 of 6') in log
    assert (tmp_path / 'run/task_classifier.pth').is_file()
    lrs = [float(v) for v in re.findall(r'Epoch\(train\) +\[\d\]\[3/3\] +lr: (\S+)', log)]
    assert np.allclose(lrs, [5e-4 * diffusion.pdpp_lr_multiplier(s, 6) for s in (2, 5)])
    checkpoint = str(tmp_path / 'run/epoch_2.pth')
    metrics = load_tool('test').main([str(config), checkpoint, '--work-dir',
                                      str(tmp_path / 'test')])
    assert 0 <= metrics['plan/mean_accuracy'] <= 100  # the classifier came with the checkpoint


class HookRunner:
    """What ``TaskClassifierHook.before_train`` reads of a runner when nothing is trained."""

    def __init__(self, model, work_dir, seed=0):
        from torch.utils.data import DataLoader
        self.model, self.work_dir, self.seed = model, str(work_dir), seed
        self.train_dataloader, self.max_iters = DataLoader(list(range(8)), batch_size=4), 6


def save_classifier(path, module, runner, hook, **changed):
    """``task_classifier.pth`` as the hook writes it (its identity and settings)."""
    from vpn_plugin.engine.pdpp_training import classifier_identity
    identity = classifier_identity(runner.train_dataloader.dataset, {'diffusion': module})
    torch.save(dict(identity=identity, settings={**hook.plan(runner), **changed},
                    state_dicts={'diffusion.task_head': module.task_head.state_dict()}), path)


def test_the_classifier_is_reused_never_retrained_silently(tmp_path):
    hook = TaskClassifierHook()
    saved = toy_diffusion()
    save_classifier(tmp_path / 'task_classifier.pth', saved, HookRunner(saved, tmp_path), hook)
    model = MODELS.build(dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=2, horizon=3,
                              dim=32, n_timesteps=20))
    hook.before_train(HookRunner(model, tmp_path))  # a restart of the run: the file
    assert all(torch.equal(v, head_state(model.diffusion)[k])
               for k, v in head_state(saved).items())
    assert bool(model.diffusion.classifier_ready)
    hook.before_train(HookRunner(model, tmp_path / 'elsewhere'))  # a resumed checkpoint
    assert not (tmp_path / 'elsewhere').exists()  # nothing trained, nothing written
    other = MODELS.build(dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=2, horizon=3,
                              dim=32, n_timesteps=20))
    with pytest.raises(ValueError, match=r'task_classifier.pth: a task classifier trained for '
                       r'list \(seed=0\), but this run is list \(seed=1\); it is never reused '
                       r'.*or delete it to retrain'):
        hook.before_train(HookRunner(other, tmp_path, seed=1))
    torch.save(dict(state_dicts={'diffusion.task_head': saved.task_head.state_dict()}),
               tmp_path / 'task_classifier.pth')  # written before files recorded their run
    with pytest.raises(ValueError, match=r'trained for \? \(actions_sha1=not recorded'):
        hook.before_train(HookRunner(other, tmp_path))
    five_tasks = MODELS.build(dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=5,
                                   horizon=3, dim=32, n_timesteps=20))
    save_classifier(tmp_path / 'task_classifier.pth', saved, HookRunner(saved, tmp_path), hook)
    with pytest.raises(ValueError, match=r'num_tasks=2\), but this run is list \(num_tasks=5'):
        hook.before_train(HookRunner(five_tasks, tmp_path))


class OfficialHead(torch.nn.Module):
    """train_mlp.py's ``head`` as its __init__ draws it (an independent replica: four Linear
    layers built, then Kaiming-normal weights and zero biases layer by layer)."""

    def __init__(self, input_dim, output_dim):
        super().__init__()
        middle, wide = input_dim // 3, input_dim * 4
        self.fc1, self.fc2 = torch.nn.Linear(input_dim, middle), torch.nn.Linear(middle, wide)
        self.fc3, self.fc4 = torch.nn.Linear(wide, middle), torch.nn.Linear(middle, output_dim)
        for layer in (self.fc1, self.fc2, self.fc3, self.fc4):
            torch.nn.init.kaiming_normal_(layer.weight, mode='fan_in')
            torch.nn.init.constant_(layer.bias, 0.0)


@pytest.mark.parametrize('seed', [0, 5])
def test_the_classifier_starts_from_train_mlp_s_draw_of_the_seed(seed, tmp_path, monkeypatch):
    """train_mlp.py seeds torch and builds the head first; our model builds the U-Net first,
    so the hook redraws the head as train_mlp.py does (the same seed, the same weights as the
    official run) and leaves the global torch stream where it was."""
    from vpn_plugin.engine import pdpp_training
    started = {}

    def record_start(module, *args, **kwargs):
        started.update(head_state(module))
        return dict(step=6, val_accuracy=None, train_loss=0.5)
    monkeypatch.setattr(pdpp_training, 'train_classifier', record_start)
    torch.manual_seed(seed)  # as the runner seeds before building the model
    model = MODELS.build(dict(type='PDPP', feature_dim=12, num_actions=6, num_tasks=3,
                              horizon=3, dim=32, n_timesteps=20))
    built = head_state(model.diffusion)
    stream = torch.get_rng_state()
    TaskClassifierHook().before_train(HookRunner(model, tmp_path, seed=seed))
    assert torch.equal(torch.get_rng_state(), stream)
    torch.manual_seed(seed)
    official = OfficialHead(12, 3).state_dict()
    assert set(started) == set(official)
    assert all(torch.equal(started[k], official[k]) for k in official)
    assert not torch.equal(built['fc2.weight'], official['fc2.weight'])  # the U-Net drew first

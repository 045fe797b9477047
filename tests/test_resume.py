"""Bit-exact resume (a real kill -9 of a training) and tools/train.py's --resume/--overwrite
rules (issue 13, item 2)."""
import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from vpn_plugin.data_paths import load_config

import vpn_plugin
from vpn_plugin.engine import get_rng_states, set_rng_states
from tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
EPOCHS, KILL_AFTER = 3, 1


def subprocess_env():
    env = dict(os.environ, OMP_NUM_THREADS='1')
    env['PYTHONPATH'] = os.pathsep.join([str(TESTS), str(ROOT), env.get('PYTHONPATH', '')])
    return env


@pytest.fixture(scope='module')
def dropout_config(tiny_crosstask, tmp_path_factory):
    """A tiny ViterbiPlanNet training with dropout, validated and checkpointed every epoch."""
    folder = tmp_path_factory.mktemp('resume_cfg')
    cfg = load_config(str(ROOT / 'configs/synthetic/vpn_crosstask_t3_synthetic.py'))
    for split in ('train', 'val', 'test'):
        cfg[f'{split}_dataloader'].batch_size = 64
        cfg[f'{split}_dataloader'].dataset = dict(copy.deepcopy(
            tiny_crosstask[f'{split}_dataset']), device_resident=True)  # the configs' batches
    # no state loss: no text features to load in each process (seconds saved)
    cfg.model.update(dropout=0.3, embed_dim=32, text_embeddings=None)
    cfg.model.loss_weights.state = 0.0
    cfg.train_cfg.update(max_epochs=EPOCHS, val_interval=1)
    cfg.default_hooks.checkpoint.update(interval=1, max_keep_ckpts=EPOCHS)
    cfg.default_hooks.logger.interval = 50
    cfg.randomness = dict(seed=0, diff_rank_seed=False, deterministic=False)
    plain = folder / 'plain.py'
    cfg.dump(str(plain))
    cfg.custom_imports.imports.append('resume_pause_hook')
    cfg.custom_hooks.append(dict(type='PauseAfterEpochHook', epoch=KILL_AFTER,
                                 marker=str(folder / 'paused')))
    pausing = folder / 'pausing.py'
    cfg.dump(str(pausing))
    return plain, pausing, folder / 'paused'


def train_command(config, work_dir, *extra):
    return [sys.executable, 'tools/train.py', str(config), '--work-dir', str(work_dir), *extra]


def wait_for(path: Path, process, timeout=240):
    start = time.time()
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f'training exited ({process.returncode}) before {path}: '
                                 f'{process.stderr.read()[-3000:]}')
        if time.time() - start > timeout:
            raise AssertionError(f'{path} did not appear in {timeout}s')
        time.sleep(0.05)


def checkpoint(path: Path) -> dict:
    with torch.serialization.safe_globals(vpn_plugin.compat.mmengine_checkpoint_globals()):
        return torch.load(path, map_location='cpu', weights_only=True)


def weights(path: Path) -> dict:
    return checkpoint(path)['state_dict']


def last_val_metrics(work_dir: Path) -> dict:
    """The validation metrics of the final epoch, from the newest run's scalars.json."""
    logs = sorted(work_dir.glob('*/vis_data/scalars.json'), key=lambda p: p.parent.parent.name)
    rows = [json.loads(line) for line in logs[-1].read_text().splitlines()]
    return [r for r in rows if any(k.endswith('success_rate') for k in r)][-1]


def test_kill_9_then_resume_is_bit_identical(dropout_config, tmp_path):
    plain, pausing, marker = dropout_config
    env = subprocess_env()
    full = subprocess.Popen(train_command(plain, tmp_path / 'full'), cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    killed = subprocess.Popen(train_command(pausing, tmp_path / 'killed'), cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(marker, killed)
        os.kill(killed.pid, signal.SIGKILL)
        assert killed.wait(60) == -signal.SIGKILL
    finally:
        killed.kill()
    assert not (tmp_path / 'killed' / f'epoch_{KILL_AFTER + 1}.pth').exists()
    resumed = subprocess.run(train_command(plain, tmp_path / 'killed', '--resume'), cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f'resumed epoch: {KILL_AFTER}' in resumed.stdout + resumed.stderr
    assert full.wait(240) == 0, full.stderr.read()[-3000:]
    final = f'epoch_{EPOCHS}.pth'
    uninterrupted, after_kill = weights(tmp_path / 'full' / final), weights(
        tmp_path / 'killed' / final)
    assert uninterrupted.keys() == after_kill.keys()
    for name in uninterrupted:
        assert torch.equal(uninterrupted[name], after_kill[name]), name
    full_metrics = last_val_metrics(tmp_path / 'full')
    resumed_metrics = last_val_metrics(tmp_path / 'killed')
    assert full_metrics["step"] == resumed_metrics["step"] == EPOCHS
    assert {k: v for k, v in full_metrics.items() if '/' in k} == \
        {k: v for k, v in resumed_metrics.items() if '/' in k}


def test_rng_states_round_trip_through_a_checkpoint(tmp_path):
    import random

    import numpy as np
    states = get_rng_states()
    expected = (random.random(), np.random.rand(), torch.rand(3))
    path = tmp_path / 'states.pth'
    torch.save({'rng_states': states}, path)
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    with torch.serialization.safe_globals(vpn_plugin.compat.mmengine_checkpoint_globals()):
        set_rng_states(torch.load(path, weights_only=True)['rng_states'])
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert again[:2] == expected[:2] and torch.equal(again[2], expected[2])


# --------------------------------------------------------------- --resume / --overwrite rules
@pytest.fixture
def train_tool(monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '0')
    return load_tool('train')


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / 'cfg.py'
    path.write_text("work_dir = 'unused'\ntrain_cfg = dict(max_epochs=1)\n")
    return str(path)


def with_checkpoint(work_dir: Path) -> Path:
    work_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = work_dir / 'epoch_3.pth'
    checkpoint.write_bytes(b'')
    (work_dir / 'last_checkpoint').write_text(str(checkpoint))
    return checkpoint


def configure(tool, config, work_dir, *flags):
    return tool.load_config(tool.parse_args([config, '--work-dir', str(work_dir), *flags]))


def test_resume_without_a_checkpoint_is_an_error_unless_auto(train_tool, config_file, tmp_path):
    with pytest.raises(SystemExit, match=r'--resume: the work dir .*empty holds no checkpoint'):
        configure(train_tool, config_file, tmp_path / 'empty', '--resume')
    fresh = configure(train_tool, config_file, tmp_path / 'empty', '--resume', 'auto')
    assert not fresh.resume and fresh.get('load_from') is None
    with pytest.raises(SystemExit, match='--resume .*missing.pth: no such checkpoint file'):
        configure(train_tool, config_file, tmp_path, '--resume', str(tmp_path / 'missing.pth'))
    checkpoint = with_checkpoint(tmp_path / 'work')
    for flags in (['--resume'], ['--resume', 'auto'], ['--resume', str(checkpoint)]):
        cfg = configure(train_tool, config_file, tmp_path / 'work', *flags)
        assert cfg.resume and cfg.load_from == str(checkpoint), flags


def test_work_dir_with_another_runs_checkpoints_needs_resume_or_overwrite(
        train_tool, config_file, tmp_path):
    checkpoint = with_checkpoint(tmp_path / 'work')
    best = tmp_path / 'work' / 'best_success_rate_epoch_2.pth'
    best.write_bytes(b'')
    with pytest.raises(SystemExit, match=r'already holds checkpoints of another run '
                                         r'\(best_success_rate_epoch_2.pth, epoch_3.pth, '
                                         r'last_checkpoint\); continue it with --resume'):
        configure(train_tool, config_file, tmp_path / 'work')
    assert checkpoint.exists() and best.exists()
    cfg = configure(train_tool, config_file, tmp_path / 'work', '--overwrite')
    assert not cfg.get('resume') and not list((tmp_path / 'work').iterdir())


def toy_runner(work_dir, **changes):
    """The toy model of tests/toy_plugin.py with the project's runtime (RNGStateHook on)."""
    from mmengine.runner import Runner
    import toy_plugin  # noqa: F401  (registers the toy dataset, model and metric)
    loader = dict(batch_size=8, num_workers=0, collate_fn=dict(type='default_collate'),
                  sampler=dict(type='DefaultSampler', shuffle=True),
                  dataset=dict(type='ToyCompatDataset', num_samples=32))
    cfg = load_config(str(ROOT / 'configs/_base_/default_runtime.py'))
    cfg.merge_from_dict(dict(
        work_dir=str(work_dir), model=dict(type='ToyCompatModel', dim=4),
        train_dataloader=loader, train_cfg=dict(type='EpochBasedTrainLoop', max_epochs=2),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)), log_level='WARNING'))
    cfg.merge_from_dict(changes)
    return Runner.from_cfg(cfg)


def test_mid_epoch_checkpoint_is_refused_for_resuming(tmp_path):
    """4 batches per epoch, a checkpoint every 3 iterations: iter_3.pth is mid-epoch."""
    toy_runner(tmp_path, **{'default_hooks.checkpoint': dict(
        type='CheckpointHook', interval=3, by_epoch=False)}).train()
    assert checkpoint(tmp_path / 'iter_3.pth')['rng_states']['batches_in_epoch'] == 3
    assert checkpoint(tmp_path / 'iter_6.pth')['rng_states']['batches_in_epoch'] == 2
    resumed = toy_runner(tmp_path / 'again', resume=True, load_from=str(tmp_path / 'iter_3.pth'))
    with pytest.raises(RuntimeError, match=r'saved after batch 3 of epoch 0: the epoch loop '
                                           r'would restart that epoch.*epoch-end checkpoint'):
        resumed.train()

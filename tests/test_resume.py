"""Bit-exact resume (a real kill -9 of a training) and tools/train.py's --resume/--overwrite
rules (issue 13, item 2)."""
import copy
import json
import multiprocessing
import os
import signal
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
    return [str(config), '--work-dir', str(work_dir), *extra]


def train_in_child(argv, log: Path) -> None:
    """tools/train.py's main(argv) in this (forked) process, its output into ``log``."""
    output = open(log, 'w', buffering=1)
    os.dup2(output.fileno(), 1)
    os.dup2(output.fileno(), 2)
    sys.stdout = sys.stderr = output
    torch.set_num_threads(1)
    load_tool('train').main(argv)


def start_training(argv, log: Path):
    """A training in a forked child of this process (warm: no interpreter start with torch and
    OpenMMLab, ~5 s CPU each); its exit code: a SystemExit message is exit code 1."""
    child = multiprocessing.get_context('fork').Process(target=train_in_child,
                                                         args=(argv, log))
    child.start()
    return child


def finished(child, log: Path, timeout=240) -> int:
    child.join(timeout)
    if child.exitcode is None:
        child.kill()
        raise AssertionError(f'training did not end in {timeout} s: {log.read_text()[-3000:]}')
    return child.exitcode


def wait_for(path: Path, child, log: Path, timeout=240):
    start = time.time()
    while not path.exists():
        if not child.is_alive():
            raise AssertionError(f'training exited ({child.exitcode}) before {path}: '
                                 f'{log.read_text()[-3000:]}')
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


def test_kill_9_then_resume_is_bit_identical(dropout_config, tmp_path, monkeypatch):
    """tools/train.py's main in forked children of this process: the uninterrupted run, one
    killed with SIGKILL after epoch KILL_AFTER, then its resume (tools/train.py as a command:
    tests/test_compat.py, test_train.py, ...)."""
    plain, pausing, marker = dropout_config
    monkeypatch.setenv('LOCAL_RANK', '0')  # as parse_args sets it in a process of its own
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    logs = {name: tmp_path / f'{name}.log' for name in ('full', 'killed', 'resumed')}
    full = start_training(train_command(plain, tmp_path / 'full'), logs['full'])
    killed = start_training(train_command(pausing, tmp_path / 'killed'), logs['killed'])
    try:
        wait_for(marker, killed, logs['killed'])
        os.kill(killed.pid, signal.SIGKILL)
        killed.join(60)
        assert killed.exitcode == -signal.SIGKILL
    finally:
        killed.kill()
    assert not (tmp_path / 'killed' / f'epoch_{KILL_AFTER + 1}.pth').exists()
    resumed = start_training(train_command(plain, tmp_path / 'killed', '--resume'),
                             logs['resumed'])
    assert finished(resumed, logs['resumed']) == 0, logs['resumed'].read_text()[-3000:]
    assert f'resumed epoch: {KILL_AFTER}' in logs['resumed'].read_text()
    assert finished(full, logs['full']) == 0, logs['full'].read_text()[-3000:]
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
    with pytest.raises(FileNotFoundError, match='--resume .*missing.pth: no such checkpoint file'):
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
    from vpn_plugin.runner import unique_experiment_name
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
    cfg.experiment_name = unique_experiment_name(cfg)  # runners built in one second share none
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


# ------------------------------------- issue 33, item 1: a run stays inside its own work dir
class CallCount:
    """``toy/calls``: 1, 2, 3, ... per evaluation in this process: every validation is a new
    best, so CheckpointHook replaces (deletes) the previous best each epoch."""
    calls = 0


def register_call_count_metric():
    from mmengine.evaluator import BaseMetric
    from mmaction.registry import METRICS

    class CallCountMetric(BaseMetric):
        default_prefix = 'toy'

        def process(self, data_batch, data_samples):
            self.results.extend(data_samples)

        def compute_metrics(self, results):
            CallCount.calls += 1
            return dict(calls=float(CallCount.calls))

    METRICS.register_module(module=CallCountMetric, force=True)


def best_tracking_config(tmp_path) -> Path:
    """The toy model, validated every epoch, keeping the best checkpoint of ``toy/calls``."""
    register_call_count_metric()
    loader = ("dict(batch_size=8, num_workers=0, collate_fn=dict(type='default_collate'), "
              "sampler=dict(type='DefaultSampler', shuffle={}), "
              "dataset=dict(type='ToyCompatDataset', num_samples=16))")
    config = tmp_path / 'toy_best.py'
    config.write_text(
        f"_base_ = [{str(ROOT / 'configs/_base_/default_runtime.py')!r}]\n"
        "custom_imports = dict(imports=['vpn_plugin.mm', 'toy_plugin'], "
        "allow_failed_imports=False)\n"
        "model = dict(type='ToyCompatModel', dim=4)\n"
        f"train_dataloader = {loader.format(True)}\nval_dataloader = {loader.format(False)}\n"
        "val_evaluator = dict(type='CallCountMetric')\nval_cfg = dict(type='ValLoop')\n"
        "train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=2, val_interval=1)\n"
        "optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1))\n"
        "default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1, "
        "save_best='toy/calls', rule='greater'))\nlog_level = 'WARNING'\n"
        f"experiment_name = {tmp_path.name!r}\n")
    return config


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob('*')
            if p.is_file() and p.suffix == '.pth' or p.name == 'last_checkpoint'}


def test_resuming_a_copied_or_moved_work_dir_never_touches_the_original(tmp_path, monkeypatch):
    """Today: `cp -r A B; train.py --work-dir B --resume` loads A/epoch_2.pth (last_checkpoint
    holds an absolute path) and deletes A's best checkpoint; after `mv B C`, C ends with two
    best_*.pth."""
    import shutil
    monkeypatch.setenv('LOCAL_RANK', '0')
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    monkeypatch.syspath_prepend(str(TESTS))
    train = load_tool('train')
    config = best_tracking_config(tmp_path)
    first, copy_dir, moved = tmp_path / 'A', tmp_path / 'B', tmp_path / 'C'
    train.main([str(config), '--work-dir', str(first)])
    assert (first / 'last_checkpoint').read_text() == str(first / 'epoch_2.pth')
    assert [p.name for p in first.glob('best_*.pth')] == ['best_toy_calls_epoch_2.pth']
    shutil.copytree(first, copy_dir)
    (first / 'epoch_2.pth').write_bytes(b'not a checkpoint')  # reading it would fail
    before = snapshot(first)
    train.main([str(config), '--work-dir', str(copy_dir), '--resume',
                '--cfg-options', 'train_cfg.max_epochs=3'])
    assert snapshot(first) == before, 'the resumed copy touched the original work dir'
    assert (copy_dir / 'last_checkpoint').read_text() == str(copy_dir / 'epoch_3.pth')
    assert [p.name for p in copy_dir.glob('best_*.pth')] == ['best_toy_calls_epoch_3.pth']
    shutil.move(copy_dir, moved)
    train.main([str(config), '--work-dir', str(moved), '--resume',
                '--cfg-options', 'train_cfg.max_epochs=4'])
    assert [p.name for p in moved.glob('best_*.pth')] == ['best_toy_calls_epoch_4.pth']
    assert torch.load(moved / 'epoch_4.pth', weights_only=False)['meta']['epoch'] == 4
    # the Runner's own auto-resume (run_protocol, MMAction2's tools: resume=True, no load_from)
    from vpn_plugin.runner import build_runner
    cfg = load_config(str(config))
    cfg.merge_from_dict(dict(work_dir=str(moved), resume=True, load_from=None))
    cfg.train_cfg.max_epochs = 5
    (moved / 'last_checkpoint').write_text(str(first / 'epoch_4.pth'))  # as if copied from A
    build_runner(cfg).train()
    assert [p.name for p in moved.glob('best_*.pth')] == ['best_toy_calls_epoch_5.pth']
    assert snapshot(first) == before
    # a record outside the work dir with no file of that name inside: refused, both named
    (moved / 'last_checkpoint').write_text(str(first / 'epoch_9.pth'))
    with pytest.raises(ValueError, match=rf"^{moved}/last_checkpoint names '{first}/epoch_9.pth'"
                                         rf", outside the work dir {moved}, and the work dir "
                                         r"holds no epoch_9.pth"):
        build_runner(cfg).train()
    with pytest.raises(SystemExit, match=rf"^--resume: {moved}/last_checkpoint names "
                                         rf"'{first}/epoch_9.pth', outside the work dir {moved}"):
        train.main([str(config), '--work-dir', str(moved), '--resume'])
    with pytest.raises(SystemExit, match='--overwrite deletes the checkpoints of the work dir '
                                         'and --resume'):
        train.main([str(config), '--work-dir', str(moved), '--resume', '--overwrite'])
    assert (moved / 'epoch_4.pth').exists(), '--overwrite with --resume deleted checkpoints'

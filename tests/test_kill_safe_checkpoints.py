"""A kill at any instant leaves a resumable work dir, and the resumed run ends as the
uninterrupted one (issue 40, item 5: with mmengine's CheckpointHook, a job killed between the
deletion of epoch_14.pth and the write of epoch_15.pth could never resume).

Each training runs in a forked child that SIGKILLs itself at one file-system event
(tests/kill_switch.py: before and after every rename and deletion, halfway through every
checkpoint written); a second child resumes the work dir. Every event of the uninterrupted
run is tried."""
import multiprocessing
import signal
from pathlib import Path

import pytest
import torch

import kill_switch
import vpn_plugin
from vpn_plugin.data_paths import load_config

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def run_child(target, *args) -> int:
    """``target(*args)`` in a forked child; its exit code (-9: killed)."""
    process = multiprocessing.get_context('fork').Process(target=target, args=args)
    process.start()
    process.join(300)
    if process.exitcode is None:
        process.kill()
        raise AssertionError(f'{target.__name__}{args} did not end in 300 s')
    return process.exitcode


def load(path: Path) -> dict:
    with torch.serialization.safe_globals(vpn_plugin.compat.mmengine_checkpoint_globals()):
        return torch.load(path, map_location='cpu', weights_only=True)


# ------------------------------------------------------------------ the toy training
EPOCHS = 3


def toy_config(folder: Path) -> Path:
    """3 epochs of the toy model with dropout, validated every epoch (each a new best),
    a step LR, a checkpoint every epoch, one kept (mmengine's rotation at every save)."""
    loader = ("dict(batch_size=8, num_workers=0, collate_fn=dict(type='default_collate'), "
              "sampler=dict(type='DefaultSampler', shuffle={}), "
              "dataset=dict(type='ToyCompatDataset', num_samples=24))")
    config = folder / 'toy_kill.py'
    config.write_text(
        f"_base_ = [{str(ROOT / 'configs/_base_/default_runtime.py')!r}]\n"
        "custom_imports = dict(imports=['vpn_plugin.mm', 'toy_plugin'], "
        "allow_failed_imports=False)\n"
        "model = dict(type='ToyDropoutModel', dim=4)\n"
        f"train_dataloader = {loader.format(True)}\nval_dataloader = {loader.format(False)}\n"
        "val_evaluator = dict(type='ToySeenMetric')\nval_cfg = dict(type='ValLoop')\n"
        f"train_cfg = dict(type='EpochBasedTrainLoop', max_epochs={EPOCHS}, val_interval=1)\n"
        "optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9))\n"
        # end given: the same schedule when a test stops the run early (max_epochs=2)
        f"param_scheduler = [dict(type='StepLR', step_size=1, gamma=0.5, end={EPOCHS})]\n"
        "default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1, "
        "max_keep_ckpts=1, save_best='toy/seen', rule='greater'), "
        "logger=dict(type='LoggerHook', interval=100))\n"
        "log_level = 'ERROR'\nresume = True\n")
    return config


def train_toy(config: Path, work_dir: Path, kill_at: int = 0, **options) -> int:
    """Train (resuming whatever ``work_dir`` holds; ``options``: config changes), killed at
    event ``kill_at`` (in a child process: :func:`run_child`); returns the number of events."""
    from vpn_plugin.runner import build_runner
    torch.set_num_threads(1)
    # the config is read before the switch: reading it makes and deletes temporary files (
    # mmengine's, the literal checks', cached per process after the first read), which are no
    # events of the training and would count in the first run only
    cfg = load_config(str(config))
    cfg.merge_from_dict(dict(options, work_dir=str(work_dir)))
    events = kill_switch.install(kill_at)
    try:
        build_runner(cfg).train()
    finally:
        events.uninstall()
    return events.count


def work_dir_state(work_dir: Path) -> dict:
    """What a finished work dir holds: its checkpoint file names, the name last_checkpoint
    records, and each checkpoint's tensors, epoch and optimizer state."""
    files = sorted(p.name for p in work_dir.iterdir()
                   if p.suffix == '.pth' or p.name.endswith('.partial'))
    record = Path((work_dir / 'last_checkpoint').read_text()).name
    contents = {}
    for name in files:
        checkpoint = load(work_dir / name)
        contents[name] = (checkpoint['state_dict'], checkpoint['meta']['epoch'],
                          checkpoint.get('optimizer', {}).get('state'))
    return dict(files=files, record=record, contents=contents)


def assert_same_state(found: dict, expected: dict, what: str) -> None:
    assert found['files'] == expected['files'], what
    assert found['record'] == expected['record'], what
    for name, (weights, epoch, optimizer) in expected['contents'].items():
        their_weights, their_epoch, their_optimizer = found['contents'][name]
        assert their_epoch == epoch, f'{what}: {name}'
        for key, tensor in weights.items():
            assert torch.equal(their_weights[key], tensor), f'{what}: {name} {key}'
        assert repr(their_optimizer) == repr(optimizer), f'{what}: {name} optimizer'


@pytest.fixture(scope='module')
def toy_reference(tmp_path_factory):
    """The uninterrupted toy training (in this process: the forked children start warm, in
    a fraction of a second): its config, final work dir state and number of events."""
    folder = tmp_path_factory.mktemp('toy_kill')
    config = toy_config(folder)
    events = train_toy(config, folder / 'full')
    state = work_dir_state(folder / 'full')
    assert state['files'] == ['best_toy_seen_epoch_3.pth', 'epoch_3.pth']
    return config, state, events


def test_a_kill_at_any_event_then_resuming_ends_as_the_uninterrupted_run(toy_reference,
                                                                        tmp_path):
    """Killed at each event of the uninterrupted run, the resumed training ends with the
    uninterrupted run's checkpoints: same files, same record, same tensors and optimizer."""
    config, expected, events = toy_reference
    assert events >= 30  # 3 epochs x (2 checkpoints x 3 events + record 2 + deletions)
    for kill_at in range(1, events + 1):
        work_dir = tmp_path / f'kill{kill_at}'
        assert run_child(train_toy, config, work_dir, kill_at) == -signal.SIGKILL
        assert run_child(train_toy, config, work_dir) == 0, f'resume after event {kill_at}'
        assert_same_state(work_dir_state(work_dir), expected, f'killed at event {kill_at}')


@pytest.mark.parametrize('older', [True, False], ids=['older-checkpoint', 'none-left'])
def test_a_work_dir_left_by_the_old_rotation_resumes(toy_reference, tmp_path, capfd, older):
    """The state of the issue: last_checkpoint names epoch_3.pth, which the old rotation
    deleted, beside a dead writer's .epoch_3.pth.<pid>.partial. With an older checkpoint
    (max_keep_ckpts=2) the run resumes from it; with none (max_keep_ckpts=1) it starts
    afresh; both say so, remove the partial file and end as the uninterrupted run."""
    config, expected, _ = toy_reference
    work_dir = tmp_path / 'old'
    train_toy(config, work_dir, **{'train_cfg.max_epochs': 2})
    if not older:
        (work_dir / 'epoch_2.pth').unlink()
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'epoch_3.pth'))
    partial = work_dir / '.epoch_3.pth.4242.partial'
    partial.write_bytes(b'half a checkpoint')
    capfd.readouterr()
    train_toy(config, work_dir, log_level='WARNING')
    log = capfd.readouterr()
    log = log.out + log.err
    assert f'{work_dir}: removed 1 partial file(s) of a killed run: {partial.name}' in log
    assert f'last_checkpoint names {work_dir}/epoch_3.pth, which does not exist' in log
    if older:
        assert (f'resuming from the newest complete checkpoint of the work dir, '
                f'{work_dir}/epoch_2.pth') in log
    else:
        assert 'the work dir holds no complete checkpoint: a fresh start' in log
    assert_same_state(work_dir_state(work_dir), expected, 'old rotation')


def test_the_newest_complete_checkpoint_is_by_number(tmp_path):
    from vpn_plugin.engine.checkpoint import latest_checkpoint_in, newest_checkpoint_in
    assert newest_checkpoint_in(tmp_path) is None and latest_checkpoint_in(tmp_path) is None
    for name in ('epoch_9.pth', 'epoch_10.pth', 'iter_99.pth', 'best_acc_epoch_12.pth',
                 '.epoch_11.pth.7.partial'):
        (tmp_path / name).write_bytes(b'')
    assert newest_checkpoint_in(tmp_path) == str(tmp_path / 'epoch_10.pth')
    (tmp_path / 'last_checkpoint').write_text('')  # killed while mmengine wrote it in place
    assert latest_checkpoint_in(tmp_path) == str(tmp_path / 'epoch_10.pth')
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'epoch_9.pth'))
    assert latest_checkpoint_in(tmp_path) == str(tmp_path / 'epoch_9.pth')  # the record wins

"""MMAction2 habits: train.py flags, PlanningRunner's log, tools/dist_test.sh.

Uses the toy dataset/model/config of tests/test_compat.py (tests/toy_plugin.py).
"""
import json
import subprocess
import sys

import pytest
import torch

from test_compat import (REPO_ROOT, assert_ok, free_port, load_tool,
                         subprocess_env, toy_config)  # noqa: F401  (toy_config is a fixture)
from tool_modules import run_logs
from vpn_plugin.runner import cpu_backend


def train_config(toy_config, *flags):
    train = load_tool('train')
    return train.load_config(train.parse_args([str(toy_config), *flags]))


def test_no_validate_drops_validation_and_best_checkpoint(toy_config, monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '0')
    plain = train_config(toy_config, '--cfg-options',
                         'default_hooks.checkpoint.save_best=toy/accuracy')
    assert plain.val_dataloader is not None and plain.default_hooks.checkpoint.save_best
    cfg = train_config(toy_config, '--no-validate')
    assert cfg.val_cfg is None and cfg.val_dataloader is None and cfg.val_evaluator is None
    assert 'save_best' not in cfg.default_hooks.checkpoint
    with pytest.raises(ValueError, match='--no-validate drops the validation loop and '
                                        '--cfg-options default_hooks.checkpoint.save_best'):
        train_config(toy_config, '--no-validate', '--cfg-options',
                     'default_hooks.checkpoint.save_best=toy/accuracy')  # contradictory


def test_auto_scale_lr_and_diff_rank_seed(toy_config, monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '0')
    with pytest.raises(SystemExit, match='auto_scale_lr.base_batch_size'):
        train_config(toy_config, '--auto-scale-lr')
    cfg = train_config(toy_config, '--auto-scale-lr', '--diff-rank-seed', '--cfg-options',
                       'auto_scale_lr.base_batch_size=16')
    assert cfg.auto_scale_lr == dict(base_batch_size=16, enable=True)
    assert cfg.randomness.diff_rank_seed
    assert not train_config(toy_config).randomness.diff_rank_seed


def test_cpu_backend_only_replaces_nccl_without_gpu():
    env = dict(cudnn_benchmark=False, dist_cfg=dict(backend='nccl', timeout=60))
    assert cpu_backend(env, has_accelerator=False)['dist_cfg'] == dict(backend='gloo', timeout=60)
    assert cpu_backend(env, has_accelerator=True) == env
    assert cpu_backend(dict(dist_cfg=dict(backend='mpi')), False)['dist_cfg']['backend'] == 'mpi'
    assert env['dist_cfg']['backend'] == 'nccl'  # the input is not changed


# the training log (backend named, config written not printed, no warning of ours): checked on
# the toy training of tests/test_compat.py::test_train_resume_and_test_with_weights_only


def toy_checkpoint(path):
    """A toy model with fixed weights saved as a checkpoint; returns its test accuracy (%)."""
    from toy_plugin import ToyCompatDataset, ToyCompatModel
    torch.manual_seed(3)
    model = ToyCompatModel(dim=4)
    torch.save({'state_dict': model.state_dict()}, path)
    test_set = ToyCompatDataset(num_samples=16, seed=1)  # TOY_CONFIG's test_dataloader
    with torch.no_grad():
        predicted = model.linear(test_set.points).argmax(-1)
    return 100.0 * float((predicted == test_set.labels).float().mean())


@pytest.mark.skipif(torch.cuda.is_available(), reason='two CPU processes (gloo)')
def test_dist_test_two_processes_score_every_sample_once(toy_config, tmp_path):
    checkpoint = tmp_path / 'toy.pth'
    expected = toy_checkpoint(checkpoint)
    assert 0 < expected < 100  # a chance-level toy model: a dropped or doubled sample shows
    metrics = tmp_path / 'metrics.json'
    env = {**subprocess_env(), 'PORT': str(free_port()), 'PYTHON': sys.executable,
           'CUDA_VISIBLE_DEVICES': ''}
    result = subprocess.run(
        ['bash', str(REPO_ROOT / 'tools' / 'dist_test.sh'), str(toy_config), str(checkpoint),
         '2', '--work-dir', str(tmp_path / 'work'), '--out-metrics', str(metrics)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)  # .dist_test/ there
    assert_ok(result)
    log = run_logs(tmp_path / 'work')
    assert 'Distributed training: True' in log and "'backend': 'gloo'" in log
    assert json.loads(metrics.read_text()) == {'toy/accuracy': pytest.approx(expected)}


def test_test_py_writes_its_metrics_beside_the_checkpoint(toy_config, tmp_path, monkeypatch):
    """Issue 38: without --work-dir, test.py wrote work_dirs/<config name>/<timestamp>/
    test_metrics.json (another, maybe killed, run's folder); now beside the checkpoint."""
    monkeypatch.setenv('LOCAL_RANK', '0')
    monkeypatch.chdir(tmp_path)
    run = tmp_path / 'my_run'
    run.mkdir()
    toy_checkpoint(run / 'epoch_1.pth')
    load_tool('test').main([str(toy_config), str(run / 'epoch_1.pth')])
    assert len(list(run.glob('*/test_metrics.json'))) == 1
    assert not (tmp_path / 'work_dirs').exists()
    tool = load_tool('test')  # a read-only folder (root writes anywhere: os.access says no)
    monkeypatch.setattr(tool.os, 'access', lambda path, mode: path != str(run))
    with pytest.raises(SystemExit, match='beside the checkpoint, in .*my_run, which is not '
                       'writable; give --work-dir DIR'):
        tool.main([str(toy_config), str(run / 'epoch_1.pth')])


def test_a_test_never_rewrites_the_training_record(toy_config, tmp_path, monkeypatch):
    """Issue 34: tools/test.py in a training's work dir writes its config to its own
    timestamped log dir; the training's config file stays as the training wrote it."""
    monkeypatch.setenv('LOCAL_RANK', '0')
    work_dir = tmp_path / 'work'
    work_dir.mkdir()
    record = work_dir / 'toy_config.py'
    record.write_text('# the training run\'s config\nmax_epochs = 20\n')
    checkpoint = tmp_path / 'toy.pth'
    expected = toy_checkpoint(checkpoint)
    metrics = load_tool('test').main([str(toy_config), str(checkpoint), '--work-dir',
                                      str(work_dir)])
    assert metrics == {'toy/accuracy': pytest.approx(expected)}
    assert record.read_text() == '# the training run\'s config\nmax_epochs = 20\n'
    written = list(work_dir.glob('*/toy_config.py'))
    assert len(written) == 1 and written[0].parent.name[:8].isdigit()  # <timestamp>/
    assert str(checkpoint) in written[0].read_text()  # the test's own config (load_from)
    assert (written[0].parent / 'test_metrics.json').is_file()


def test_a_work_dir_with_only_pre_stage_files_starts_and_names_them(toy_config, tmp_path,
                                                                     monkeypatch):
    """Issue 38: kepp_step_model.pth / task_classifier.pth are no checkpoints of the run: a
    plain start in their work dir is allowed (the hooks reuse them); with checkpoints beside
    them the refusal says they are kept and reused."""
    monkeypatch.setenv('LOCAL_RANK', '0')
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    (work_dir / 'kepp_step_model.pth').write_bytes(b'step model')
    (work_dir / 'task_classifier.pth').write_bytes(b'classifier')
    cfg = train_config(toy_config, '--work-dir', str(work_dir))
    assert not cfg.get('resume')
    assert (work_dir / 'kepp_step_model.pth').is_file()
    with pytest.raises(SystemExit, match=r'holds no checkpoint to resume from.*its finished '
                       r'pre-stages \(kepp_step_model.pth, task_classifier.pth\) are reused'):
        train_config(toy_config, '--work-dir', str(work_dir), '--resume')
    (work_dir / 'epoch_1.pth').write_bytes(b'checkpoint')
    with pytest.raises(SystemExit, match=r'checkpoints of another run \(epoch_1.pth\).*'
                       r'pre-stages \(kepp_step_model.pth, task_classifier.pth\) are reused'):
        train_config(toy_config, '--work-dir', str(work_dir))
    train_config(toy_config, '--work-dir', str(work_dir), '--overwrite')
    assert not (work_dir / 'epoch_1.pth').exists()
    assert (work_dir / 'kepp_step_model.pth').read_bytes() == b'step model'


def test_step_progress_lines_have_a_true_eta():
    from vpn_plugin.progress import StepProgress
    now, lines = [100.0], []
    progress = StepProgress('stage', 10, lines.append, interval=30, clock=lambda: now[0])
    now[0] = 102.0
    progress.update(extra='loss 1.0')  # the first step: 2 s per step, 9 left
    now[0] = 110.0
    progress.update()  # 8 s after the last line: none
    now[0] = 140.0
    progress.update(5, extra=lambda: 'computed')  # 7 done in 40 s, 3 left
    now[0] = 150.0
    progress.update(3)  # the last one
    assert lines == ['stage: 1/10 steps (10%), 0:00:02 elapsed, ETA 0:00:18, loss 1.0',
                     'stage: 7/10 steps (70%), 0:00:40 elapsed, ETA 0:00:17, computed',
                     'stage: 10/10 steps (100%), 0:00:50 elapsed, ETA 0:00:00']


def test_fewer_epochs_than_the_config_mark_the_run_shortened(toy_config, monkeypatch):
    """Issue 38: train.py --cfg-options train_cfg.max_epochs=1 (the toy config says 2) is a
    shortened run, as the protocol's --max-epochs: its checkpoints and tests say so."""
    monkeypatch.setenv('LOCAL_RANK', '0')
    assert train_config(toy_config, '--cfg-options', 'train_cfg.max_epochs=1').shortened == \
        'max_epochs=1 (config: 2)'
    assert train_config(toy_config, '--cfg-options', 'train_cfg.max_epochs=3').get(
        'shortened') is None
    assert train_config(toy_config).get('shortened') is None


def test_quickstart_reads_the_paths_a_user_gives_from_where_they_run_it(tmp_path, monkeypatch,
                                                                        shared_data):
    """Fourth hostile pass: quickstart.py changes to the repository first, so `--work-dir run`
    trained into <repo>/run, and `--features notes.txt` (a file here) generated features into
    <repo>/notes.txt/ and trained on them, exit 0."""
    from tool_modules import load_tool
    quickstart = load_tool('quickstart')
    monkeypatch.chdir(tmp_path)
    args = quickstart.parse_args(['--work-dir', 'run', '--features', 'f'])
    assert (args.work_dir, args.features) == (str(tmp_path / 'run'), str(tmp_path / 'f'))
    assert quickstart.parse_args([]).work_dir == 'work_dirs/quickstart'  # in the repository
    (tmp_path / 'notes.txt').write_text('mine')
    with pytest.raises(SystemExit, match='make_synthetic_features.py stopped'):
        quickstart.main(['--features', 'notes.txt', '--data-root', str(shared_data)])
    assert (tmp_path / 'notes.txt').read_text() == 'mine'

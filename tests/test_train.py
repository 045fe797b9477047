"""ViterbiPlanNet in the mmengine Runner on the tiny synthetic CrossTask subset."""
import copy
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (compat + registration)
from mmaction.registry import DATASETS, MODELS
from vpn_plugin.data_paths import load_config
from mmengine.runner import Runner
from vpn_plugin.core import planning_metrics
from vpn_plugin.models import DECODE_MODES
from vpn_plugin.apis import inference_planner
from vpn_plugin.models.plan_display import format_plan
from test_compat import free_port
from tool_modules import load_tool, run_logs
from vpn_plugin.runner import unique_experiment_name

ROOT = Path(__file__).resolve().parents[1]
BASE_CONFIG = ROOT / 'configs/synthetic/vpn_crosstask_t3_synthetic.py'
EPOCHS, BATCH = 15, 32  # ViterbiPlanNet at 15 epochs: SR 13.3 (untrained 1.9), mAcc 44.4 (13.0)
BASE_EPOCHS = 30  # the Base Model learns slower (at 15: first-step accuracy 14.3, untrained 4.8)
DIST_EPOCHS = 4


def metric(metrics: dict, key: str) -> float:
    """A PlanningMetric value whatever prefix the evaluator adds."""
    return next(v for k, v in metrics.items() if k.split('/')[-1] == key)


@pytest.fixture(scope='module', autouse=True)
def single_thread():
    """One intra-op thread: on a shared 2-core machine two threads run ~10x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope='module')
def tiny_cfg(tiny_crosstask, shared_data):
    """The synthetic-data config with the tiny datasets, small batch, no dropout.

    Observations are the 512-d mean of the 3 frames ('mean3'), not their 1536-d
    concatenation: the same network with a 9x cheaper visual encoder keeps these tests fast.
    """
    cfg = load_config(str(BASE_CONFIG))
    for split in ('train', 'val', 'test'):
        loader = cfg[f'{split}_dataloader']
        loader.batch_size = BATCH
        loader.dataset = dict(copy.deepcopy(tiny_crosstask[f'{split}_dataset']),
                              observation='mean3')
    cfg.model.text_embeddings.file = str(shared_data / 'crosstask/state_features_clip_133.npy')
    cfg.model.feature_dim = 512
    cfg.model.dropout = cfg.model.input_dropout = 0.0
    cfg.train_cfg.max_epochs = EPOCHS
    cfg.train_cfg.val_interval = EPOCHS
    cfg.default_hooks.logger.interval = 50
    cfg.randomness = dict(seed=0, diff_rank_seed=False, deterministic=False)
    return cfg


def make_runner(cfg, work_dir, **changes):
    cfg = copy.deepcopy(cfg)
    cfg.work_dir = str(work_dir)
    cfg.merge_from_dict(changes)
    cfg.experiment_name = unique_experiment_name(cfg)  # runners built in one second share none
    return Runner.from_cfg(cfg)


@pytest.fixture(scope='module')
def trained(tiny_cfg, tmp_path_factory):
    """(runner, test metrics) after EPOCHS epochs of training."""
    runner = make_runner(tiny_cfg, tmp_path_factory.mktemp('train'))
    runner.train()
    return runner, runner.test()


def untrained_metrics(cfg) -> dict:
    """Test metrics of a freshly initialised model that already has the training PKG."""
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    train_set = DATASETS.build(cfg.train_dataloader.dataset)
    test_set = DATASETS.build(cfg.test_dataloader.dataset)
    model.build_pkg(train_set)
    samples = inference_planner(model, test_set, list(range(len(test_set))))
    pred = np.stack([s.pred_plan.numpy() for s in samples])
    return planning_metrics(pred, test_set.plans)


def test_training_beats_chance_and_untrained_model(trained, tiny_cfg):
    runner, metrics = trained
    chance_sr = 100.0 / 6 ** 3  # one task known, 6 actions per step: far above real chance
    untrained = untrained_metrics(tiny_cfg)
    sr = metric(metrics, 'success_rate')
    print(f'tiny CrossTask T=3 after {EPOCHS} epochs: {metrics}; untrained: {untrained}')
    assert sr > 10 * chance_sr
    assert sr > 3 * untrained['success_rate'] + 2.0
    assert metric(metrics, 'mean_accuracy') > untrained['mean_accuracy'] + 20.0
    assert metric(metrics, 'miou_set') > untrained['miou_set'] + 20.0


def test_base_model_training_beats_untrained_model(tiny_cfg, tmp_path):
    """The Base Model (the authors' MSE, mean over B*T*N, on the sigmoid emissions; no DVL)
    learns to rank the true action first, although that loss keeps every emission small."""
    base_model = {'model.use_dvl': False, 'model.decode': 'emission_argmax'}
    runner = make_runner(tiny_cfg, tmp_path, **base_model, **{
        'train_cfg.max_epochs': BASE_EPOCHS, 'train_cfg.val_interval': BASE_EPOCHS})
    runner.train()
    metrics = runner.test()
    cfg = copy.deepcopy(tiny_cfg)
    cfg.merge_from_dict(base_model)
    untrained = untrained_metrics(cfg)
    dataset = runner.test_dataloader.dataset
    samples = inference_planner(runner.model, dataset, list(range(len(dataset))))
    emissions = torch.stack([s.emissions for s in samples])  # (M, T, N)
    truth = emissions.gather(-1, torch.as_tensor(dataset.plans)[..., None])
    print(f'Base Model, tiny CrossTask T=3 after {BASE_EPOCHS} epochs: {metrics}; '
          f'untrained: {untrained}; emission of the true action: {truth.mean():.3f}')
    assert truth.mean() > 2 * emissions.mean()
    # measured: mAcc 14.0 vs 1.9 untrained, first-step accuracy 19.0 vs 4.8
    assert metric(metrics, 'mean_accuracy') > untrained['mean_accuracy'] + 6.0
    assert metric(metrics, 'first_accuracy') > untrained['first_accuracy'] + 6.0


def test_every_decode_mode_runs_in_the_test_loop(trained):
    runner, _ = trained
    model = runner.model
    results = {}
    try:
        for mode in DECODE_MODES:
            model.decode = mode
            results[mode] = metric(runner.test(), 'success_rate')
    finally:
        model.decode = 'dvl_viterbi'
    assert all(0.0 <= v <= 100.0 for v in results.values())
    assert len(set(results.values())) > 1, f'all decode modes gave the same SR: {results}'


def test_plans_print_with_action_names(trained):
    runner, _ = trained
    dataset = runner.test_dataloader.dataset
    sample = inference_planner(runner.model, dataset, [0])[0]
    text = '\n'.join(format_plan(sample, dataset.taxonomy))
    truth = [dataset.taxonomy.action_names[a] for a in dataset.plans[0]]
    assert all(name in text for name in truth)
    assert dataset.taxonomy.task_names[int(dataset.tasks[0])] in text


def test_resume_then_test_from_checkpoint(tiny_cfg, tmp_path):
    work_dir = tmp_path / 'resume'
    first = make_runner(tiny_cfg, work_dir, **{'train_cfg.max_epochs': 2,
                                               'train_cfg.val_interval': 2})
    first.train()
    checkpoint = work_dir / 'epoch_2.pth'
    assert checkpoint.is_file()
    with torch.serialization.safe_globals(vpn_plugin.compat.mmengine_checkpoint_globals()):
        saved = torch.load(checkpoint, map_location='cpu', weights_only=True)
    assert saved['meta']['epoch'] == 2 and 'log_transitions' in saved['state_dict']
    resumed = make_runner(tiny_cfg, work_dir, **{'train_cfg.max_epochs': 3,
                                                 'train_cfg.val_interval': 3},
                          resume=True, load_from=str(checkpoint))
    resumed.train()
    assert resumed.epoch == 3 and (work_dir / 'epoch_3.pth').is_file()
    expected = resumed.test()
    tester = make_runner(tiny_cfg, tmp_path / 'test', load_from=str(work_dir / 'epoch_3.pth'))
    tested = tester.test()
    assert torch.equal(tester.model.log_transitions, resumed.model.log_transitions)
    assert metric(tested, 'success_rate') == pytest.approx(metric(expected, 'success_rate'))


def test_horizon_mismatch_between_data_and_model_is_a_clear_error(tiny_cfg, tmp_path):
    runner = make_runner(tiny_cfg, tmp_path, **{'model.horizon': 4})
    with pytest.raises(ValueError, match='horizon mismatch.*horizon=3.*model.horizon=4'):
        runner.train()


def test_cross_horizon_model_trained_longer_tests_on_shorter_windows(tiny_cfg, tmp_path):
    """Train at T=4, then test the checkpoint on T=3 windows with cross_horizon='repeat_last'."""
    long_cfg = copy.deepcopy(tiny_cfg)
    long_cfg.model.horizon = 4
    for split in ('train', 'val', 'test'):
        long_cfg[f'{split}_dataloader'].dataset.horizon = 4
    trainer = make_runner(long_cfg, tmp_path / 't4', **{'train_cfg.max_epochs': 2,
                                                       'train_cfg.val_interval': 2})
    trainer.train()
    tester = make_runner(long_cfg, tmp_path / 't3', load_from=str(tmp_path / 't4/epoch_2.pth'),
                         **{'model.cross_horizon': 'repeat_last',
                            'test_dataloader.dataset.horizon': 3})
    metrics = tester.test()
    assert tester.model.horizon == 4 and tester.test_dataloader.dataset.horizon == 3
    assert 0 <= metric(metrics, 'success_rate') <= 100
    samples = tester.model.test_step(next(iter(tester.test_dataloader)))
    assert samples[0].pred_plan.shape == (3,) and samples[0].emissions.shape[0] == 3


def _write_config(cfg, path: Path) -> str:
    cfg.dump(str(path))
    return str(path)


def _test_last_checkpoint(config: str, work_dir: Path) -> dict:
    """tools/test.py (in this process) on the last checkpoint of ``work_dir``."""
    out = work_dir / 'metrics.json'
    load_tool('test').main([config, str(work_dir / f'epoch_{DIST_EPOCHS}.pth'), '--work-dir',
                            str(work_dir / 'test'), '--out-metrics', str(out)])
    return json.loads(out.read_text())


def _dist_train(config: str, work_dir: Path, *cfg_options: str) -> str:
    """tools/dist_train.sh CONFIG 2 on CPU; its console output."""
    env = dict(os.environ, PORT=str(free_port()), PYTHON=sys.executable, CUDA_VISIBLE_DEVICES='',
               OMP_NUM_THREADS='1')
    result = subprocess.run(['bash', str(ROOT / 'tools' / 'dist_train.sh'), config, '2',
                             '--work-dir', str(work_dir), '--cfg-options', *cfg_options],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (f'stdout:\n{result.stdout[-3000:]}\n'
                                    f'stderr:\n{result.stderr[-8000:]}')
    return result.stdout + result.stderr


def _assert_clean_two_process_log(log: str, work_dir: Path, epochs: int, iters: int):
    """Two CPU ranks trained ``epochs`` epochs of ``iters`` iterations each; issue 34: one clean
    line per rank, no thread / broadcast_buffers warning per rank, no "GPU number: 2" on a CPU
    machine."""
    assert 'Distributed training: True' in run_logs(work_dir)  # the environment: log file only
    assert f'Epoch(train) [{epochs}][{iters}/{iters}]' in log
    assert f'Epoch(train) [{epochs}][{iters + 1}/' not in log
    assert _weights_epoch(work_dir / f'epoch_{epochs}.pth') == epochs
    assert sorted(line for line in log.splitlines() if line.startswith('rank ')) == [
        'rank 0/2: CPU, backend gloo, 1 thread(s)', 'rank 1/2: CPU, backend gloo, 1 thread(s)']
    for noise in ('Warning', 'MKL_NUM_THREADS', 'OMP_NUM_THREADS', 'broadcast_buffers'):
        assert noise not in log, noise
    assert 'GPU number: 0 (2 CPU processes)' in run_logs(work_dir)


def _weights_epoch(path: Path) -> int:
    with torch.serialization.safe_globals(vpn_plugin.compat.mmengine_checkpoint_globals()):
        return torch.load(path, map_location='cpu', weights_only=True)['meta']['epoch']


def _weights(path: Path) -> dict:
    with torch.serialization.safe_globals(vpn_plugin.compat.mmengine_checkpoint_globals()):
        return torch.load(path, map_location='cpu', weights_only=True)['state_dict']


def _max_difference(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a if a[k].is_floating_point()
               and torch.isfinite(a[k]).all())


def test_two_process_torchrun_matches_one_process(tiny_cfg, tmp_path):
    """tools/dist_train.sh on 2 CPU processes (the torchrun run of the suite): it trains to the
    end with a clean log (issue 34) and ends where one process ends."""
    cfg = copy.deepcopy(tiny_cfg)
    cfg.train_cfg.max_epochs = cfg.train_cfg.val_interval = DIST_EPOCHS
    cfg.default_hooks.checkpoint.interval = 1
    cfg.default_hooks.logger.interval = 1  # every iteration logged: their count shows
    cfg.train_dataloader.sampler.shuffle = False  # same global batches in both runs
    config = _write_config(cfg, tmp_path / 'config.py')
    # the one-process run and both tests run in this process (one intra-op thread, as the
    # torchrun workers): only the two-process training needs processes of its own
    load_tool('train').main([config, '--work-dir', str(tmp_path / 'one')])
    single = _test_last_checkpoint(config, tmp_path / 'one')
    log = _dist_train(config, tmp_path / 'two', f'train_dataloader.batch_size={BATCH // 2}')
    _assert_clean_two_process_log(log, tmp_path / 'two', DIST_EPOCHS,
                                  -(-len(DATASETS.build(cfg.train_dataloader.dataset)) // BATCH))
    double = _test_last_checkpoint(config, tmp_path / 'two')
    print(f'one process: {single}\ntwo processes: {double}')
    for key in ('success_rate', 'mean_accuracy', 'miou_set'):
        assert metric(double, key) == pytest.approx(metric(single, key), abs=1.0), key
    # the weights agree far more closely than one epoch of training moves them
    last = _weights(tmp_path / 'one' / f'epoch_{DIST_EPOCHS}.pth')
    previous = _weights(tmp_path / 'one' / f'epoch_{DIST_EPOCHS - 1}.pth')
    two = _weights(tmp_path / 'two' / f'epoch_{DIST_EPOCHS}.pth')
    one_epoch_change = _max_difference(last, previous)
    print(f'max weight gap 1 vs 2 processes: {_max_difference(last, two):.2e}; '
          f'last-epoch change: {one_epoch_change:.2e}')
    assert one_epoch_change > 1e-4
    assert _max_difference(last, two) < 0.05 * one_epoch_change


def test_test_tool_out_pickles_predictions_and_metrics_go_to_json(trained, tiny_cfg, tmp_path):
    """tools/test.py --out FILE.pkl: MMAction2's prediction dump; --out-metrics: the metrics."""
    runner, _ = trained
    config = _write_config(copy.deepcopy(tiny_cfg), tmp_path / 'config.py')
    checkpoint = str(Path(runner.work_dir) / f'epoch_{EPOCHS}.pth')
    predictions, metrics_file = tmp_path / 'preds.pkl', tmp_path / 'metrics.json'
    returned = load_tool('test').main([config, checkpoint, '--work-dir', str(tmp_path / 'w'),
                                       '--out', str(predictions),
                                       '--out-metrics', str(metrics_file)])
    written = json.loads(metrics_file.read_text())
    # mmengine's own Runner (Runner.from_cfg) trained it: its checkpoints record no feature
    # statistics or folder, and the metrics say what could not be compared
    assert [note.split(' (')[0] for note in written.pop('not_compared')] == [
        'feature scale', 'training feature files']
    assert (written.pop('horizon'), written.pop('train_horizon')) == (3, 3)
    # the annotations scored: the config's data root, as the test dataset read it
    assert Path(written.pop('data_root')).resolve() == Path(
        runner.test_dataloader.dataset.data_root).resolve()
    assert set(written) == {f'plan/{name}' for name in vpn_plugin.core.METRIC_NAMES}
    assert written == pytest.approx({k: float(v) for k, v in returned.items()})
    with open(predictions, 'rb') as file:
        samples = pickle.load(file)  # written by this test's own run
    dataset = runner.test_dataloader.dataset
    assert isinstance(samples, list) and len(samples) == len(dataset)
    samples = sorted(samples, key=lambda s: int(s['sample_idx']))
    gt = np.stack([np.asarray(s['gt_plan']) for s in samples])
    np.testing.assert_array_equal(gt, dataset.plans)
    recomputed = planning_metrics(np.stack([np.asarray(s['pred_plan']) for s in samples]), gt)
    for name, value in recomputed.items():
        assert written[f'plan/{name}'] == pytest.approx(value)
    with pytest.raises(SystemExit, match='expected a file name ending in .pkl'):
        load_tool('test').main([config, checkpoint, '--out', str(tmp_path / 'metrics.json')])


def test_plan_tool_prints_named_plans(trained, tiny_cfg, tmp_path, capsys):
    sys.path.insert(0, str(ROOT / 'tools'))
    try:
        import plan as plan_tool
    finally:
        sys.path.pop(0)
    runner, _ = trained
    config = _write_config(copy.deepcopy(tiny_cfg), tmp_path / 'config.py')
    checkpoint = Path(runner.work_dir) / f'epoch_{EPOCHS}.pth'
    plan_tool.main([config, str(checkpoint), '--indices', '0', '3'])
    printed = capsys.readouterr().out
    dataset = runner.test_dataloader.dataset
    assert 'sample 0 |' in printed and 'sample 3 |' in printed
    assert dataset.taxonomy.action_names[int(dataset.plans[3][-1])] in printed
    with pytest.raises(SystemExit, match='^error: sample index .* is out of range'):
        plan_tool.main([config, str(checkpoint), '--indices', str(len(dataset))])


def test_epoch_benchmark_reports_each_epoch_and_data_share(tiny_cfg, tmp_path, capsys):
    sys.path.insert(0, str(ROOT / 'tools'))
    try:
        import benchmark_epoch
    finally:
        sys.path.pop(0)
    config = _write_config(copy.deepcopy(tiny_cfg), tmp_path / 'config.py')
    rows, split = benchmark_epoch.main([config, '--epochs', '2', '--test'])
    batches = -(-len(DATASETS.build(tiny_cfg.train_dataloader.dataset)) // BATCH)
    assert [row['epoch'] for row in rows] == [1, 2]
    assert all(row['iters'] == batches and row['seconds'] > 0 for row in rows)
    assert all(0 < row['data_share'] < 1 for row in rows)
    phases = benchmark_epoch.PHASES
    assert all(split[phase] > 0 for phase in phases if phase != 'other')
    assert sum(split[phase] for phase in phases) == pytest.approx(split['total'])
    printed = capsys.readouterr().out
    assert 'data share' in printed and 'split of epoch 3' in printed and 's/iter' in printed
    assert f'torch {torch.__version__}' in printed
    windows = len(DATASETS.build(tiny_cfg.test_dataloader.dataset))
    assert re.search(rf'test pass: {windows} windows in [\d.]+ s', printed)


# ------------------------ issue 37 KS3 (fixKnown, session 16): a refused training writes nothing
def _train_refused_before_it_began(tiny_crosstask, tmp_path, work_dir):
    """tools/train.py of a tiny KEPP whose ``model.step_checkpoint`` is no step model (passM's
    case: refused when its step model is loaded, in ``before_train``): exits non-zero."""
    from tiny_configs import write_tiny_config
    torch.save({'state_dicts': {}}, tmp_path / 'not_a_step_model.pth')
    body = ("model = dict(feature_dim=512, dim=32, n_timesteps=20)\n"
            "train_cfg = dict(max_epochs=1, val_interval=1)\n")
    config = write_tiny_config(tmp_path / 'tiny_kepp.py',
                               ROOT / 'configs/baselines/kepp_crosstask_t3.py', body,
                               tiny_crosstask, batch_size=32, steps_per_epoch=1)
    with pytest.raises(SystemExit) as refused:
        load_tool('train').main([str(config), '--work-dir', str(work_dir), '--cfg-options',
                                 f'model.step_checkpoint={tmp_path / "not_a_step_model.pth"}'])
    assert 'not a KEPP step model' in str(refused.value.code)


def test_a_training_refused_before_it_began_leaves_no_new_work_dir(tiny_crosstask, tmp_path):
    """Before (passM KS3): a training refused once its model was built left the Runner's
    config copy in the new work dir. Now the config is written when the run begins
    (``before_train`` ran): the refused run leaves no work dir."""
    _train_refused_before_it_began(tiny_crosstask, tmp_path, tmp_path / 'new' / 'run')
    assert not (tmp_path / 'new').exists(), sorted(
        str(p.relative_to(tmp_path)) for p in (tmp_path / 'new').rglob('*'))


def test_a_training_refused_before_it_began_keeps_an_existing_work_dir_as_it_was(
        tiny_crosstask, tmp_path):
    """Before: the refused run replaced the earlier run's config copy in an existing work
    dir. Now every file there stays as it was."""
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    (work_dir / 'tiny_kepp.py').write_text('# the earlier run\n')
    (work_dir / 'notes.txt').write_text('mine\n')
    before = {p.name: p.read_bytes() for p in work_dir.iterdir()}
    _train_refused_before_it_began(tiny_crosstask, tmp_path, work_dir)
    assert {p.name: p.read_bytes() for p in work_dir.iterdir()} == before

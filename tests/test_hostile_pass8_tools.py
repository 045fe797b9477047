"""Seventh hostile pass (issue 37), the tools around training and the core math (hostile15).

Each test is a case that was wrong, silent or vague on 69b959e (case ids of /tmp/hostile15_log.md).
"""
import math
import re

import numpy as np
import pytest
import torch

from vpn_plugin.core import dvl, metrics, pkg, viterbi

N = 4
PKG = pkg.build_pkg([[0, 1, 2, 3], [1, 2, 3, 0]], N)
LOG_A = pkg.pkg_log_transitions(PKG)


def emissions(batch=2, horizon=3):
    return torch.randn(batch, horizon, N, generator=torch.Generator().manual_seed(0)).log_softmax(-1)


@pytest.mark.parametrize('kwargs, pattern', [
    (dict(temperature=math.inf), r'argument temperature=inf; expected a finite number > 0'),  # d1
    (dict(temperature='1'), r"argument temperature='1'"),  # d17
    (dict(num_layers=2.0), r'num_layers=2.0; expected an integer >= 1'),  # d7
    (dict(num_layers=math.nan), r'num_layers=nan'),  # d6
    (dict(clamp_probs='1e-10'), r"clamp_probs='1e-10'"),  # d9
])
def test_dvl_options_refused_by_name(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        dvl.differentiable_viterbi(emissions(), LOG_A, **kwargs)


def test_emissions_whose_sums_overflow_refused_not_decoded_as_infeasible():  # v10
    with pytest.raises(ValueError, match=r'magnitude .*sums over the 3 steps fit torch.float32'):
        viterbi.viterbi_decode(emissions() * 1e38, LOG_A)


@pytest.mark.parametrize('values, pattern', [
    (torch.full((1, 3, N), math.nan), r'emissions holds the value nan'),  # v17
    (emissions(), r'emissions holds the value -.*log values belong to viterbi_decode'),  # v19
    (torch.zeros(0, 3, N), r'emissions \(0, 3, 4\).*non-empty'),  # v24
])
def test_probability_viterbi_refuses_what_it_cannot_decode(values, pattern):
    with pytest.raises(ValueError, match=pattern):
        viterbi.viterbi_decode_probs(values, torch.from_numpy(PKG))


def test_probability_viterbi_refuses_prior_shape_and_unnormalised_rows():  # v22, v23
    probabilities = emissions().exp()
    with pytest.raises(ValueError, match=r'prior has shape \(5,\); expected \(4,\)'):
        viterbi.viterbi_decode_probs(probabilities, torch.from_numpy(PKG), torch.ones(5))
    with pytest.raises(ValueError, match=r'transitions row 0 sums to 10'):
        viterbi.viterbi_decode_probs(probabilities, torch.from_numpy(PKG) * 10)


@pytest.mark.parametrize('call, pattern', [
    (lambda: pkg.build_pkg([[0, 1, 2]], 3, smoothing=math.nan), r'smoothing=nan'),  # p1
    (lambda: pkg.build_pkg([[0, 1, 2]], 3, smoothing=math.inf), r'smoothing=inf'),  # p2
    (lambda: pkg.build_pkg([[0, 1]], 2.5), r'num_actions=2.5; expected an integer'),  # p3
    (lambda: pkg.build_pkg([[0, 0]], True), r'num_actions=True'),  # p4
    (lambda: pkg.build_pkg([[0, 1, 2, 0]], 3, horizon=2.5), r'horizon=2.5'),  # p5
    (lambda: pkg.build_pkg([np.array([[0, 1], [2, 0]])], 3), r'sequence 0 has shape \(2, 2\)'),  # p9
    (lambda: pkg.weight_noise(PKG, math.nan), r'weight_noise\(\) argument sigma=nan'),  # p12
    (lambda: pkg.weight_noise(PKG, math.inf), r'weight_noise\(\) argument sigma=inf'),  # p13
])
def test_pkg_values_that_gave_nan_or_zero_graphs_refused(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


@pytest.mark.parametrize('call, pattern', [
    (lambda: pkg.subsample_sequences([[1.7, 2.2]], 1.0), r'sequence 0 holds float64'),  # p16
    (lambda: pkg.label_noise([[0, 1], [2, 3]], 0.0, [[0, 1], [2, 3]], tasks=[0, 1.9]),
     r'label_noise tasks holds float64'),  # p17
    (lambda: pkg.label_noise([[0.9, 1.5]], 0.0, [[0, 1]]), r'sequence 0 holds float64'),  # p18
    (lambda: pkg.pkg_log_transitions(PKG, dtype=torch.int64), r'dtype=torch.int64'),  # p22
])
def test_ids_and_dtypes_never_truncated(call, pattern):
    with pytest.raises(TypeError, match=pattern):
        call()


def test_metrics_numpy_batch_size_and_huge_uint64_ids():  # m3, m5, m4
    assert metrics.miou_batch([[1, 0]], [[1, 0]], np.int64(4)) == 100.0
    with pytest.raises(ValueError, match=r'pred holds action id 9223372036854775813'):
        metrics.planning_metrics(np.array([[2 ** 63 + 5, 0]], dtype=np.uint64),
                                 np.array([[5, 0]]))
    with pytest.raises(ValueError, match=r'pred is not a rectangular \(M, T\) array'):
        metrics.planning_metrics([[1, 0], [1]], [[1, 0], [1, 0]])


# ----------------------------------------------------------------------------- tools
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

from tool_modules import load_tool  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def user_error(tool: str, argv) -> str:
    """The message ``tool`` stops with (exit status 1, SystemExit with a text)."""
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([str(a) for a in argv])
    assert isinstance(stopped.value.code, str), f'{tool}: exit code {stopped.value.code!r}'
    return stopped.value.code


def test_export_windows_never_writes_a_train_export_over_the_test_split(tmp_path, shared_data):
    """C11: --split train --out <the test split's window file> --overwrite replaced the test
    annotations with training windows (a later evaluation would test on the training set)."""
    splits = tmp_path / 'niv/splits'
    splits.mkdir(parents=True)
    for name in ('taxonomy.json', 'splits/train_T3.json', 'splits/test_T3.json'):
        shutil.copy(shared_data / 'niv' / name, tmp_path / 'niv' / name)
    test_split = splits / 'test_T3.json'
    before = test_split.read_bytes()
    message = user_error('export_windows', ['--dataset', 'niv', '--split', 'train', '--horizon',
                                            '3', '--data-root', tmp_path, '--out', test_split,
                                            '--overwrite'])
    assert 'that is an input of this command' in message
    assert test_split.read_bytes() == before


@pytest.mark.parametrize('option, pattern', [
    ('model.use_dvl=abc', r"model.use_dvl='abc'; expected True or False"),  # D11 (was: on)
    ('model.use_dvl=0', r'model.use_dvl=0; expected True or False'),  # D16 (was: off)
    ('model.loss_weights={}', r"model.loss_weights='\{\}'; expected a dict"),  # D13 (TypeError)
])
def test_model_switches_are_booleans_and_loss_weights_a_dict(option, pattern):
    message = user_error('model_stats', [REPO / 'configs/vpn_niv_t3.py', '--cfg-options', option])
    assert re.search(pattern, message), message


# ---------------------------------------------------------------------- the python API
@pytest.fixture(scope='module')
def planner(tiny_crosstask, tmp_path_factory):
    """An untrained ViterbiPlanNet of the tiny CrossTask data, and its test dataset."""
    from test_apis import tiny_vpn_config
    from vpn_plugin.apis import build_split_dataset, init_planner
    model = init_planner(str(tiny_vpn_config(tiny_crosstask, tmp_path_factory.mktemp('cfg'))))
    return model, build_split_dataset(model.cfg, 'test'), tiny_crosstask


def test_inference_indices_from_a_generator_are_all_planned(planner):
    """F1: a generator of indices was used up by the index checks: [] returned, no error.
    F2: a single int gave "'int' object is not iterable"."""
    from vpn_plugin.apis import inference_planner
    model, dataset, _ = planner
    expected = [s.pred_plan.tolist() for s in inference_planner(model, dataset, [0, 1])]
    given = inference_planner(model, dataset, (i for i in [0, 1]))
    assert [s.pred_plan.tolist() for s in given] == expected
    with pytest.raises(TypeError, match=r'indices=3; expected a sequence of sample indices'):
        inference_planner(model, dataset, 3)


def test_init_planner_switches_are_booleans(planner):
    """F32: unchecked='no' was read as True (the checkpoint's checks skipped); F31 partial=1."""
    from vpn_plugin.apis import init_planner
    model, _, _ = planner
    with pytest.raises(ValueError, match=r"unchecked='no'; expected True or False"):
        init_planner(model.cfg, unchecked='no')
    with pytest.raises(ValueError, match=r'partial=1; expected True or False'):
        init_planner(model.cfg, partial=1)
    with pytest.raises(TypeError, match=r'config is a dict; expected a config file path'):
        init_planner(dict(model.cfg))  # F13: "stat: path should be string ... not dict"


def test_video_observations_negative_time_and_tensor_frames(planner):
    """F9: start_time=-0.4 was read as second 0; F11: a tensor of frames gave os's TypeError."""
    from vpn_plugin.apis import video_observations
    model, _, _ = planner
    frames = np.random.default_rng(0).standard_normal((40, 512)).astype(np.float32)
    with pytest.raises(ValueError, match=r'argument start_time=-0.4; expected a finite number '
                                         r'>= 0'):
        video_observations(model.cfg, frames, -0.4, 10)
    from_tensor = video_observations(model.cfg, torch.from_numpy(frames), 1, 10)
    for a, b in zip(from_tensor, video_observations(model.cfg, frames, 1, 10)):
        assert torch.equal(a, b)
    with pytest.raises(TypeError, match=r'feature_file is a list'):
        video_observations(model.cfg, frames.tolist(), 1, 10)


def test_float64_observations_beyond_float32_are_named_as_the_input(planner):
    """F18: float64 observations of 1e39 (inf in float32) ended in the inner 'log_emissions
    holds NaN or +inf values'."""
    from vpn_plugin.apis import plan_from_features
    model, _, _ = planner
    start = torch.ones(model.feature_dim, dtype=torch.float64) * 1e39
    with pytest.raises(ValueError, match=r'start observations hold values up to 1e\+39, beyond '
                                         r'float32'):
        plan_from_features(model, start, torch.ones(model.feature_dim, dtype=torch.float64))


@pytest.mark.skipif(torch.cuda.is_available(), reason='needs a machine without CUDA')
def test_benchmark_extract_names_a_device_it_cannot_use():
    """J8: --device cuda on a CPU-only torch ended in torch's AssertionError traceback."""
    message = user_error('benchmark_extract', ['--device', 'cuda', '--seconds', '1'])
    assert "--device 'cuda': this machine has 0 CUDA device(s)" in message


def test_convert_authors_checkpoint_into_a_missing_folder_gives_its_own_advice(tmp_path):
    """L7: DST in a missing folder advised '--work-dir ... --resume', options this tool lacks."""
    source = tmp_path / 'authors.pth'
    torch.save({'w': torch.zeros(1)}, source)
    tool = load_tool('convert_authors_checkpoint')
    tool.install_authors_weights = lambda *args: None  # any weights: the save is tested
    with pytest.raises(SystemExit) as stopped:
        tool.main(['--config', str(REPO / 'configs/vpn_crosstask_t3.py'), str(source),
                   str(tmp_path / 'missing/dst.pth')])
    assert 'Give DST in an existing, writable folder' in stopped.value.code
    assert '--resume' not in stopped.value.code


def test_observation_cache_dir_that_is_a_file_is_named(tiny_crosstask, tmp_path):
    """M3: cache_dir naming a regular file ended in makedirs' bare 'File exists'."""
    from vpn_plugin.datasets.planning_dataset import PlanningDataset
    blocker = tmp_path / 'cache'
    blocker.write_text('not a folder')
    dataset = dict(tiny_crosstask['test_dataset'])
    dataset.pop('type', None)
    dataset['cache_dir'] = str(blocker)
    with pytest.raises(NotADirectoryError, match=r'cache_dir .*cache is a regular file; '
                                                 r'expected a folder'):
        PlanningDataset(**dataset)

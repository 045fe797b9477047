"""Confirmation pass (issue 37, part B, confirm5): core math called directly."""
import math
from pathlib import Path

import pytest
import torch

from vpn_plugin import core
from test_train import tiny_cfg  # noqa: F401  (fixture)

CONFIGS = Path(__file__).resolve().parents[1] / 'configs'


def _chain(offset=0.0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(1)
    log_emissions = torch.randn(4, 3, 5, generator=generator).log_softmax(-1).to(dtype) + offset
    log_transitions = torch.rand(5, 5, generator=torch.Generator().manual_seed(2)).log_softmax(-1)
    return log_emissions, log_transitions


@pytest.mark.parametrize('offset', [1e6, 1e8, 1e30])
def test_dvl_refuses_emissions_beyond_float32_precision(offset):
    """A common offset of 1e6 in float32 emissions gave marginals off by 0.12, 1e8 entries of
    16 (rows summing to 80) without a word; the soft plan must be a distribution or refused."""
    log_emissions, log_transitions = _chain(offset)
    with pytest.raises(ValueError, match=r'soft plan of sample \d+ sums to .* precision of '
                                         r'torch.float32'):
        core.differentiable_viterbi(log_emissions, log_transitions)


def test_dvl_keeps_correct_chains():
    """No cry wolf: log probabilities, float64 at a large offset, low temperatures, -1e9
    masks, an infeasible sample, half precision."""
    log_emissions, log_transitions = _chain()
    exact, _ = core.differentiable_viterbi(log_emissions.double(), log_transitions.double())
    shifted, _ = core.differentiable_viterbi(log_emissions.double() + 1e6, log_transitions)
    assert torch.allclose(shifted, exact, atol=1e-6)  # offset invariance, float64 oracle
    for temperature in (1e-6, 1e-2, 10.0):
        soft, _ = core.differentiable_viterbi(log_emissions, log_transitions,
                                          temperature=temperature)
        assert torch.allclose(soft.sum(-1), torch.ones(4, 3), atol=1e-3)
    masked = log_emissions.clone()
    masked[:, :, 0] = -1e9
    masked[1, 1, :] = -math.inf  # an infeasible sample: log Z = -inf
    soft, log_z = core.differentiable_viterbi(masked, log_transitions)
    assert math.isinf(float(log_z[1])) and float(soft[0, :, 0].max()) == 0.0
    core.differentiable_viterbi(log_emissions.half(), log_transitions)
    core.differentiable_viterbi(log_emissions.bfloat16(), log_transitions)


def test_beam_search_refuses_probabilities_as_log_transitions():
    """A matrix of probabilities (rows summing to 1, not logs) was searched as log scores:
    the path maximised a sum of probabilities, its score 0.43 read as a log probability."""
    _, log_transitions = _chain()
    with pytest.raises(ValueError, match='row 0 has probabilities summing to 6.1'):
        core.pkg_beam_search(log_transitions.exp(), torch.tensor([0]), torch.tensor([2]), 3)
    paths, scores = core.pkg_beam_search(log_transitions, torch.tensor([0]), torch.tensor([2]), 3,
                                         beam_width=5)
    best = max(range(5), key=lambda m: float(log_transitions[0, m] + log_transitions[m, 2]))
    assert paths.tolist() == [[0, best, 2]]


def test_a_training_loader_without_a_batch_is_refused(tiny_cfg, tmp_path):
    """train_dataloader.batch_size=100000 with drop_last=True: 0 iterations per epoch, the
    untrained model saved as best/epoch checkpoints, exit 0 (confirm5 K8)."""
    import copy
    from vpn_plugin.runner import build_runner
    cfg = copy.deepcopy(tiny_cfg)
    cfg.work_dir = str(tmp_path / 'run')
    cfg.merge_from_dict({'train_dataloader.batch_size': 100000,
                         'train_dataloader.drop_last': True, 'train_cfg.max_epochs': 1})
    with pytest.raises(ValueError, match=r'train_dataloader yields no batch: 262 training '
                                         r'windows .*batch_size=100000, drop_last=True'):
        build_runner(cfg).train()
    assert not list((tmp_path / 'run').glob('*.pth'))


def test_validation_on_test_videos_needs_the_authors_selection(shared_data):
    """--cfg-options val_dataloader.dataset.window_file=splits/test_T3.json selected the
    checkpoint on test videos (10% of them, seeded) and reported the unified protocol, exit 0
    (confirm5 K25 / F19); the authors' selection configs say so and still load."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.datasets.planning_dataset import check_split_disjoint
    options = {'data_root': str(shared_data)}
    moved = load_config(str(CONFIGS / 'vpn_niv_t3.py'), dict(
        options, **{'val_dataloader.dataset.window_file': 'splits/test_T3.json'}))
    with pytest.raises(ValueError, match=r'val_dataloader.dataset / test_dataloader.dataset: '
                                         r'42 video\(s\) are in both the validation and the '
                                         r"test split.*selection=None.*selection='authors'"):
        check_split_disjoint(moved)
    check_split_disjoint(load_config(str(CONFIGS / 'vpn_niv_t3.py'), options))
    check_split_disjoint(load_config(str(CONFIGS / 'selection/vpn_niv_t3_authors.py'),
                                     options))


@pytest.mark.parametrize('flag', [['--limit', '10'], ['--smoke']])
def test_test_limit_flag_against_the_limit_option_is_refused(tmp_path, flag):
    """tools/test.py --limit 10 --cfg-options test_dataloader.dataset.limit=20 scored 10
    windows, the option dropped without a word (confirm5 T1); equal values pass."""
    from tool_modules import load_tool
    test_tool = load_tool('test')
    checkpoint = tmp_path / 'x.pth'
    torch.save({'state_dict': {}}, checkpoint)
    argv = [str(CONFIGS / 'vpn_niv_t3.py'), str(checkpoint), '--work-dir', str(tmp_path), *flag]
    args = test_tool.parse_args(argv + ['--cfg-options', 'test_dataloader.dataset.limit=20'])
    with pytest.raises(ValueError, match=rf'{flag[0]} \d+ and --cfg-options '
                                         r'test_dataloader.dataset.limit=20 contradict'):
        test_tool.load_config(args)
    same = '10' if flag[0] == '--limit' else '32'
    args = test_tool.parse_args(argv + ['--cfg-options', f'test_dataloader.dataset.limit={same}'])
    assert test_tool.load_config(args).test_dataloader.dataset.limit == int(same)


def test_pkg_of_strings_and_union_of_another_size_are_refused():
    """check_pkg([['0.5', '0.5'], ['1', '0']]) parsed the strings as probabilities;
    union_pkg(pkg_5x5, num_actions=7) returned a 5x5 PKG, num_actions ignored (confirm5
    block 1 #58, #40)."""
    import numpy as np
    with pytest.raises(TypeError, match='pkg has dtype <U3; expected real probabilities'):
        core.check_pkg([['0.5', '0.5'], ['1', '0']])
    pkg = core.build_pkg([[0, 1, 2], [1, 2, 3], [2, 3, 4]], 5)
    with pytest.raises(ValueError, match='source 0 is a PKG of 5 actions but num_actions=7'):
        core.union_pkg(pkg, num_actions=7)
    assert np.array_equal(core.union_pkg(pkg, [[0, 1]], num_actions=5)[2], pkg[2])
    assert core.check_pkg(np.eye(3, dtype=bool)).dtype == np.float64


def test_load_config_options_that_are_no_dict_are_named():
    """load_config(path, 'model.dropout=0.2'): "no top-level config key ''" (confirm5 API #49)."""
    from vpn_plugin.data_paths import load_config
    with pytest.raises(TypeError, match=r"cfg_options='model.dropout=0.2'; expected a dict of "
                                        r'dotted keys'):
        load_config(str(CONFIGS / 'vpn_niv_t3.py'), 'model.dropout=0.2')


def test_a_test_under_another_selection_is_named():
    """tools/test.py CKPT --cfg-options selection=authors on a unified run logged "model
    selection: authors", test_metrics.json silent (confirm5 T16); a resume is refused."""
    from mmengine.config import Config
    from vpn_plugin.engine.checkpoint import training_option_differences
    trained = "model = dict(type='ViterbiPlanNet', num_actions=5)\n"
    cfg = Config.fromstring(trained + "selection = 'authors'\n", '.py')
    assert training_option_differences(trained, cfg, 'test').named == [
        "selection: 'unified' in training, 'authors' here"]  # unset: unified (passT H70)
    assert training_option_differences(trained, cfg, 'resume').refused == [
        "selection: 'unified' in the run, 'authors' here"]
    same = Config.fromstring(trained, '.py')
    assert training_option_differences(trained, same, 'test') == ([], [])


def test_miou_batch_size_without_the_batch_metric_is_refused():
    """test_evaluator.miou_batch_size=8 alone computed no batch mIoU, unsaid (confirm5 block 4
    #4); with extra_metrics=['miou_batch'] it builds."""
    from vpn_plugin.evaluation.planning_metric import PlanningMetric
    with pytest.raises(ValueError, match=r"miou_batch_size=8 without 'miou_batch' in "
                                         r'extra_metrics \(\[\]\) computes nothing'):
        PlanningMetric(miou_batch_size=8)
    assert PlanningMetric(extra_metrics=['miou_batch'], miou_batch_size=8).miou_batch_size == 8


def test_a_training_loss_without_a_term_is_named():
    """model.loss_weights.plan=0 .state=0 .task=0: the first step ended in "AttributeError:
    'int' object has no attribute 'detach'" (confirm5 K88)."""
    from vpn_plugin.models import ViterbiPlanNet
    model = ViterbiPlanNet(num_actions=5, num_tasks=2, horizon=3, feature_dim=8, embed_dim=16,
                           loss_weights=dict(state=0, plan=0, task=0))
    with pytest.raises(ValueError, match=r"ViterbiPlanNet: the training loss has no term .*"
                                         r"model.loss_weights=\{'state': 0, 'plan': 0, "
                                         r"'task': 0\} are all 0"):
        model.parse_losses({})
    loss, _ = model.parse_losses({'loss_plan': torch.tensor(0.5)})
    assert float(loss) == 0.5

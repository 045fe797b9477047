"""Tenth hostile pass (issue 37), PDPP / KEPP / CEFITO through the tools and their files
(meaning2).

Each test is a leftover of the ninth pass or a case of /tmp/meaning2_log.md that was wrong,
silent or vague on 1c6544e.
"""
import itertools
import re

import pytest
import torch

from vpn_plugin.core import pkg
from vpn_plugin.engine.checkpoint import CheckpointMismatchError, load_weights

PLANNER_TYPES = ('PDPP', 'KEPP', 'CEFITO', 'ViterbiPlanNet')  # SCHEMA, CompactPlanNet alike


# ------------------------------------------------------------ PK13: build_pkg's action count
@pytest.mark.parametrize('call,matrices', [
    (lambda n: pkg.build_pkg([[0, 1]], n), 3),
    (lambda n: pkg.transition_counts([[0, 1]], n), 1),
    (lambda n: pkg.union_pkg([[0, 1]], num_actions=n), 3)])
def test_build_pkg_refuses_an_action_count_beyond_memory(call, matrices):
    """PK13 (hostile24, left): build_pkg(num_actions=10**9) stopped with numpy's "Unable to
    allocate 6.94 EiB for an array with shape (1000000000, 1000000000)", the argument not
    named. The cap follows from the machine's memory."""
    cap = int((pkg.physical_memory_bytes() / (matrices * 8)) ** 0.5)
    held = '3 \\(N, N\\) float64 matrices' if matrices == 3 else 'an \\(N, N\\) float64 matrix'
    with pytest.raises(ValueError, match=rf'argument num_actions=1000000000: a PKG over '
                                         rf'1000000000 actions holds {held} while it is '
                                         rf'counted, .* EiB, more than this machine\'s .* of '
                                         rf'memory; expected num_actions <= {cap}'):
        call(10 ** 9)
    assert call(3).shape == (3, 3)  # a taxonomy's size still counts


def test_pkg_memory_cap_is_the_memory_not_a_number():
    """The refusal reads the memory it is given: N=1000 (24 MB) fits 1 GiB, not 1 MiB."""
    pkg.check_pkg_fits_memory('num_actions', 1000, memory=2 ** 30)
    with pytest.raises(ValueError, match=r'num_actions=1000: .* 22.89 MiB, more than this '
                                         r"machine's 1 MiB of memory; expected num_actions <= 209"):
        pkg.check_pkg_fits_memory('num_actions', 1000, memory=2 ** 20)


# ------------------------------------------------------ AP23: a checkpoint of another planner
def planner_checkpoint(model_type: str, horizon: int = 3) -> dict:
    """A checkpoint as tools/train.py writes it, of ``model_type`` (meta['cfg'] records it)."""
    cfg = f"model = dict(type='{model_type}', horizon={horizon})\n"
    return dict(meta=dict(cfg=cfg, dataset_meta=dict(horizon=horizon)),
                state_dict={'other.weight': torch.zeros(2, 2)})


def stand_in_model(class_name: str, horizon: int = 3) -> torch.nn.Module:
    """A module whose class is named as a planner (load_weights names the model's class)."""
    model = type(class_name, (torch.nn.Module,), {})()
    model.layer = torch.nn.Linear(2, 2)
    model.horizon = horizon
    return model


@pytest.mark.parametrize('config_type,checkpoint_type',
                         list(itertools.permutations(PLANNER_TYPES, 2)))
def test_load_weights_names_the_checkpoints_planner(config_type, checkpoint_type):
    """AP23 (hostile24, left): a checkpoint of another planner was refused with a list of
    missing keys only; the model type its meta records is named, for every pair."""
    expected = (rf"checkpoint ckpt.pth \(a checkpoint of {checkpoint_type}: its meta's config "
                rf"has model.type='{checkpoint_type}'; the config builds {config_type}\) does "
                rf'not fit the model {config_type} of the config: missing keys')
    with pytest.raises(CheckpointMismatchError, match=expected):
        load_weights(stand_in_model(config_type), planner_checkpoint(checkpoint_type), 'ckpt.pth')
    # another horizon too: the meta refusal comes first and names the planner as well
    with pytest.raises(CheckpointMismatchError, match=rf'\(a checkpoint of {checkpoint_type}: .* '
                                                      r'was trained for another setting'):
        load_weights(stand_in_model(config_type), planner_checkpoint(checkpoint_type, 4),
                     'ckpt.pth')


@pytest.mark.parametrize('recorded', ['PDPP', 'mmaction.PDPP'])
def test_load_weights_says_nothing_of_the_same_planner(recorded):
    """No cry wolf: a checkpoint of the config's own planner (scoped or not) that does not
    fit is refused with its keys, without a word of another planner."""
    with pytest.raises(CheckpointMismatchError) as error:
        load_weights(stand_in_model('PDPP'), planner_checkpoint(recorded), 'ckpt.pth')
    assert 'a checkpoint of' not in str(error.value)
    assert 'does not fit the model PDPP' in str(error.value)


def test_init_planner_names_a_kepp_checkpoint_on_a_pdpp_config(tmp_path):
    """AP23 through the API: init_planner(pdpp config, a KEPP checkpoint)."""
    from vpn_plugin.apis import init_planner
    path = tmp_path / 'epoch_1.pth'
    torch.save(planner_checkpoint('KEPP'), path)
    with pytest.raises(CheckpointMismatchError, match=r"epoch_1.pth \(a checkpoint of KEPP: its "
                                                      r"meta's config has model.type='KEPP'; the "
                                                      r'config builds PDPP\) does not fit'):
        init_planner('configs/baselines/pdpp_niv_t3.py', path,
                     cfg_options={'model.dim': 32, 'model.dim_mults': [1]})


@pytest.mark.parametrize('resume', [False, True])
def test_runner_refuses_another_planners_checkpoint_first(tmp_path, resume):
    """E2: tools/test.py kepp_niv_t3.py <a PDPP epoch_1.pth> said "carries the PKG its
    training counted, and this config's model.pkg asks for another graph (count_mode:
    'window' in training, 'video' here)" after a warning listing ten model options: all
    consequences of a checkpoint of another planner, which was never named. The runner now
    refuses it first (test, load_from and --resume alike)."""
    from types import SimpleNamespace
    from mmengine.config import Config
    from vpn_plugin.runner import PlanningRunner
    path = tmp_path / 'epoch_1.pth'
    torch.save(planner_checkpoint('PDPP'), path)
    runner = SimpleNamespace(model=stand_in_model('KEPP'), cfg=Config({}), _resume=resume)
    with pytest.raises(CheckpointMismatchError, match=r"epoch_1.pth \(a checkpoint of PDPP: its "
                                                      r"meta's config has model.type='PDPP'; the "
                                                      r'config builds KEPP\) is not a checkpoint '
                                                      r"of the config's planner"):
        PlanningRunner.load_checkpoint(runner, str(path))


def test_cefito_ground_truth_task_is_named():
    """A46: model.task_source='ground_truth' (the true task of each window restricts the
    search: an oracle input) built and ran without a word; the default says nothing."""
    from unittest import mock
    from vpn_plugin.models import cefito

    def logged(task_source):  # the constructor stopped right after the option checks
        with mock.patch.object(cefito, 'print_log') as log, \
                mock.patch.object(cefito, 'check_loss_terms', side_effect=StopIteration):
            with pytest.raises(StopIteration):
                cefito.CEFITO(feature_dim=8, num_actions=4, num_tasks=1, horizon=3,
                              taxonomy='taxonomy.json', task_source=task_source)
        return ' '.join(str(call) for call in log.call_args_list)
    assert "model.task_source='ground_truth'" in logged('ground_truth')
    assert 'oracle' in logged('ground_truth')
    assert 'oracle' not in logged('classifier')


def test_train_resolves_extra_dataset_keys_and_names_the_test_split():
    """T23: model.pkg.extra_datasets=['val_dataloader.dataset'] (documented) reached tools/
    train.py's PKGBuilder unresolved ("expected a list of config dicts"; only protocols
    resolved it); 'test_dataloader.dataset' counts the PKG on the test windows: said (the
    union_pkg protocol's oracle row asks for it on purpose)."""
    from unittest import mock
    import vpn_plugin.runner as runner_module
    from vpn_plugin.data_paths import load_config
    config = 'configs/baselines/pdpp_niv_t3.py'
    cfg = load_config(config, {'model.decode': 'viterbi',
                               'model.pkg.extra_datasets': ['test_dataloader.dataset']})
    with mock.patch('mmengine.logging.print_log') as log:
        resolved = runner_module.resolve_dataset_references(cfg)
    assert "extra_datasets[0] = 'test_dataloader.dataset': the PKG is counted on the test " \
        'windows' in str(log.call_args)
    assert resolved.model.pkg.extra_datasets[0]['type']
    cfg = load_config(config, {'model.pkg.extra_datasets': ['val_dataloader.dataset']})
    with mock.patch('mmengine.logging.print_log') as log:
        assert runner_module.resolve_dataset_references(cfg).model.pkg.extra_datasets[0]['type']
    assert not log.called  # the validation videos are training-side: nothing to say
    import inspect
    assert 'resolve_dataset_references(' in inspect.getsource(
        runner_module.PlanningRunner.from_cfg)  # tools/train.py resolves them too


@pytest.mark.parametrize('hooks,message', [
    (['PDPPEMAHook', 'PDPPEMAHook'], r'custom_hooks hold 2 EMA hooks \(PDPPEMAHook, PDPPEMAHook\)'),
    (['PDPPEMAHook', 'EMAHook'], r'custom_hooks hold 2 EMA hooks \(PDPPEMAHook, EMAHook\)'),
    (['TaskClassifierHook', 'TaskClassifierHook'], r'custom_hooks hold TaskClassifierHook 2 times')])
def test_training_refuses_two_ema_or_stage_hooks(hooks, message):
    """T20 / T21: a PDPP config with two PDPPEMAHooks (decay 0.995 and 0.9) or two
    TaskClassifierHooks trained without a word."""
    from mmaction.registry import HOOKS
    from vpn_plugin.runner import check_training_hooks
    import vpn_plugin.mm  # noqa: F401  (registers the hooks)
    options = dict(PDPPEMAHook=dict(decay=0.995, start_step=400, interval=10))
    built = [HOOKS.build(dict(type=name, **options.get(name, {}))) for name in hooks]
    model = type('PDPP', (), {'training_hooks': ('TaskClassifierHook',)})()
    with pytest.raises(ValueError, match=message):
        check_training_hooks(model, built + [HOOKS.build(dict(type='TaskClassifierHook'))]
                             if 'TaskClassifierHook' not in hooks else built, 'cfg.py')
    check_training_hooks(model, built[:1] + ([HOOKS.build(dict(type='TaskClassifierHook'))]
                                             if 'TaskClassifierHook' not in hooks else []),
                         'cfg.py')  # one of each: trained as before

"""Issue 37, session 9 (fix4): the tenth hostile pass's vague messages, each now naming the
file / line / key, the value and what was expected (closing8 "Vague left")."""
import argparse
import types
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from vpn_plugin.data_paths import read_config_file

REPO = Path(__file__).resolve().parents[1]


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_yaml_text_in_a_py_config_names_file_line_and_not_python(tmp_path):
    """confirm5 F3: ``_base_: [configs/vpn_niv_t3.py]`` in a .py file was a NameError
    traceback ("name 'configs' is not defined")."""
    path = _write(tmp_path, 'yaml_in_py.py', 'horizon = 3\n_base_: [configs/vpn_niv_t3.py]\n')
    with pytest.raises(ValueError, match=rf"{path}: line 2: name 'configs' is not defined; "
                                         'the config file does not run as Python'):
        read_config_file(path)


def test_yaml_text_in_a_base_names_the_base_file(tmp_path):
    base = _write(tmp_path, 'base.py', 'horizon: three\n')
    child = _write(tmp_path, 'child.py', "_base_ = ['./base.py']\n")
    with pytest.raises(ValueError, match=rf"{base}: line 1: name 'three' is not defined"):
        read_config_file(child)


def test_base_cycle_names_the_chain(tmp_path):
    """confirm5 F7: a ``_base_`` cycle was a RecursionError traceback naming no file."""
    a = _write(tmp_path, 'cycle_a.py', "_base_ = ['./cycle_b.py']\nhorizon = 3\n")
    b = _write(tmp_path, 'cycle_b.py', "_base_ = ['./cycle_a.py']\n")
    with pytest.raises(ValueError, match=rf'in a cycle: {a} -> {b} -> {a}; expected a chain'):
        read_config_file(a)


def test_a_valid_config_still_loads():
    """No cry wolf: the project's configs load as before."""
    cfg = read_config_file(REPO / 'configs' / 'vpn_niv_t3.py')
    assert cfg.model.type == 'ViterbiPlanNet'


def test_model_delete_without_required_option_names_model_key():
    """confirm5 F15: ``model = dict(_delete_=True, type='ViterbiPlanNet')`` was "TypeError:
    missing a required argument: 'num_actions'" without ``model.``; still a TypeError for a
    Python caller, and a user error (ValueError) for the tools."""
    from mmaction.registry import MODELS
    import vpn_plugin  # noqa: F401  (registers the planners)
    with pytest.raises(TypeError, match=r'model.num_actions is missing: a required option of '
                                        r'ViterbiPlanNet \(an entry with _delete_=True'):
        MODELS.build(dict(type='ViterbiPlanNet'))
    with pytest.raises(ValueError, match='model.num_actions is missing'):
        MODELS.build(dict(type='ViterbiPlanNet'))


def test_training_without_pkghook_names_custom_hooks():
    """confirm5 K49: ``custom_hooks=[]`` trained into a RuntimeError at the first step ("the
    PKG was never filled"); now refused before training, naming custom_hooks. A run that
    loads a checkpoint (which carries the graph) is not refused (confirm1 O_nopkghook)."""
    from vpn_plugin.models.pkg_hook import PKGHook
    from vpn_plugin.runner import check_training_hooks
    from vpn_plugin.baselines.planners import UniformEmissionPlanner
    model = UniformEmissionPlanner(num_actions=4, horizon=3)
    with pytest.raises(ValueError, match=r"cfg.py: custom_hooks hold no dict\(type='PKGHook'\)"
                                         r'.* UniformEmissionPlanner'):
        check_training_hooks(model, [], 'cfg.py')
    check_training_hooks(model, [], 'cfg.py', loads=True)
    check_training_hooks(model, [PKGHook()], 'cfg.py')


def test_persistent_workers_without_workers_names_the_key():
    """confirm5 K86: torch's "persistent_workers option needs num_workers > 0" named no key."""
    from vpn_plugin.runner import check_runner_options
    cfg = Config(dict(train_dataloader=dict(num_workers=0, persistent_workers=True)))
    with pytest.raises(ValueError, match=r'cfg.py: train_dataloader.persistent_workers=True with '
                                         r'train_dataloader.num_workers=0: .* expected '
                                         r'num_workers >= 1, or persistent_workers=False'):
        check_runner_options(cfg, 'cfg.py')
    check_runner_options(Config(dict(train_dataloader=dict(num_workers=2,
                                                           persistent_workers=True))), 'cfg.py')
    check_runner_options(Config(dict(val_dataloader=dict(num_workers=0,
                                                         persistent_workers=False))), 'cfg.py')


def test_planning_metrics_of_a_string_says_str():
    """confirm5 block 1 #63: ``planning_metrics('123', gt)`` said "pred has shape ()"."""
    from vpn_plugin.core.metrics import planning_metrics
    with pytest.raises(TypeError, match=r"pred is a str \('123'\); expected plans \(M, T\)"):
        planning_metrics('123', [[1, 2, 3]])
    assert planning_metrics([[1, 2, 3]], [[1, 2, 3]])['success_rate'] == 100.0


def test_missing_step_checkpoint_is_no_such_file_without_delete_advice(tmp_path):
    """confirm2 TK5 / meaning2 T25: a ``model.step_checkpoint`` that does not exist (or is no
    step model) said "delete it to retrain" of a file the user named."""
    from vpn_plugin.engine.kepp_training import load_step_model
    missing = tmp_path / 'nonexistent.pth'
    model = types.SimpleNamespace(step_checkpoint=str(missing))
    with pytest.raises(ValueError, match=rf"model.step_checkpoint='{missing}': no such file; "
                                         'give model.step_checkpoint a step model') as error:
        load_step_model(missing, model, {})
    assert 'delete it' not in str(error.value)
    wrong = tmp_path / 'wrong.pth'
    torch.save({'something': 1}, wrong)
    model = types.SimpleNamespace(step_checkpoint=str(wrong))
    with pytest.raises(ValueError, match=r"without \['identity', 'state_dict'\]; give "
                                         'model.step_checkpoint') as error:
        load_step_model(wrong, model, {})
    assert 'delete it' not in str(error.value)
    model = types.SimpleNamespace(step_checkpoint=None)  # the run's own file: delete it
    with pytest.raises(ValueError, match='delete it to retrain'):
        load_step_model(wrong, model, {})


@pytest.mark.parametrize('text', ['inf', 'nan', '-inf'])
def test_non_finite_number_flag_says_not_finite(text):
    """confirm3 M16: ``plan.py --goal-time inf`` said "expected a number >= 0" (inf is)."""
    from vpn_plugin.errors import NON_NEGATIVE_FLOAT
    with pytest.raises(argparse.ArgumentTypeError,
                       match=rf'{text}: not a finite number; expected a number >= 0'):
        NON_NEGATIVE_FLOAT(text)
    assert NON_NEGATIVE_FLOAT('95') == 95.0


def test_misspelled_perturbation_names_known_ones_and_closest():
    """meaning5 block 2 #43: ``perturbations=[dict(type='EdgeDropot')]`` was mmengine's
    registry KeyError, naming neither the field nor the close match."""
    from vpn_plugin.models.pkg_builder import PKGBuilder
    with pytest.raises(ValueError, match=r"model.pkg.perturbations\[0\].type='EdgeDropot' is "
                                         r"not a known perturbation; expected one of "
                                         r"\['DataFraction', 'EdgeDropout', .*\]; did you mean "
                                         r"'EdgeDropout'\?"):
        PKGBuilder(perturbations=[dict(type='EdgeDropot')])
    assert len(PKGBuilder(perturbations=[dict(type='EdgeDropout', fraction=0.1)])
               .perturbations) == 1


def test_resume_with_another_num_batch_per_epoch_names_the_key():
    """confirm1 O_nbpe3: a resume with another train_dataloader.num_batch_per_epoch was
    refused as "trained on other training data ... (val_fraction, subset, limit) differ",
    the changed key not named. A test of the checkpoint is not concerned."""
    from vpn_plugin.engine.checkpoint import training_option_differences
    run = ("model = dict(type='ViterbiPlanNet', num_actions=48, horizon=3)\n"
           'train_dataloader = dict(batch_size=32, num_batch_per_epoch=2)\n')
    cfg = Config.fromstring(run, '.py')
    cfg.merge_from_dict({'train_dataloader.num_batch_per_epoch': 3})
    assert training_option_differences(run, cfg, 'resume').refused == [
        'train_dataloader.num_batch_per_epoch: 2 in the run, 3 here']
    assert training_option_differences(run, cfg, 'test') == ([], [])
    same = Config.fromstring(run, '.py')
    assert training_option_differences(run, same, 'resume') == ([], [])


def test_fixture_with_another_fixtures_meta_names_both_methods(tmp_path):
    """confirm3 G4: a PDPP fixture folder with S3D's meta.json was refused as "cannot read
    the S3D word dictionary .../dict.npy", not as a meta.json of another fixture."""
    import json
    from vpn_plugin.oracles.compare import check_fixture, check_fixture_files
    for name in ('inputs.npz', 'outputs.npz', 'state_dict.npz', 'grads.npz',
                 'head_state_dict.npz', 'head_grads.npz'):
        (tmp_path / name).write_bytes(b'')
    (tmp_path / 'meta.json').write_text(json.dumps({'method': 'S3D'}))
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path / 'meta.json'} names "
                                                r"method='S3D', but the folder has no "
                                                r"\['dict.npy'\] .*those of a PDPP fixture"):
        check_fixture(tmp_path)
    (tmp_path / 'head_grads.npz').unlink()  # a fixture of no other method: its checker's
    check_fixture_files(tmp_path, {'method': 'S3D'}, 'S3D')
    (tmp_path / 'dict.npy').write_bytes(b'')
    (tmp_path / 'head_grads.npz').write_bytes(b'')
    check_fixture_files(tmp_path, {'method': 'S3D'}, 'S3D')


def test_pkg_quality_row_without_level_names_the_missing_key():
    """confirm4 P11: a pkg-quality row without variant.level was refused as rows that
    "differ in settings", not by its missing key."""
    from vpn_plugin.protocol.plots import pkg_quality_panels
    from vpn_plugin.protocol.results import ResultRow
    rows = [ResultRow('VPN', seed, 3, {'success_rate': 40.0},
                      variant=dict(perturbation='edge_dropout', level=0.1)) for seed in range(2)]
    rows.append(ResultRow('VPN', 2, 3, {'success_rate': 40.0},
                          variant=dict(perturbation='weight_noise')))
    with pytest.raises(ValueError, match=r"results row of 'VPN' \(seed 2, T=3\): variant "
                                         r"perturbation='weight_noise' without variant.level; "
                                         'expected its level, a number >= 0'):
        pkg_quality_panels(rows)
    assert pkg_quality_panels(rows[:2], num_resamples=20)[0][0]  # the full rows draw


def test_a_model_without_parameters_to_train_is_not_wrapped_in_ddp():
    """confirm1 D_test_dist_uniform: tools/test.py of UniformEmissionPlanner in 2 processes
    ended on each rank in torch's "DistributedDataParallel is not needed when a module
    doesn't have any parameter that requires a gradient" traceback. (By hand, torchrun
    --nproc_per_node 2: SR 3.0303, mIoU 8.1818, as one process.)"""
    import logging
    from vpn_plugin.baselines.planners import UniformEmissionPlanner
    from vpn_plugin.runner import PlanningRunner
    model = UniformEmissionPlanner(num_actions=4, horizon=3)
    runner = types.SimpleNamespace(distributed=True, logger=logging.getLogger('fix4'))
    assert PlanningRunner.wrap_model(runner, None, model) is model


def test_fixture_of_its_method_with_a_file_missing_is_left_to_its_checker(tmp_path):
    """No cry wolf: a CEFITO folder without train_step.npz also holds PDPP's files; it is
    a CEFITO fixture with a file missing (its checker reports it), not another's meta."""
    from vpn_plugin.oracles.compare import check_fixture_files
    for name in ('head_state_dict.npz', 'head_grads.npz', 'loader_annotations.json'):
        (tmp_path / name).write_bytes(b'')
    check_fixture_files(tmp_path, {'method': 'CEFITO'}, 'CEFITO')

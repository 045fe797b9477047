"""Issue 37, seventh hostile pass (hostile13: the VPN / SCHEMA / baseline training and evaluation
path): option values of another kind that were read by truth value, left unread, replaced by a
flag or ended in a traceback naming no key; each is now refused naming the key, the value and
what was expected. Every test fails on 69b959e (before these fixes)."""
import re

import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from tool_modules import load_tool
from vpn_plugin.data_paths import REPO_ROOT, load_config

NIV_CONFIG = str(REPO_ROOT / 'configs/vpn_niv_t3.py')


def checked(options: dict):
    """``check_config_entries`` of ``configs/vpn_niv_t3.py`` with ``options`` merged as
    ``--cfg-options`` would (nothing is read or built before it refuses)."""
    from vpn_plugin.data_paths import apply_horizon, resolve_paths
    from vpn_plugin.runner import check_config_entries
    cfg = resolve_paths(apply_horizon(load_config(NIV_CONFIG, options)))
    check_config_entries(cfg, cfg.filename)


@pytest.mark.parametrize('perturbation, expected', [
    # before: True read as 1.0 (every edge dropped: a PKG of 0 edges, exit 0)
    (dict(type='EdgeDropout', fraction=True), r'EdgeDropout.fraction=True; expected a finite'),
    (dict(type='LabelNoise', fraction=True), r'LabelNoise.fraction=True; expected a finite'),
    (dict(type='DataFraction', fraction=True), r'DataFraction.fraction=True; expected a finite'),
    # before: "'<=' not supported between instances of 'float' and 'str'" (no option named)
    (dict(type='EdgeDropout', fraction='abc'), r"EdgeDropout.fraction='abc'; expected"),
    (dict(type='DataFraction', fraction=None), r'DataFraction.fraction=None; expected'),
    # before: NaN noise emptied the graph (0 edges, exit 0); 'abc' a TypeError
    (dict(type='WeightNoise', sigma=float('nan')), r'WeightNoise.sigma=nan; expected a finite'),
    (dict(type='WeightNoise', sigma=True), r'WeightNoise.sigma=True; expected a finite'),
    (dict(type='WeightNoise', sigma='abc'), r"WeightNoise.sigma='abc'; expected a finite"),
    # before: "pkg holds NaN or infinite values" (neither the perturbation nor sigma named)
    (dict(type='WeightNoise', sigma=float('inf')), r'WeightNoise.sigma=inf; expected a finite'),
])
def test_pkg_perturbation_values_of_another_kind_are_refused(perturbation, expected):
    with pytest.raises(ValueError, match=expected):
        checked({'model.pkg.perturbations': [perturbation]})


@pytest.mark.parametrize('value', ['abc', -1, [], float('nan')])
def test_pkg_recount_is_a_switch(value):
    """Before: read by truth value ('abc' recounted the graph a checkpoint carries)."""
    with pytest.raises(ValueError, match=re.escape(f'model.pkg.recount={value!r}; expected '
                                                   'True or False')):
        checked({'model.pkg.recount': value})


@pytest.mark.parametrize('value', [-1, 1.5, True, float('nan')])
def test_pkg_extra_datasets_must_be_a_list(value):
    """Before: "TypeError: 'int' object is not iterable" (no key named)."""
    with pytest.raises(ValueError, match=re.escape(f'model.pkg.extra_datasets={value!r}; '
                                                   'expected a list')):
        checked({'model.pkg.extra_datasets': value})


@pytest.mark.parametrize('value', [0, 'abc', None, True])
def test_planning_metric_extra_metrics_must_be_a_list(value):
    """Before: TypeError "'int' object is not iterable"; 'abc' read as ['a', 'b', 'c']."""
    from vpn_plugin.evaluation.planning_metric import PlanningMetric
    with pytest.raises(ValueError, match=re.escape(f'extra_metrics={value!r}; expected a list')):
        PlanningMetric(extra_metrics=value)


@pytest.mark.parametrize('option, value, expected', [
    # before: read by truth value (0, 'abc', None, [] ... built a model, 'abc' with the DVL)
    ('use_dvl', 'abc', r"model.use_dvl='abc'; expected True or False"),
    ('use_dvl', 0, r'model.use_dvl=0; expected True or False'),
    # before: TypeErrors inside torch ("empty(): argument 'size' ...") naming no option
    ('mlp_ratio', 1.5, r'model.mlp_ratio=1.5; expected an integer'),
    ('embed_dim', None, r'model.embed_dim=None; expected an integer'),
    # before: the allocator's "you tried to allocate 12288000000000 bytes"
    ('embed_dim', 10 ** 9, r'model.embed_dim=1000000000; expected an integer >= 1 and <= 4096'),
])
def test_viterbi_plan_net_options_of_another_kind_are_refused(option, value, expected):
    from mmaction.registry import MODELS
    cfg = load_config(NIV_CONFIG, {f'model.{option}': value})
    with pytest.raises(ValueError, match=expected):
        MODELS.build(cfg.model)


@pytest.mark.parametrize('option, value, expected', [
    # before: 0 / None averaged the whole history, -1 logged NaN losses, exit 0
    ('log_processor.window_size', 0, r'log_processor.window_size=0; expected an integer >= 1'),
    ('log_processor.window_size', -1, r'log_processor.window_size=-1; expected an integer'),
    # before: AssertionError traceback at the first log line
    ('log_processor.window_size', 1.5, r'log_processor.window_size=1.5; expected an integer'),
    # before: read by truth value
    ('log_processor.by_epoch', 'abc', r"log_processor.by_epoch='abc'; expected True or False"),
    ('resume', 'abc', r"resume='abc'; expected True or False"),
    ('resume', 1.5, r'resume=1.5; expected True or False'),
    ('resume', None, r'resume=None; expected True or False'),
    ('randomness.deterministic', 'abc', r"randomness.deterministic='abc'; expected True or"),
    ('randomness.diff_rank_seed', -1, r'randomness.diff_rank_seed=-1; expected True or False'),
    ('env_cfg.cudnn_benchmark', 1.5, r'env_cfg.cudnn_benchmark=1.5; expected True or False'),
    # before: AssertionError "scope_name should be a string"; 'abc': "ViterbiPlanNet is not
    # in the mmengine::model registry"
    ('default_scope', 0, r"default_scope=0; expected one of 'mmaction'"),
    ('default_scope', 'abc', r"default_scope='abc'; expected one of 'mmaction'"),
    # before: "error: abc" / TypeError "Level not an integer or a valid string"; True ran
    ('log_level', 'abc', r"log_level='abc'; expected one of 'DEBUG', 'INFO'"),
    ('log_level', True, r'log_level=True; expected one of'),
    # before: mmengine's TypeError naming no key
    ('visualizer.vis_backends', 0, r'visualizer.vis_backends=0; expected a list of backend'),
    # before: evaluated as Epoch(val) [0], then AttributeError "'KillSafeCheckpointHook'
    # object has no attribute 'file_backend'" traceback
    ('test_cfg.type', 'ValLoop', r"test_cfg.type='ValLoop'; expected 'TestLoop'"),
    # before: "log_transitions row 10 has probabilities summing to 0.997054" (no key named)
    ('test_cfg.fp16', True, r'test_cfg.fp16=True; expected False'),
    # before: mmengine's "should be either all None or not None" printing the whole loader
    ('val_cfg', None, r'val_cfg = None but val_dataloader and val_evaluator given; expected'),
    ('test_cfg', None, r'test_cfg = None but test_dataloader and test_evaluator given'),
    # before: TypeError "hook should be an instance of Hook or dict, but got 0"; None: a bare
    # AssertionError in mmengine's register_default_hooks
    ('default_hooks.rng_state', 0, r'default_hooks.rng_state=0; expected a hook config'),
    ('default_hooks.rng_state', None, r'default_hooks.rng_state=None; expected a hook config '
                                      r'dict\(type=...\)$'),
    ('default_hooks.timer', 'abc', r"default_hooks.timer='abc'; expected .* or None \(off\)"),
    # before: "'int' object is not iterable", 'abc': "'str' object has no attribute 'get'"
    ('custom_hooks', 0, r'custom_hooks=0; expected a list of hook configs'),
    ('custom_hooks', 'abc', r"custom_hooks='abc'; expected a list of hook configs"),
    # before: "'<' not supported between instances of 'NoneType' and 'int'" (a model option
    # given None where the model's default is not None was skipped by the number check)
    ('model.input_dropout', None, r'model.input_dropout=None; expected a finite number'),
])
def test_runner_keys_of_another_kind_are_refused(option, value, expected):
    with pytest.raises(ValueError, match=expected):
        checked({option: value})


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_a_launcher_cfg_option_the_flag_would_replace_is_refused(tool):
    """Before: ``--cfg-options launcher=pytorch`` (or 'abc') ran one process, exit 0."""
    module = load_tool(tool)
    argv = [NIV_CONFIG, '--cfg-options', 'launcher=pytorch', '--work-dir', '/nonexistent/never']
    args = module.parse_args(argv)
    with pytest.raises(ValueError, match=r'--launcher none and --cfg-options launcher=pytorch '
                                         r'contradict each other'):
        module.load_config(args)


@pytest.mark.parametrize('value, expected', [
    # before: an overridden custom_imports was never imported, whatever it held (exit 0)
    (['vpn_no_such_module'], r'custom_imports: Failed to import vpn_no_such_module'),
    (0, r'custom_imports=.*expected dict\(imports='),
])
def test_a_custom_imports_override_is_imported_or_refused(value, expected):
    with pytest.raises(ValueError, match=expected):
        load_config(NIV_CONFIG, {'custom_imports.imports': value})


def test_valid_runner_keys_still_pass():
    checked({'resume': False, 'log_processor.window_size': 5, 'log_processor.by_epoch': True,
             'log_level': 'WARNING', 'visualizer.vis_backends': [], 'model.pkg.recount': True,
             'model.pkg.perturbations': [dict(type='DataFraction', fraction=0.5),
                                         dict(type='WeightNoise', sigma=0.1)]})
    load_config(NIV_CONFIG, {'custom_imports.imports': ['vpn_plugin.mm']})


def _checkpoint(trained_pkg: dict, pkg_ready: bool = True) -> dict:
    """A checkpoint as training writes one: its graph flag and its config text."""
    import torch
    from mmengine.config import Config
    text = Config(dict(model=dict(type='ViterbiPlanNet', pkg=trained_pkg))).pretty_text
    return dict(meta=dict(cfg=text), state_dict={'log_transitions': torch.zeros(2, 2),
                                                 'pkg_ready': torch.tensor(pkg_ready)})


TRAINED_PKG = dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
                   extra_datasets=[], perturbations=[], seed=0)


@pytest.mark.parametrize('given, expected', [
    # before: exit 0, the checkpoint's trained graph decoded (SR 12.59 as without the change),
    # logged as "the test uses the config's"
    (dict(perturbations=[dict(type='UniformGraph')]),
     r"perturbations: \[\] in training, \[\{'type': 'UniformGraph'\}\] here"),
    (dict(smoothing=1), r'smoothing: 0.0 in training, 1 here'),
    (dict(extra_datasets=['val_dataloader.dataset']), r'extra_datasets: \[\] in training'),
])
def test_a_checkpoint_graph_is_not_scored_as_another_configs_graph(given, expected):
    from vpn_plugin.engine.checkpoint import check_loaded_pkg
    checkpoint = _checkpoint(TRAINED_PKG)
    with pytest.raises(ValueError, match=r'ck.pth carries the PKG its training counted, and '
                                         r".*model.pkg asks for another graph \(" + expected):
        check_loaded_pkg(checkpoint, 'ck.pth', dict(pkg=dict(TRAINED_PKG, **given)))
    # counted again (recount), or a checkpoint without its graph: the config's graph is used
    check_loaded_pkg(checkpoint, 'ck.pth', dict(pkg=dict(TRAINED_PKG, recount=True, **given)))
    check_loaded_pkg(_checkpoint(TRAINED_PKG, pkg_ready=False), 'ck.pth',
                     dict(pkg=dict(TRAINED_PKG, **given)))


def test_the_same_graph_elsewhere_passes_the_pkg_check():
    """The seed decides no graph without a perturbation; the extra datasets' locations may
    move (another --data-root); 0 and 0.0 are one smoothing."""
    from vpn_plugin.engine.checkpoint import check_loaded_pkg
    extra = dict(type='PlanningDataset', data_root='/a/niv', window_file='w.json')
    check_loaded_pkg(_checkpoint(dict(TRAINED_PKG, extra_datasets=[extra])), 'ck.pth',
                     dict(pkg=dict(TRAINED_PKG, seed=3, smoothing=0,
                                   extra_datasets=[dict(extra, data_root='/b/niv')])))


def test_a_coin_file_mixing_training_and_testing_videos_is_refused(tmp_path):
    """Before: a record whose COIN "subset" says 'testing' inside the training file was read
    as a training video without a word (dataset_stats.py exit 0)."""
    import json
    from vpn_plugin.datasets.annotations import _iter_coin_records
    record = dict(recipe_type=0, annotation=[], subset='training')
    records = [{'a': dict(record, **{'class': 'T'})}, {'b': dict(record, subset='testing',
                                                                 **{'class': 'T'})}]
    path = tmp_path / 'coin_train.json'
    path.write_text(json.dumps(records))
    with pytest.raises(ValueError, match=r"coin_train.json: entry 1 \(vid b\): field \"subset\" "
                                         r"= 'testing' but entry 0 \(vid a\) says 'training'"):
        list(_iter_coin_records(path))
    path.write_text(json.dumps(records[:1]))
    assert [vid for _, vid, _ in _iter_coin_records(path)] == ['a']


@pytest.mark.parametrize('tool, flags, expected', [
    # before: the flag won, work_dir=/b never made, exit 0
    ('train', ['--work-dir', '/nonexistent/a'], r'--work-dir /nonexistent/a and --cfg-options '
                                                r'work_dir=/nonexistent/b contradict'),
    # before: a smoke run wrote to work_dirs/vpn_niv_t3_smoke, the option dropped, exit 0
    ('train', ['--smoke'], r'work_dir=/nonexistent/b is not read: a --smoke run writes to '
                           r'work_dirs/<config name>_smoke; give --work-dir /nonexistent/b'),
    ('test', ['--work-dir', '/nonexistent/a'], r'contradict each other'),
    # before: the test log went beside the checkpoint, the option dropped
    ('test', [str(REPO_ROOT / 'README.md')], r'is not read: the test writes beside its '
                                             r'checkpoint'),
])
def test_a_work_dir_option_a_flag_would_replace_is_refused(tool, flags, expected):
    module = load_tool(tool)
    argv = [NIV_CONFIG, *flags, '--cfg-options', 'work_dir=/nonexistent/b']
    with pytest.raises((SystemExit, ValueError), match=expected):
        if tool == 'train':
            module.main(argv)
        else:
            module.load_config(module.parse_args(argv))


def test_a_broken_link_as_feature_file_says_where_it_points(tmp_path):
    """Before: "feature file .../v.npy does not exist (nor v.npz)" although ls lists it."""
    from vpn_plugin.datasets.annotations import BadVideoError
    from vpn_plugin.datasets.features import require_feature_file
    link = tmp_path / 'v.npy'
    link.symlink_to(tmp_path / 'gone' / 'v.npy')
    with pytest.raises(BadVideoError, match=r'v.npy \(video v\) is a symbolic link to '
                                            r'.*gone/v.npy, which leads to no file'):
        require_feature_file(link, 'v')


@pytest.mark.parametrize('resume', [[], ['auto'], ['/nonexistent/other.pth']])
def test_resume_with_a_load_from_option_it_would_drop_is_refused(resume):
    """Before: --resume took the work dir's latest checkpoint and dropped load_from without a
    word (or, in an empty work dir, "holds no checkpoint to resume from" with load_from
    unmentioned)."""
    train = load_tool('train')
    argv = [NIV_CONFIG, '--resume', *resume, '--work-dir', '/nonexistent/never',
            '--cfg-options', 'load_from=/nonexistent/x.pth']
    with pytest.raises(SystemExit, match=r'--resume continues .*, and --cfg-options '
                                         r'load_from=/nonexistent/x.pth would be dropped'):
        train.load_config(train.parse_args(argv))


def test_training_a_model_without_parameters_says_to_test_it():
    """Before: "error: optimizer got an empty parameter list" (uniform_emissions --smoke)."""
    from mmaction.registry import MODELS
    train = load_tool('train')
    config = str(REPO_ROOT / 'configs/baselines/uniform_emissions_niv_t3.py')
    model = MODELS.build(load_config(config, {}).model)
    with pytest.raises(SystemExit, match=r'UniformEmissionPlanner has no trainable parameter: '
                                         r'nothing to train; evaluate it with tools/test.py'):
        train.require_trainable(model, config)

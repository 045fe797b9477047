"""Eleventh hostile pass, confirmation (issue 37), pass5: core math, the Python API, classes
built in Python and configs loaded before training. Each test fails on 90c6eb9 (the branch's
start; case ids of /tmp/pass5_log.md)."""
import pytest


# ------------------------------------------------ A71/A72: the resample floor and the level
# (the stats functions' floor is tested by test_hostile_pass14_pass4, which fixed it on main)
def test_report_table_floor_follows_its_level():
    from vpn_plugin.protocol.report import build_table
    with pytest.raises(ValueError, match=r'num_resamples=1000; expected at least 2000'):
        build_table([object()], level=0.999)


# ------------------------------------------------ B10 / B9: a perturbation of no known stage
def test_pkg_builder_refuses_a_perturbation_it_would_never_apply():
    """Before: PKGBuilder(perturbations=[a callable with stage='Graph']) built, and build()
    returned the unperturbed graph (neither stage matched); a plain function raised
    AttributeError: 'function' object has no attribute 'stage'."""
    from vpn_plugin.models.pkg_builder import GraphPerturbation, PKGBuilder

    class Typo:
        stage = 'Graph'

        def __call__(self, pkg, seed):
            return pkg

    for perturbation, stage in ((Typo(), "'Graph'"), (lambda pkg, seed: pkg, 'None')):
        with pytest.raises(ValueError, match=rf'model.pkg.perturbations\[0\] .* has '
                                             rf"stage={stage}; expected one of \('sequences', "
                                             r"'graph'\)"):
            PKGBuilder(perturbations=[perturbation])

    class Fine(GraphPerturbation):
        def __call__(self, pkg, seed):
            return pkg
    assert len(PKGBuilder(perturbations=[Fine(), dict(type='EdgeDropout', fraction=0.1)])
               .perturbations) == 2


# ------------------------------------------------ V1-V3, K9: variables the base already copied
ROOT = __import__('pathlib').Path(__file__).resolve().parents[1]


@pytest.mark.parametrize('line, kept', [
    ("observation = 'mean3'", "train_dataloader.dataset.observation='authors'"),
    ("window_policy = 'keep'", "train_dataloader.dataset.window_policy='authors'"),
    ('batch_size = 7', 'train_dataloader.batch_size=256')])
def test_a_child_file_setting_a_copied_variable_is_refused(tmp_path, line, kept):
    """Before: a child of configs/vpn_niv_t3.py that wrote observation = 'mean3' (or
    window_policy, batch_size) trained on the base's 'authors' observations (batch 256)
    without a word: the base had copied the variable into its loaders when it was read."""
    from vpn_plugin.data_paths import load_config
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py']\n{line}\n")
    with pytest.raises(ValueError, match=rf'child.py: {line.split()[0]} = .* changes the '
                                         rf'top-level variable only.*keep {kept}'):
        load_config(str(child))
    # the same value written where it lands loads
    key, value = line.split(' = ')
    place = 'dict(batch_size=7)' if key == 'batch_size' else f'dict(dataset=dict({line.replace(" = ", "=")}))'
    child.write_text(f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py']\n{line}\n" + ''.join(
        f'{split}_dataloader = {place}\n' for split in ('train', 'val', 'test')))
    assert load_config(str(child)).train_dataloader.get('batch_size') in (7, 256)


def test_cfg_options_batch_size_alone_is_refused():
    """Before: --cfg-options batch_size=7 trained with batch 256 (3 iterations an epoch)."""
    from vpn_plugin.data_paths import load_config
    with pytest.raises(ValueError, match=r'--cfg-options batch_size=7 changes the top-level '
                                         r'variable only.*train_dataloader.batch_size=256'):
        load_config(str(ROOT / 'configs/vpn_niv_t3.py'), {'batch_size': 7})


# ------------------------------------------------ K1, K26: a training that keeps no checkpoint
@pytest.mark.parametrize('options', [dict(interval=10, save_begin=1000),
                                     dict(interval=-1), dict(interval=600)])
def test_a_training_that_would_save_no_checkpoint_is_refused(options):
    """Before: --cfg-options default_hooks.checkpoint.save_begin=1000 (or interval=-1)
    save_last=False save_best=None trained 500 epochs, saved nothing, exit 0."""
    from types import SimpleNamespace

    from vpn_plugin.engine.checkpoint_hook import KillSafeCheckpointHook
    from vpn_plugin.runner import check_saves_a_checkpoint
    loop = SimpleNamespace(max_epochs=500)
    hook = KillSafeCheckpointHook(save_last=False, **options)
    with pytest.raises(ValueError, match=r'cfg.py: default_hooks.checkpoint saves no checkpoint '
                                         r'in train_cfg.max_epochs=500 epochs'):
        check_saves_a_checkpoint([hook], loop, True, 'cfg.py')
    for keeps in (KillSafeCheckpointHook(**options),  # save_last
                  KillSafeCheckpointHook(save_last=False, save_best='plan/success_rate', rule='greater',
                                         **options),
                  KillSafeCheckpointHook(save_last=False, interval=10, save_begin=500)):
        check_saves_a_checkpoint([keeps], loop, True, 'cfg.py')


# ------------------------------------------------ C2: a known key in another case
def test_a_top_level_key_in_capitals_is_refused(tmp_path):
    """Before: a child config with HORIZON = 4 trained T=3 without a word (only keys within
    difflib's 0.8 of a known one were named; 'HORIZON' vs 'horizon' scores 0)."""
    from vpn_plugin.data_paths import load_config
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py']\nHORIZON = 4\n")
    with pytest.raises(ValueError, match=r"child.py: top-level config key 'HORIZON' is unknown; "
                                         r"did you mean 'horizon'\?"):
        load_config(str(child))
    child.write_text(f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py']\n_HORIZON = 4\nsteps = 2\n")
    assert load_config(str(child)).horizon == 3  # helper variables stay free


# ------------------------------------------------ vague messages of config files (C7, B1, C11, C13, B6)
def test_config_files_that_cannot_be_read_are_named(tmp_path):
    """Before: a Latin-1 config: "'utf-8' codec can't decode byte 0xe9" (no file); the same
    base twice: mmengine's "Duplicate key is not allowed among bases" (no file); an empty
    YAML: AttributeError 'NoneType' object has no attribute 'get'; model = 'ViterbiPlanNet':
    AttributeError 'str' object has no attribute 'get'; a dataset dict(_delete_=True, ...):
    "error: data_root"."""
    from vpn_plugin.data_paths import load_config
    base = f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py']\n"
    latin = tmp_path / 'latin.py'
    latin.write_bytes(base.encode() + b'# caf\xe9\n')
    child = tmp_path / 'child.py'
    child.write_text("_base_ = ['./latin.py']\n")
    for path in (latin, child):
        with pytest.raises(ValueError, match=r"latin.py: line 2: byte b'\\xe9' is not UTF-8"):
            load_config(str(path))
    twice = tmp_path / 'twice.py'
    twice.write_text(f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py', '{ROOT}/configs/vpn_niv_t3.py']\n")
    with pytest.raises(ValueError, match=r'twice.py: its _base_ files .* set the same keys'):
        load_config(str(twice))
    empty = tmp_path / 'empty.yaml'
    empty.write_text('')
    with pytest.raises(ValueError, match=r'empty.yaml: holds NoneType .*expected a mapping'):
        load_config(str(empty))
    named = tmp_path / 'named.py'
    named.write_text(base + "model = 'ViterbiPlanNet'\n")
    with pytest.raises(ValueError, match=r"named.py: model = 'ViterbiPlanNet'; expected a model "
                                         'dict with a type'):
        load_config(str(named))


def test_a_dataset_config_without_its_required_options_names_them():
    from vpn_plugin.config_types import OptionsError
    from vpn_plugin.datasets.sources import source_windows
    with pytest.raises(OptionsError, match=r'PlanningDataset: data_root, taxonomy missing: '
                                           r'required options'):
        source_windows(dict(type='PlanningDataset', horizon=3))


# ------------------------------------------------ C24: miou_batch of samples without sample_idx
def test_planning_metric_keeps_the_given_order_of_samples_without_an_index():
    """Before: PlanningMetric sorted results by (sample_idx, gt, pred); samples without a
    sample_idx (all -1) were re-ordered by their ground truth, so the order-dependent
    miou_batch gave 83.33 where core.miou_batch of the same plans in the given order is 50."""
    import torch

    from vpn_plugin.core import miou_batch
    from vpn_plugin.evaluation.planning_metric import PlanningMetric
    pairs = (([0, 1], [0, 1]), ([2, 3], [2, 2]), ([0, 0], [1, 1]))
    metric = PlanningMetric(extra_metrics=['miou_batch'], miou_batch_size=2)
    for pred, gt in pairs:
        metric.process({}, [dict(pred_plan=torch.tensor(pred), gt_plan=torch.tensor(gt))])
    expected = miou_batch([p for p, _ in pairs], [g for _, g in pairs], 2)
    assert expected == 50.0
    assert metric.compute_metrics(metric.results)['miou_batch'] == expected
    indexed = PlanningMetric(extra_metrics=['miou_batch'], miou_batch_size=2)
    for index, (pred, gt) in reversed(list(enumerate(pairs))):  # a dataset's order restored
        indexed.process({}, [dict(sample_idx=index, pred_plan=torch.tensor(pred),
                                  gt_plan=torch.tensor(gt))])
    assert indexed.compute_metrics(indexed.results)['miou_batch'] == expected


# ------------------------------------------------ C6 / R17: an option at its default is no change
def test_an_option_given_at_its_default_is_not_a_change_from_training():
    """Before: a test (or init_planner) with --cfg-options model.dvl_layers=1 of a run whose
    config left dvl_layers out wrote changed_from_training ['model.dvl_layers: None in
    training, 1 here'] on a correct run; dvl_layers=2 said 'None in training' for the 1 used."""
    from mmengine.config import Config

    import vpn_plugin.mm  # noqa: F401  (registers the planners)
    from vpn_plugin.engine.checkpoint import model_option_differences
    trained = dict(type='ViterbiPlanNet', num_actions=48, num_tasks=5, horizon=3)
    text = Config(dict(model=trained)).pretty_text
    assert model_option_differences(text, dict(trained, dvl_layers=1)) == []
    assert model_option_differences(text, dict(trained, dvl_layers=2)) == [
        'model.dvl_layers: 1 in training, 2 here']


# ------------------------------------------------ D5: a top-level _delete_; E11: prefetch_factor
def test_a_top_level_delete_is_refused(tmp_path):
    """Before: a child config with `_delete_ = True` at the top trained the whole base config
    unchanged (mmengine reads _delete_ inside a dict only)."""
    from vpn_plugin.data_paths import load_config
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py']\n_delete_ = True\n")
    with pytest.raises(ValueError, match=r'child.py: a top-level _delete_ = True deletes nothing'):
        load_config(str(child))


def test_prefetch_factor_without_workers_names_the_keys():
    """Before: torch's 'prefetch_factor option could only be specified in multiprocessing'
    when the loader was built, naming no loader."""
    from vpn_plugin.runner import check_persistent_workers
    with pytest.raises(ValueError, match=r'cfg.py: train_dataloader.prefetch_factor=2 with '
                                         r'train_dataloader.num_workers=0'):
        check_persistent_workers('cfg.py: train_dataloader', dict(num_workers=0, prefetch_factor=2))
    check_persistent_workers('cfg.py: train_dataloader', dict(num_workers=2, prefetch_factor=2))


def test_randomness_without_a_seed_names_it():
    """Before: randomness = dict(_delete_=True) raised TypeError 'Runner.set_randomness()
    missing 1 required positional argument: seed' (a traceback)."""
    from mmengine.config import Config

    from vpn_plugin.runner import check_runner_options
    with pytest.raises(ValueError, match=r'cfg.py: randomness.seed is missing'):
        check_runner_options(Config(dict(randomness=dict(deterministic=False))), 'cfg.py')
    check_runner_options(Config(dict(randomness=dict(seed=None))), 'cfg.py')


def test_a_pair_of_bounded_values_says_the_bound():
    """Before: betas=[0.9, 1.0] was refused as 'expected a list of 2 values' (it is one)."""
    from vpn_plugin.data_paths import load_config
    with pytest.raises(ValueError, match=r'betas=\[0.9, 1.0\]; expected a list of 2 values '
                                         r'\(each a finite number >= 0 and < 1\)'):
        load_config(str(ROOT / 'configs/vpn_niv_t3.py'),
                    {'optim_wrapper.optimizer.betas': [0.9, 1.0]})


def test_a_loader_without_a_dataset_names_it():
    """Before: train_dataloader = dict(_delete_=True, batch_size=4) built the runner and
    failed in torch's sampler: TypeError: object of type 'NoneType' has no len()."""
    from mmengine.config import Config

    from vpn_plugin.runner import check_loader_datasets
    with pytest.raises(ValueError, match=r'cfg.py: train_dataloader.dataset is missing'):
        check_loader_datasets(Config(dict(train_dataloader=dict(batch_size=4))), 'cfg.py')
    check_loader_datasets(Config(dict(train_dataloader=dict(dataset=dict(type='X')))), 'cfg.py')


def test_load_config_refuses_an_empty_data_location():
    """Before: load_config(path, data_root='') used the config's data root without a word (an
    unset $DATA_ROOT in a script); the CLI flags already refused ''."""
    from vpn_plugin.data_paths import load_config
    for name in ('data_root', 'feature_dir'):
        with pytest.raises(ValueError, match=rf"load_config\(\) argument {name}=''; expected a "
                                             'folder path'):
            load_config(str(ROOT / 'configs/vpn_niv_t3.py'), **{name: ''})


# ------------------------------------------------ vague: A38, A64, D5
def test_numpy_horizon_meta_sequences_and_huge_ids():
    """Before: load_config(horizon=np.int64(4)) was refused as 'expected an integer >= 1';
    build_pkg of a meta tensor raised torch's "can't convert meta device type tensor to
    numpy" naming no sequence; planning_metrics of the id 2**70 said 'dtype object; expected
    integer action ids' for an integer."""
    import numpy as np
    import torch

    from vpn_plugin import core
    from vpn_plugin.data_paths import load_config
    cfg = load_config(str(ROOT / 'configs/vpn_niv_t3.py'), horizon=np.int64(4))
    assert cfg.horizon == 4 and type(cfg.horizon) is int
    with pytest.raises(ValueError, match=r'horizon = np.float64\(4.0\); expected an integer'):
        load_config(str(ROOT / 'configs/vpn_niv_t3.py'), horizon=np.float64(4.0))
    with pytest.raises(ValueError, match=r'sequence 0 is a tensor on the meta device'):
        core.build_pkg([torch.tensor([0, 1], device='meta')], 3)
    with pytest.raises(ValueError, match=r'pred holds action id 1180591620717411303424, beyond '
                                         r'int64'):
        core.planning_metrics([[2 ** 70, 1]], [[0, 1]])


# ------------------------------------------------ B C12: a helper of the bases set and unread
def test_a_child_setting_an_unread_base_helper_is_refused(tmp_path):
    """Before: a child of configs/vpn_niv_t3.py with dataset = 'crosstask' trained on NIV: the
    bases had used their own `dataset` helper when they were read."""
    from vpn_plugin.data_paths import load_config
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py']\ndataset = 'crosstask'\n")
    with pytest.raises(ValueError, match=r'child.py: dataset = \.\.\. sets a helper variable of '
                                         r'its base files'):
        load_config(str(child))
    child.write_text(f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py']\n"
                     "dataset = dict(type='PlanningDataset', observation='authors')\n"
                     'test_dataloader = dict(dataset=dataset)\n')  # read here: allowed
    assert load_config(str(child)).test_dataloader.dataset.observation == 'authors'


def test_a_yaml_child_setting_a_base_helper_is_refused(tmp_path):
    """A .yaml child's `dataset: crosstask` reaches no key either (found on this pass's own
    fix, which read .py files only)."""
    from vpn_plugin.data_paths import load_config
    child = tmp_path / 'child.yaml'
    child.write_text(f"_base_: ['{ROOT}/configs/vpn_niv_t3.py']\ndataset: crosstask\n")
    with pytest.raises(ValueError, match=r'child.yaml: dataset = \.\.\. sets a helper variable'):
        load_config(str(child))

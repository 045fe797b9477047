"""Configs: the horizon is set in one place (``horizon`` / ``test_horizon``, or ``--horizon``)
and written into the model and the datasets by ``vpn_plugin.data_paths.apply_horizon``; per-T
configs differ only by T; every protocol exists for CrossTask, NIV and COIN."""
import ast
import copy
import json
import re
from pathlib import Path

import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import DATASETS, MODELS, RUNNERS
from mmengine.config import Config
from vpn_plugin.data_paths import apply_horizon, load_config
from vpn_plugin.protocol.runner import expand_units, load_protocol

REPO = Path(__file__).resolve().parents[1]
DATASET_NAMES = ('crosstask', 'niv', 'coin')
PER_T_FAMILIES = [f'configs/vpn_{d}_t{{T}}.py' for d in DATASET_NAMES] + [
    f'configs/compact/compact_{d}_t{{T}}.py' for d in DATASET_NAMES] + [
    f'configs/selection/vpn_{d}_t{{T}}_authors.py' for d in DATASET_NAMES] + [
    f'configs/baselines/{m}_{d}_t{{T}}.py'
    for m in ('pkg_beam_search', 'pkg_beam_search_mlp', 'uniform_emissions', 'schema', 'pdpp')
    for d in DATASET_NAMES] + [
    # CEFITO's CrossTask T=3 has its own official recipe (a planner base of its own)
    f'configs/baselines/cefito_{d}_t{{T}}.py' for d in ('niv', 'coin')]


def horizons_of(cfg) -> dict:
    return dict(model=cfg.model.get('horizon'),
                **{split: cfg[f'{split}_dataloader'].dataset.horizon
                   for split in ('train', 'val', 'test')})


def top_level_names(path: Path) -> list:
    tree = ast.parse(path.read_text())
    return [target.id for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets]


@pytest.mark.parametrize('family', PER_T_FAMILIES)
def test_per_horizon_configs_differ_only_by_the_horizon(family):
    texts = {t: (REPO / family.format(T=t)).read_text() for t in (3, 4, 5, 6)}
    assert texts[3].count('horizon = 3') == 1
    generic = {re.sub(r'\b([Tt]=?){}\b|\b{}\b'.format(t, t), 'T', text)
               for t, text in texts.items() if 'dvl_layers' not in text}
    assert len(generic) == 1, f'{family}: the per-T files differ by more than T'
    names = top_level_names(REPO / family.format(T=4))
    assert names == ['_base_', 'horizon'], f'{family}: sets {names}, expected only the horizon'


def test_a_child_setting_only_the_horizon_builds_at_that_horizon_through_train_py(
        tiny_crosstask, tmp_path, monkeypatch):
    from test_compat import load_tool
    monkeypatch.chdir(tmp_path)
    train = load_tool('train')
    cfg = train.load_config(train.parse_args([str(REPO / 'configs/vpn_crosstask_t4.py')]))
    assert horizons_of(cfg) == dict(model=4, train=4, val=4, test=4)
    model = build_small_model(cfg)
    assert model.horizon == 4
    test_set = DATASETS.build(tiny_dataset(cfg.test_dataloader.dataset, tiny_crosstask))
    assert test_set.plans.shape[1] == 4
    overridden = train.load_config(train.parse_args(
        [str(REPO / 'configs/vpn_crosstask_t4.py'), '--horizon', '5']))
    assert horizons_of(overridden) == dict(model=5, train=5, val=5, test=5)


def test_planning_runner_from_cfg_applies_the_horizon(tiny_crosstask, tmp_path):
    cfg = Config.fromfile(str(REPO / 'configs/vpn_crosstask_t4.py'))  # not yet applied
    assert cfg.runner_type == 'PlanningRunner' and 'horizon' not in cfg.model
    small_runner_cfg(cfg, tiny_crosstask, tmp_path)
    runner = RUNNERS.build(cfg)
    assert runner.model.horizon == 4
    loader = runner.build_dataloader(runner._train_dataloader)
    assert loader.dataset.plans.shape[1] == 4


def test_cross_horizon_config_builds_model_t6_and_test_windows_t3(tiny_crosstask, tmp_path):
    path = REPO / 'configs/vpn_crosstask_t6_eval_t3.py'
    assert top_level_names(path) == ['_base_', 'test_horizon']
    cfg = load_config(path)
    assert horizons_of(cfg) == dict(model=6, train=6, val=6, test=3)
    assert cfg.model.cross_horizon == 'repeat_last'
    raw = Config.fromfile(str(path))
    small_runner_cfg(raw, tiny_crosstask, tmp_path)
    runner = RUNNERS.build(raw)
    assert runner.model.horizon == 6
    assert runner.build_dataloader(runner._test_dataloader).dataset.plans.shape[1] == 3


@pytest.mark.parametrize('dataset', DATASET_NAMES)
@pytest.mark.parametrize('test_horizon', (3, 4, 5))
def test_every_dataset_has_its_cross_horizon_configs(dataset, test_horizon):
    """configs/vpn_<dataset>_t6_eval_t{3,4,5}.py (issue 38: NIV had none): the T=6 model of
    vpn_<dataset>_t6.py with the authors' rule, tested on the T' windows."""
    path = REPO / f'configs/vpn_{dataset}_t6_eval_t{test_horizon}.py'
    assert top_level_names(path) == ['_base_', 'test_horizon']
    cfg = load_config(path)
    assert horizons_of(cfg) == dict(model=6, train=6, val=6, test=test_horizon)
    assert cfg.model.cross_horizon == 'repeat_last'
    trained = load_config(REPO / f'configs/vpn_{dataset}_t6.py')
    assert dict(cfg.model, cross_horizon=None) == trained.model
    assert cfg.train_dataloader == trained.train_dataloader
    assert cfg.test_dataloader.dataset == dict(trained.test_dataloader.dataset,
                                               horizon=test_horizon)


@pytest.mark.parametrize('dataset', DATASET_NAMES)
def test_the_cross_horizon_protocol_tests_as_its_eval_configs(dataset, monkeypatch):
    """Each T' row of the T=6 model in configs/protocol/cross_horizon_<dataset>.py is the test
    configs/vpn_<dataset>_t6_eval_t<T'>.py runs (model and test windows)."""
    from vpn_plugin.protocol.runner import expand_units
    monkeypatch.chdir(REPO)
    units = expand_units(load_protocol(f'configs/protocol/cross_horizon_{dataset}.py'),
                         seeds=[0])
    six = [unit for unit in units if unit.horizon == 6]
    assert len(six) == 1 and [s.horizon for s in six[0].tests] == [3, 4, 5]
    for spec in six[0].tests:
        row = load_config(spec.config, {**six[0].cfg_options, **spec.cfg_options},
                          test_horizon=spec.horizon)
        eval_config = load_config(REPO / f'configs/vpn_{dataset}_t6_eval_t{spec.horizon}.py')
        assert row.model == eval_config.model
        assert row.test_dataloader == eval_config.test_dataloader


def test_test_py_takes_the_horizon_from_one_option(tmp_path, monkeypatch):
    from test_compat import load_tool
    monkeypatch.chdir(tmp_path)
    test = load_tool('test')
    eval_t3 = str(REPO / 'configs/vpn_crosstask_t6_eval_t3.py')
    assert horizons_of(test.load_config(test.parse_args([eval_t3]))) == dict(
        model=6, train=6, val=6, test=3)
    moved = test.load_config(test.parse_args([eval_t3, '--cfg-options', 'test_horizon=4']))
    assert horizons_of(moved) == dict(model=6, train=6, val=6, test=4)
    plain = test.load_config(test.parse_args([str(REPO / 'configs/vpn_niv_t3.py'),
                                              '--horizon', '6']))
    assert horizons_of(plain) == dict(model=6, train=6, val=6, test=6)
    assert plain.test_dataloader.dataset.window_file == 'splits/test_T{horizon}.json'


def test_apply_horizon_is_idempotent_and_reaches_the_models_datasets():
    cfg = Config(dict(horizon=4, model=dict(type='LLMPlanner', train_dataset=dict(
        type='PlanningDataset', horizon=3), pkg=dict(extra_datasets=[dict(
            type='PlanningDataset', horizon=3)])),
        test_dataloader=dict(dataset=dict(type='PlanningDataset', horizon=3))))
    once = apply_horizon(copy.deepcopy(cfg))
    assert 'horizon' not in once.model  # LLMPlanner takes no horizon argument
    assert once.model.train_dataset.horizon == once.model.pkg.extra_datasets[0].horizon == 4
    assert once.test_dataloader.dataset.horizon == 4
    assert apply_horizon(copy.deepcopy(once)).to_dict() == once.to_dict()
    assert apply_horizon(Config(dict(model=dict(type='X')))).model == dict(type='X')


@pytest.mark.parametrize('value', [0, -2, 3.5, True, '4'])
def test_a_bad_horizon_is_a_clear_error(value):
    with pytest.raises(ValueError, match=rf"horizon = {re.escape(repr(value))}; expected an "
                                         'integer >= 1'):
        apply_horizon(Config(dict(horizon=value, model=dict(type='ViterbiPlanNet'))))


def test_derived_horizon_overrides_are_refused():
    with pytest.raises(ValueError, match=r'--cfg-options model.horizon: the horizon is set in '
                                         'one place; give horizon=T'):
        load_config(REPO / 'configs/vpn_crosstask_t3.py', {'model.horizon': 4})
    cfg = load_config(REPO / 'configs/vpn_crosstask_t3.py', {
        'horizon': 5, 'test_horizon': 4, 'model.cross_horizon': 'repeat_last'})
    assert horizons_of(cfg) == dict(model=5, train=5, val=5, test=4)
    # a test horizon the model cannot plan is refused before anything is built
    with pytest.raises(ValueError, match=r"vpn_crosstask_t3.py: test_horizon=4 with horizon=5: "
                                          r"horizon mismatch.*model.cross_horizon='repeat_last'"):
        load_config(REPO / 'configs/vpn_crosstask_t3.py', {'horizon': 5, 'test_horizon': 4})


@pytest.mark.parametrize('name', sorted({p.stem.rsplit('_', 1)[0] for p in
                                         (REPO / 'configs/protocol').glob('*_crosstask.py')}))
def test_every_protocol_exists_for_every_dataset_with_the_same_runs(name, monkeypatch):
    monkeypatch.chdir(REPO)
    expected = shape_of(expand_units(load_protocol(f'configs/protocol/{name}_crosstask.py')))
    # one union model is tested on each dataset: the three files share its results folder
    shared = name == 'dataset_independent_pkg'
    for dataset in ('niv', 'coin'):
        protocol = load_protocol(f'configs/protocol/{name}_{dataset}.py')
        assert protocol.dataset == dataset
        assert protocol.protocol == name if shared else protocol.protocol.endswith(f'_{dataset}')
        assert bool(protocol.get('requires')) == (dataset == 'coin' or shared)
        units = expand_units(protocol)
        assert shape_of(units, dataset) == expected, (name, dataset)
        assert all(Path(u.config).is_file() for u in units)


def test_coin_protocol_dry_runs_and_names_what_is_missing(monkeypatch, capsys):
    from test_compat import load_tool
    monkeypatch.chdir(REPO)
    run_protocol = load_tool('run_protocol')
    units = run_protocol.main(['configs/protocol/observations_coin.py', '--dry-run',
                               '--seeds', '0'])
    assert {u.config for u in units} == {'configs/vpn_coin_t6.py',
                                         'configs/baselines/schema_coin_t6.py'}
    err = capsys.readouterr().err
    assert 'needs: COIN features' in err and '--dataset coin' in err


def test_coin_protocol_run_stops_before_training_naming_the_missing_file(shared_data, tmp_path,
                                                                         monkeypatch):
    """(Reads the real COIN taxonomy: skipped without ../shared/data.)"""
    from vpn_plugin.protocol.runner import ProtocolRunner
    monkeypatch.chdir(REPO)
    protocol = load_protocol('configs/protocol/observations_coin.py')
    runner = ProtocolRunner(protocol, tmp_path, max_epochs=1,
                            data_paths=dict(feature_dir=str(tmp_path / 'no_features')))
    with pytest.raises(SystemExit, match=r'needs COIN features.*_coin_t6.py \(T=6, train\)'
                                         r'.*no_features does not exist.*--dataset coin'):
        runner.run(expand_units(protocol, seeds=[0]))
    assert not list(tmp_path.rglob('*.jsonl')) and not list(tmp_path.rglob('run.json'))


def shape_of(units, dataset='crosstask') -> list:
    """What a protocol runs, with the dataset name taken out of the config paths."""
    def generic(value):
        return json.dumps(value, sort_keys=True, default=str).replace(dataset, '<dataset>')
    return [(generic(u.slug), generic(u.config), u.horizon, u.seed, u.cfg_options, u.train,
             [(s.method, generic(s.config), s.horizon, generic(s.cfg_options))
              for s in u.tests]) for u in units]


def build_small_model(cfg):
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.text_embeddings, model_cfg.loss_weights = None, dict(state=0.0)
    return MODELS.build(model_cfg)


def tiny_dataset(dataset_cfg, tiny) -> dict:
    """``dataset_cfg`` on the tiny CrossTask subset (its horizon kept)."""
    return dict(tiny[f'{dataset_cfg.split}_dataset'], horizon=dataset_cfg.horizon,
                observation='mean3')


def small_runner_cfg(cfg, tiny, work_dir):
    cfg.work_dir = str(work_dir)
    cfg.model.update(text_embeddings=None, loss_weights=dict(state=0.0), feature_dim=512)
    for split in ('train', 'val', 'test'):
        loader = cfg[f'{split}_dataloader']
        loader.dataset = tiny_dataset(loader.dataset, tiny)
        loader.batch_size = 8

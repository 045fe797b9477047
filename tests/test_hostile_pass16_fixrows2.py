"""Session 11, fixrows2 (issue 37; closing10 "Noticed" and "Review"): a protocol test whose own
config has another horizon than the training's, old ``train_horizon: null`` rows beside their
replacements, true marker positions in the params figure, one walker of a config's ``_base_``
chain, PKGBuilder's defaults derived. Tests marked "fails on 72181f1" fail there (checked in
a worktree of it); the others guard behaviour that the change keeps."""
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from mmengine.config import Config

from test_hostile_pass15_fixrows import tool_refusal

ROOT = Path(__file__).resolve().parents[1]
UNIFORM_T6 = 'configs/baselines/uniform_emissions_niv_t6.py'
UNIFORM_T3 = 'configs/baselines/uniform_emissions_niv_t3.py'


def protocol_rows(tmp_path, run: dict, metrics=None):
    """(runner, unit, rows) of a one-seed NIV protocol of ``run`` (rows as the runner writes
    them, not run: no test is evaluated)."""
    from vpn_plugin.protocol.runner import ProtocolRunner, check_units, expand_units
    protocol = Config(dict(protocol='xh', dataset='niv', seeds=[0], runs=[run]))
    units = expand_units(protocol)
    check_units(units)
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=True)
    unit = units[0]
    return runner, unit, [runner.row_for(unit, spec, metrics=metrics or {'success_rate': 3.0},
                                         work_dir=runner.work_dir(unit) / f'test{i}')
                          for i, spec in enumerate(unit.tests)]


# ------------------------------------------- item 1: a test config of another horizon
@pytest.mark.parametrize('run', [
    dict(method='PKG + uniform emissions', train=False, config=UNIFORM_T6,
         tests=[dict(config=UNIFORM_T3)]),
    dict(method='ViterbiPlanNet', config='configs/vpn_niv_t6.py',
         tests=[dict(config='configs/vpn_niv_t3.py',
                     cfg_options={'model.cross_horizon': 'repeat_last'})]),
], ids=['untrained', 'trained'])
def test_a_test_config_of_another_horizon_writes_a_row_that_report_reads(
        tmp_path, monkeypatch, run):
    """closing10 noticed (passP), fails on 72181f1: a test entry with its own config of
    another horizon (the T=3 config tested under a T=6 run) ran (the model built at the run's
    horizon = 6, tested at 3), but its row named the T=3 config with train_horizon 6, and
    report.py / plots.py / keep_results.py refused the protocol's own row as "a row of another
    run or an edited one". The row now records how its config was built (settings.cfg_options
    horizon 6, test_horizon 3): train_horizon and horizon both true, and read."""
    from vpn_plugin.protocol.results import check_rows_match_configs
    monkeypatch.chdir(ROOT)
    _, _, (row,) = protocol_rows(tmp_path, run)
    assert (row.horizon, row.train_horizon) == (3, 6)
    assert row.settings['cfg_options'] == {**run['tests'][0].get('cfg_options', {}),
                                           'horizon': 6, 'test_horizon': 3}
    check_rows_match_configs([row])
    # an edited row (the same without the record of how its config was built) is refused still
    edited = replace(row, settings=dict(row.settings, cfg_options={
        k: v for k, v in row.settings['cfg_options'].items() if 'horizon' not in k}))
    with pytest.raises(ValueError, match='a row of another run or an edited one'):
        check_rows_match_configs([edited])


def test_rows_of_a_config_at_its_own_horizon_keep_their_identity(tmp_path, monkeypatch):
    """No false record: a test with the run's config, or with a config whose horizon is the
    run's (the cross-horizon configs configs/vpn_niv_t6_eval_t3.py), records no horizons in
    its settings, so the rows of every existing results file keep their identity (a resume
    finds them done)."""
    from vpn_plugin.protocol.results import check_rows_match_configs
    monkeypatch.chdir(ROOT)
    _, _, rows = protocol_rows(tmp_path, dict(
        method='ViterbiPlanNet', config='configs/vpn_niv_t6.py',
        tests=[dict(), dict(method='x3', horizon=3,
                            cfg_options={'model.cross_horizon': 'repeat_last'}),
               dict(method='e3', config='configs/vpn_niv_t6_eval_t3.py')]))
    assert [(r.horizon, r.train_horizon) for r in rows] == [(6, 6), (3, 6), (3, 6)]
    assert [r.settings['cfg_options'] for r in rows] == [
        {}, {'model.cross_horizon': 'repeat_last'}, {}]
    check_rows_match_configs(rows)


@pytest.mark.parametrize('run, expected', [
    (dict(method='VPN', config='configs/vpn_niv_t6.py', tests=[dict(config='configs/vpn_niv_t3.py')]),
     "test_horizon=3 with horizon=6: horizon mismatch: the data has T=3 but the model was built "
     "for horizon=6; a model is evaluated at a shorter T with model.cross_horizon='repeat_last'"),
    (dict(method='VPN', config='configs/vpn_niv_t3.py', tests=[dict(config='configs/vpn_niv_t6.py')]),
     'test_horizon=6 with horizon=3: horizon mismatch: the data has T=6 but the model was built '
     'for horizon=3'),
    (dict(method='SCHEMA', config='configs/baselines/schema_niv_t3.py',
          tests=[dict(config='configs/baselines/schema_niv_t6.py')]),
     'horizon=3; SCHEMA plans only the horizon it was built for: train and test a model with '
     'horizon=6'),
], ids=['vpn-no-rule', 'vpn-longer', 'schema'])
def test_a_test_config_of_a_horizon_the_model_cannot_plan_is_refused_before_running(
        tmp_path, monkeypatch, run, expected):
    """Where the other horizon is no meaningful test (a model whose steps are its horizon's:
    VPN at a longer T, or at a shorter one without a rule; SCHEMA at any other T), the
    protocol refuses before anything runs, naming the config, both horizons and the rule."""
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError) as refused:
        protocol_rows(tmp_path, run)
    assert expected in ' '.join(str(refused.value).split())


# ------------------------------------------- item 2: old null rows beside their replacement
def _old_and_new(tmp_path, monkeypatch):
    """A results file as an older runner's resume left it: the untrained planner's T=3 row
    written with train_horizon null, then the same test's row with train_horizon 6."""
    from vpn_plugin.protocol.results import append_result
    monkeypatch.chdir(ROOT)
    runner, unit, rows = protocol_rows(tmp_path, dict(
        method='PKG + uniform emissions', train=False, config=UNIFORM_T6,
        tests=[dict(horizon=3), dict(horizon=6)]))
    new, own = rows
    old = replace(new, train_horizon=None)
    for row in (old, own):
        append_result(runner.results_file, row)
    return runner, old, new, own


def test_a_resumed_protocol_replaces_the_old_null_row(tmp_path, monkeypatch):
    """closing10 noticed, fails on 72181f1: a resume tested the untrained planner again and
    appended its row (train_horizon 6) beside the old one (null), which stayed; report.py then
    refused the file. Now the new row takes the old one's place in the same write; the row of
    the test at its own horizon (null too) stays."""
    from vpn_plugin.protocol.results import append_result, read_results
    runner, old, new, own = _old_and_new(tmp_path, monkeypatch)
    assert append_result(runner.results_file, new)
    kept = read_results(runner.results_file)
    assert [(r.horizon, r.train_horizon) for r in kept] == [(6, None), (3, 6)]


def test_a_file_holding_both_rows_is_cleaned_by_the_next_run_and_named_by_report(
        tmp_path, monkeypatch, capsys):
    """closing10 noticed, fails on 72181f1: a file that already holds both rows (the older
    runner's resume appended the new one) is refused by report.py naming both lines and what to
    do; run_protocol.py removes the old row before it runs, saying which."""
    from vpn_plugin.protocol.results import append_result, read_results
    runner, old, new, own = _old_and_new(tmp_path, monkeypatch)
    with runner.results_file.open('a') as handle:  # as the older runner's append left it
        from vpn_plugin.protocol.results import results_text
        handle.write(results_text([new], runner.results_file))
    refusal = tool_refusal('report', [str(runner.results_file)])
    assert f'{runner.results_file}:1: row of' in refusal
    assert (f'a row written with train_horizon: null by tools/run_protocol.py before '
            f'2026-11-28, which the row of the same test {runner.results_file}:3 '
            '(train_horizon: 6) replaces') in refusal
    capsys.readouterr()
    runner.drop_replaced_rows()
    said = capsys.readouterr()
    assert (f'removed 1 row(s) written with train_horizon: null by an older runner, each '
            'replaced by the row of the same test that says its training horizon: '
            f'{runner.results_file}:1') in said.out + said.err
    kept = read_results(runner.results_file)
    assert [(r.horizon, r.train_horizon) for r in kept] == [(6, None), (3, 6)]
    assert not append_result(runner.results_file, new)  # done: nothing doubled


def test_no_row_of_another_test_is_removed(tmp_path, monkeypatch):
    """No false removal (fails on 72181f1 only for want of drop_replaced_rows): a null row of the same identity but another test folder (another
    unit's test, e.g. the planner's run at T=3 tested at its own horizon) and a row that is
    no null row stay."""
    from vpn_plugin.protocol.results import append_result, drop_replaced_rows, read_results
    runner, old, new, own = _old_and_new(tmp_path, monkeypatch)
    path = runner.results_file
    path.write_text('')
    other = replace(old, work_dir=str(Path(old.work_dir).parent / 'elsewhere'))
    for row in (other, own, new):
        append_result(path, row)
    assert drop_replaced_rows(path) == []
    assert len(read_results(path)) == 3


# ------------------------------------------- item 3: params figure markers at their counts
def test_markers_stay_at_their_counts_unless_they_coincide():
    """closing10 noticed (passP P21), fails on 72181f1: markers of one parameter count were
    spread apart even far apart in y (ViterbiPlanNet 26 % and the Base Model 1 %, 5.55M each:
    docs/figures/params_vs_sr_synthetic_t3), and counts 5 % apart too; now each marker is at its
    true count unless it would hide another's (one count or nearly, overlapping in y), and the
    note names those and their counts."""
    from vpn_plugin.protocol import plots
    points = {'VPN': (5_549_602, 26.0, 25.0, 27.0), 'Base': (5_549_602, 1.0, 0.5, 1.5),
              'Near': (5_830_000, 1.2, None, None), 'MLP': (860_000, 30.0, 29.0, 31.0)}
    drawn, spread = plots.dodged_positions(points, log=True, y_room=0.5)
    assert spread == [['Base', 'Near']]  # VPN is 25 points above: at its count
    assert drawn['VPN'] == points['VPN'][0] and drawn['MLP'] == points['MLP'][0]
    assert np.log10(drawn['Near']) - np.log10(drawn['Base']) == pytest.approx(plots.DODGE_DECADES)
    assert drawn['Base'] < points['Base'][0] < points['Near'][0] < drawn['Near']  # count order
    assert ' '.join(plots.dodged_note(points, spread).split()) == (
        'Base and Near (5.55M, 5.83M parameters): ' + plots.DODGED_NOTE)
    far = {'VPN': points['VPN'], 'Base': points['Base']}
    assert plots.dodged_positions(far, log=True, y_room=0.5) == (
        {'VPN': 5_549_602, 'Base': 5_549_602}, [])
    assert plots.dodged_note(far, []) == ''


# ------------------------------------------- item 4: one walker of a config's _base_ chain
def test_one_walker_serves_every_reader_of_a_base_chain():
    """closing10 review, fails on 72181f1: data_paths walked a config's _base_ chain three
    ways (_chain_files, _readable_chain, _literal_chain); now config_chain, with mmengine's
    reading of _base_ (evaluated) or the literal one (no code run)."""
    from vpn_plugin import data_paths
    assert not any(hasattr(data_paths, name) for name in (
        '_chain_files', '_readable_chain', '_literal_chain'))
    chain = data_paths.config_chain(ROOT / 'configs/vpn_niv_t6_eval_t3.py')
    assert chain[0] == ROOT / 'configs/vpn_niv_t6_eval_t3.py'
    assert ROOT / 'configs/vpn_niv_t6.py' in chain
    assert chain == data_paths.config_chain(ROOT / 'configs/vpn_niv_t6_eval_t3.py',
                                            literal=True)


def computed_base_config(tmp_path) -> Path:
    """A user's config whose _base_ is built at run time (configs/vpn_niv_t3.py), at T=6."""
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = [{str(ROOT / 'configs')!r} + '/vpn_niv_t3.py']\nhorizon = 6\n")
    return child


def test_a_base_built_at_run_time_is_read_where_mmengine_reads_the_config(tmp_path):
    """The decision, a guard (passes on 72181f1 too): a user's config whose _base_ is built at
    run time is loaded by mmengine, so its chain is walked with mmengine's reading of _base_:
    the base's copied dataset horizon (3 under the child's horizon = 6) is the base's own, not
    a contradiction. A literal-only walk (tried: config_chain(..., literal=True) for every
    caller) missed the base and refused this valid config ("train_dataloader.dataset.horizon=3
    contradicts horizon=6"): the two readers stay, one walker."""
    from vpn_plugin.data_paths import load_config
    cfg = load_config(computed_base_config(tmp_path))
    assert cfg.horizon == 6 and cfg.train_dataloader.dataset.horizon == 6


def test_the_literal_walk_runs_no_code_of_a_computed_base(tmp_path):
    """fails on 72181f1 (no config_chain there): mmengine's reading follows the computed
    base; the literal one, for a config that may be someone else's (read_config_safely),
    runs no code and does not follow it."""
    from vpn_plugin.data_paths import config_chain
    child = computed_base_config(tmp_path)
    assert ROOT / 'configs/vpn_niv_t3.py' in config_chain(child)
    # since passC s14 the literal subset computes `+` of texts (no code run) and follows it;
    # a base built by a call is not followed
    assert config_chain(child, literal=True) == config_chain(child)
    child.write_text(f"_base_ = [str({str(ROOT / 'configs/vpn_niv_t3.py')!r})]\nhorizon = 6\n")
    assert config_chain(child, literal=True) == [child]


def test_pkg_defaults_are_pkg_builders_and_the_literal_they_replace():
    """closing10 review, fails on 72181f1 (no pkg_defaults there; its values are the literal
    PKG_DEFAULTS'): checkpoint's PKG defaults are derived from PKGBuilder's
    signature, with the values of the literal they replace (recount left out, sequences as
    lists: a config's extra_datasets=[] is the default)."""
    from vpn_plugin.engine.checkpoint import pkg_defaults
    assert pkg_defaults() == dict(count_mode='window', smoothing=0.0, union='pool',
                                  extra_datasets=[], perturbations=[], seed=0)
    assert list(pkg_defaults()) == ['count_mode', 'smoothing', 'union', 'extra_datasets',
                                    'perturbations', 'seed']  # the order messages name them
    pkg_defaults()['extra_datasets'].append('x')
    assert pkg_defaults()['extra_datasets'] == []


def test_test_metrics_name_the_test_and_training_horizons():
    """closing10 noticed (item 1, test.py side), fails on 72181f1: test_metrics.json said
    neither horizon, so a cross-horizon test's metrics (configs/vpn_niv_t6_eval_t3.py: a model
    of T=6 on the T=3 windows) read as a plain test. test.py now writes ``horizon`` (the test
    windows') and ``train_horizon`` (the model's, which a checkpoint's recorded training
    horizon must equal); a model without a horizon writes neither."""
    from types import SimpleNamespace
    import vpn_plugin.mm  # noqa: F401
    from mmaction.registry import MODELS
    from tool_modules import load_tool
    tool = load_tool('test')
    model = MODELS.build(dict(type='UniformEmissionPlanner', num_actions=4, horizon=6))
    runner = SimpleNamespace(model=model, test_dataloader=SimpleNamespace(
        dataset=SimpleNamespace(horizon=3, window_counts={})))
    notes = tool.test_notes(runner)
    assert (notes['horizon'], notes['train_horizon']) == (3, 6)
    assert tool.tested_horizons(SimpleNamespace(), runner.test_dataloader.dataset) == {}


def test_a_checkpoint_tested_with_a_config_of_another_horizon_is_told_the_cross_horizon_way():
    """closing10 noticed (item 1, test.py side), fails on 72181f1: tools/test.py with a config
    of another horizon than the checkpoint's (configs/vpn_niv_t3.py for a T=6 checkpoint) stays
    refused, since the model is built for T=3 (a model whose steps are its horizon's: not the
    trained one); the refusal now says how to test it on T=3 windows."""
    import vpn_plugin.mm  # noqa: F401
    from mmaction.registry import MODELS
    from vpn_plugin.engine.checkpoint import CheckpointMismatchError, load_weights
    model = MODELS.build(dict(type='UniformEmissionPlanner', num_actions=4, horizon=3))
    checkpoint = {'state_dict': model.state_dict(), 'meta': {'dataset_meta': {'horizon': 6}}}
    with pytest.raises(CheckpointMismatchError) as refused:
        load_weights(model, checkpoint, 't6.pth')
    assert ("horizon=6 in the checkpoint, 3 in the config's model (a test of it on T=3 "
            'windows: the config it was trained with and test_horizon=3, e.g. --cfg-options '
            'test_horizon=3, as configs/vpn_niv_t6_eval_t3.py does)') in str(refused.value)

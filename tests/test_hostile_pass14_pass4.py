"""Eleventh hostile pass, the confirmation pass (issue 37), protocol and everything after
training (pass4): each test fails on main 90c6eb9 (case ids of /tmp/pass4_log.md)."""
import json
from pathlib import Path

import pytest

from tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[1]
T3 = ROOT / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'
T6 = ROOT / 'docs' / 'results_data' / 'main_t6_niv.jsonl'


def edited_rows(tmp_path, source: Path, name: str, edit, which=lambda row: True) -> Path:
    """A copy of a kept results file with ``edit(row)`` applied to the rows ``which`` picks."""
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    for row in rows:
        if which(row):
            edit(row)
            row['per_sample_file'] = ''
    path = tmp_path / name
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return path


def trained_at_6_tested_at_3(row):
    row.update(horizon=3, train_horizon=6, config='configs/vpn_niv_t6_eval_t3.py')


def test_report_names_rows_trained_at_another_horizon_without_a_rename(tmp_path, capsys):
    """R14 / R15: rows trained at T=6 and tested at T=3 under a plain method name were shown as
    plain T=3 cells (nothing in the table said T=6); the '(train T=6)' rule held only for
    --rename."""
    path = edited_rows(tmp_path, T6, 'cross.jsonl', trained_at_6_tested_at_3)
    load_tool('report').main([str(path), '--metrics', 'success_rate'])
    table = capsys.readouterr().out
    assert '| ViterbiPlanNet (train T=6)' in table
    assert '| SCHEMA w/ PKG (train T=6)' in table
    # the plain names still choose the rows and the improvement row
    load_tool('report').main([str(path), '--metrics', 'success_rate', '--methods',
                              'ViterbiPlanNet', 'Base Model', '--ours', 'ViterbiPlanNet',
                              '--reference', 'Base Model'])
    table = capsys.readouterr().out
    assert 'Δ: ViterbiPlanNet (train T=6) minus Base Model (train T=6)' in table


def test_a_rename_holding_another_horizon_keeps_the_training_horizon(tmp_path, capsys):
    """R18: 'VPN (T=60 ablation)' held the text 'T=6', so a row trained at T=6 lost its
    '(train T=6)'."""
    path = edited_rows(tmp_path, T6, 'cross.jsonl', trained_at_6_tested_at_3)
    load_tool('report').main([str(path), '--metrics', 'success_rate', '--rename',
                              'ViterbiPlanNet=VPN (T=60 ablation)', 'Base Model=Base (T=6)'])
    table = capsys.readouterr().out
    assert '| VPN (T=60 ablation) (train T=6)' in table
    assert '| Base (T=6)' in table and 'Base (T=6) (train' not in table


def test_same_horizon_rows_keep_their_names(capsys):
    """No mark on rows trained at their test horizon (the kept docs table is unchanged)."""
    load_tool('report').main([str(T3), '--metrics', 'success_rate'])
    assert 'train T=' not in capsys.readouterr().out


@pytest.mark.parametrize('edit, expected', [
    (lambda row: row.update(dataset='coin'), "whose test data is 'niv', but the row says "
                                             "dataset='coin'"),
    (lambda row: row.update(horizon=3, train_horizon=3), 'whose horizon = 6, but the row says '
                                                         'train_horizon=3')])
@pytest.mark.parametrize('tool', ['plots', 'keep_results'])
def test_plots_and_keep_results_refuse_rows_that_contradict_their_config(tmp_path, edit,
                                                                        expected, tool):
    """P1b / P2b / K2 / K3: report.py refused a row whose dataset or horizon contradicts the
    config it names; plots.py drew it (with --dataset / --horizon) and keep_results.py
    archived it, exit 0."""
    path = edited_rows(tmp_path, T6, 'edited.jsonl', edit,
                       lambda row: row['method'] == 'ViterbiPlanNet')
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    vpn = next(row for row in rows if row['method'] == 'ViterbiPlanNet')
    argv = (['params', str(path), '--dataset', vpn['dataset'], '--horizon',
             str(vpn['horizon']), '--methods', 'ViterbiPlanNet', '--out', str(tmp_path / 'f')]
            if tool == 'plots' else [str(path), '--out', str(tmp_path / 'kept.jsonl')])
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main(argv)
    assert expected in str(stopped.value)
    assert not list(tmp_path.glob('f.*')) and not (tmp_path / 'kept.jsonl').exists()


def test_figures_mark_caveats_and_test_set_graphs_as_tables_do(tmp_path):
    """P3 / P4b: a figure of rows whose test recorded caveats (options changed from training,
    not compared, feature scale, the true task given) or a test-set PKG drew them as plain
    points; report.py marks each (♯ ♭ ≈ ⋆ §)."""
    from vpn_plugin.protocol.plots import Marks
    from vpn_plugin.protocol.results import read_results
    caveats = {'changed_from_training': ['model.decode: viterbi; argmax'],
               'not_compared': 'feature statistics', 'feature_scale': 'x10',
               'task_source': 'ground_truth'}

    def edit(row):
        row['caveats'] = caveats
        row['pkg_source'] = 'test-set PKG'
    path = edited_rows(tmp_path, T3, 'caveats.jsonl', edit,
                       lambda row: row['method'] == 'ViterbiPlanNet')
    marks = Marks.of(read_results(path))
    assert marks.label('ViterbiPlanNet').endswith('♯♭≈⋆§')
    assert marks.label('Base Model') == 'Base Model†‖'
    notes = marks.notes().replace('\n', ' ')
    for words in ('♯ options changed from training', '♭ training facts not recorded',
                  '≈ features of another scale', '⋆ true task given', '§ test-set PKG'):
        assert words in notes
    plain = Marks.of(read_results(T3))
    assert '♯' not in plain.notes() and '§' not in plain.notes()


def test_a_row_of_egoper_under_a_crosstask_config_is_refused(tmp_path):
    """R4: a row saying dataset 'egoper' under configs/vpn_crosstask_t3.py (test data
    CrossTask) was not compared (only crosstask / niv / coin rows were): an 'egoper' column of
    CrossTask runs, exit 0."""
    path = edited_rows(tmp_path, T3, 'egoper.jsonl', lambda row: row.update(dataset='egoper'),
                       lambda row: row['method'] == 'ViterbiPlanNet')
    with pytest.raises(SystemExit) as stopped:
        load_tool('report').main([str(path)])
    assert "whose test data is 'crosstask', but the row says dataset='egoper'" in \
        str(stopped.value)


def test_a_cross_horizon_test_is_no_caveat_of_its_own_row():
    """X7: every row of a correct cross_horizon_niv run (trained T=6, tested T=3/4/5) carried
    changed_from_training 'test_dataloader.dataset.horizon: 6 in training, 3 here' and
    report.py marked it ♯: a false alarm, the horizon being the protocol's own test setting
    (in the row's horizon, train_horizon and name). Another changed option is still named."""
    import types

    import torch

    from vpn_plugin.protocol.runner import (TestSpec, TrainUnit, declared_test_options,
                                            test_caveats)
    unit = TrainUnit(slug='vpn', config='configs/vpn_niv_t6.py', horizon=6, seed=0,
                     cfg_options={}, variant={}, train=True, tests=[])
    runner = types.SimpleNamespace(model=torch.nn.Linear(1, 1), not_compared=[],
                                   changed_from_training=[
                                       'test_dataloader.dataset.horizon: 6 in training, 3 here',
                                       "model.decode: 'dvl_viterbi' in training, 'viterbi' here"])
    cross = TestSpec(method='ViterbiPlanNet (train T=6)', config=unit.config, horizon=3)
    assert test_caveats(runner, declared=declared_test_options(unit, cross)) == {
        'changed_from_training': ["model.decode: 'dvl_viterbi' in training, 'viterbi' here"]}
    same = TestSpec(method='ViterbiPlanNet', config=unit.config, horizon=6)
    assert len(test_caveats(runner, declared=declared_test_options(unit, same))[
        'changed_from_training']) == 2


@pytest.mark.parametrize('level, floor', [(0.95, 40), (0.99, 200)])
def test_the_resample_floor_follows_the_level(level, floor):
    """S1 / S2: bootstrap_ci(scores, 20, level=0.99) gave (24.8, 21.49, 28.0): with 20
    resampled means the 0.5 % and 99.5 % ends are the two extreme means, the very defect the
    floor of 20 stops at 90 %. The floor is now 2 / (1 - level) (20 at 90 %, unchanged)."""
    from vpn_plugin.core import stats
    scores = [20.0, 25.0, 30.0, 22.0, 27.0]
    for call in (lambda k: stats.bootstrap_ci(scores, k, level=level),
                 lambda k: stats.seed_interval(scores, k, level=level),
                 lambda k: stats.bootstrap_difference(scores, scores[::-1], k, level=level)):
        with pytest.raises(ValueError, match=f'expected at least {floor} '):
            call(floor - 1)
        call(floor)
    stats.bootstrap_ci(scores, 20, level=0.90)


def test_finished_rows_of_an_edited_config_are_not_done(tmp_path):
    """X8: a finished smoke protocol rerun after its method config was edited (model.dropout
    0.9 added) said "1 runs, 1 already finished", exit 0, the old config's row standing for
    the edited one (and with the row deleted, the old training was tested again)."""
    from mmengine.config import Config
    from vpn_plugin.protocol.runner import (ProtocolRunner, claim_work_dir, expand_units,
                                            with_stages)
    config = tmp_path / 'my_vpn_niv_t3.py'
    config.write_text(f"_base_ = ['{ROOT}/configs/vpn_niv_t3.py']\n")
    protocol = Config(dict(protocol='myproto', dataset='niv', seeds=[0], horizons=[3],
                           runs=[dict(method='VPN', config=str(config), horizons=[3])]))
    units = expand_units(protocol, seeds=[0], horizons=[3], methods=['VPN'])
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=True)
    (unit,) = with_stages(units)
    claim_work_dir(runner.work_dir(unit), runner.identity(unit))
    runner.check_done_configs(units)  # the same config: done
    claim_work_dir(runner.work_dir(unit), runner.identity(unit))
    config.write_text(config.read_text() + 'model = dict(dropout=0.9)\n')
    with pytest.raises(ValueError, match=r'my_vpn_niv_t3.py changed since .* ran it \(config '
                                         r'digest [0-9a-f]{16} there, [0-9a-f]{16} now'):
        runner.check_done_configs(units)
    with pytest.raises(ValueError, match=r"holds a run made with other settings \("
                                         r"config_digest: '[0-9a-f]{16}' there"):
        claim_work_dir(runner.work_dir(unit), runner.identity(unit))


def test_build_table_names_rows_trained_at_another_horizon(tmp_path):
    """M14: the Python API (build_table) showed rows trained at T=6 and tested at T=3 under
    their plain names; --methods / --ours / --reference given by those names still work."""
    from vpn_plugin.protocol.report import build_table
    from vpn_plugin.protocol.results import read_results
    rows = read_results(edited_rows(tmp_path, T6, 'cross.jsonl', trained_at_6_tested_at_3))
    assert build_table(rows, ['success_rate']).methods[0] == 'ViterbiPlanNet (train T=6)'
    table = build_table(rows, ['success_rate'], methods=['ViterbiPlanNet', 'Base Model'],
                        ours='ViterbiPlanNet', reference='Base Model')
    assert table.methods == ['ViterbiPlanNet (train T=6)', 'Base Model (train T=6)']


def test_a_protocol_results_file_of_other_rows_or_a_link_is_refused(tmp_path):
    """X10 / L6b: a protocol's results file that was a symbolic link to another protocol's
    file got its row appended there (cross_horizon_niv's file then held a standard_niv row),
    and one holding an llm_eval.py row (--out into it) was read as this protocol's, exit 0."""
    from mmengine.config import Config
    from vpn_plugin.protocol.results import ResultRow, append_result
    from vpn_plugin.protocol.runner import ProtocolRunner
    protocol = Config.fromfile(ROOT / 'configs/protocol/standard_niv.py')
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=True)
    runner.root.mkdir(parents=True)
    other = tmp_path / 'cross.jsonl'
    append_result(other, ResultRow('ViterbiPlanNet (train T=6)', 0, 3, {'success_rate': 1.0},
                                   protocol='cross_horizon_niv'))
    runner.results_file.symlink_to(other)
    with pytest.raises(ValueError, match=r'results_smoke.jsonl is a symbolic link to .*cross'):
        runner.done_keys()
    runner.results_file.unlink()
    append_result(runner.results_file, ResultRow('ViterbiPlanNet', 0, 3, {'success_rate': 1.0},
                                                 protocol=runner.protocol))
    assert len(runner.done_keys()) == 1
    append_result(runner.results_file, ResultRow('fake [oracle first/last]', 0, 3,
                                                 {'success_rate': 1.0}, protocol='llm'))
    with pytest.raises(ValueError, match=r"holds rows of another protocol than 'standard_niv': "
                                         r"'fake \[oracle first/last\]' \(protocol 'llm'\)"):
        runner.done_keys()


def test_a_row_whose_config_does_not_load_is_named(tmp_path):
    """R7 / R11: a row whose settings.cfg_options do not merge into its config ('horizon.x'
    onto an integer) ended report.py in mmengine's TypeError traceback naming no row."""
    def edit(row):
        row['settings']['cfg_options']['horizon.x'] = 1
    path = edited_rows(tmp_path, T3, 'bad.jsonl', edit,
                       lambda row: row['method'] == 'ViterbiPlanNet')
    with pytest.raises(SystemExit) as stopped:
        load_tool('report').main([str(path)])
    assert ("row of 'ViterbiPlanNet' (seed 0, dataset 'crosstask', T=3, train_horizon=3) names "
            "config configs/vpn_crosstask_t3.py (with its settings.cfg_options") in \
        str(stopped.value)
    assert 'which does not load to compare the row with it: TypeError' in str(stopped.value)


def test_status_of_a_finished_unit_whose_rows_are_missing(tmp_path):
    """V4: with the results file of a finished smoke run deleted (unit_state.json 'done'),
    --status said 'its process ended before the unit finished (killed or interrupted)'."""
    from mmengine.config import Config
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    from vpn_plugin.protocol.status import unit_statuses
    protocol = Config.fromfile(ROOT / 'configs/protocol/standard_niv.py')
    units = expand_units(protocol, seeds=[0], horizons=[3], methods=['ViterbiPlanNet'])
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=True)
    work_dir = Path(runner.work_dir(units[0]))
    work_dir.mkdir(parents=True)
    (work_dir / 'unit_state.json').write_text(json.dumps(
        dict(state='done', started=1.0, ended=2.0, pid=1, host='vm', attempts=1)))
    (status,) = unit_statuses(runner, units, queue=lambda jobs: {})
    assert status.state == 'interrupted'
    assert 'its run finished, but its rows are not in' in status.why
    assert 'killed' not in status.why

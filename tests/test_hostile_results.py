"""Results files as hostile users produce them (issue 25, items 3 and 4): concurrent writers
never lose or double a row; the report refuses rows it must not pool, impossible metric
values, unknown metric names, rows missing a metric and ``seed: true``."""
import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from vpn_plugin.protocol.results import ResultRow, append_result, read_results, replace_result
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
FORK = multiprocessing.get_context('fork')  # real processes, without re-importing mmaction


def run_processes(target, arguments) -> None:
    processes = [FORK.Process(target=target, args=args) for args in arguments]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0, f'a writer failed (exit code {process.exitcode})'


def write_rows(path, writer: int, count: int) -> None:
    """What each llm_eval.py run does at its end: replace its own row in the shared file."""
    for seed in range(count):
        replace_result(path, ResultRow(f'LLM {writer}', seed, 3, {'success_rate': 1.0 * seed},
                                       protocol='llm'))


def test_concurrent_writers_of_one_results_file_lose_no_row(tmp_path):
    path = tmp_path / 'results.jsonl'
    run_processes(write_rows, [(path, writer, 25) for writer in range(4)])
    rows = read_results(path)
    assert sorted((r.method, r.seed) for r in rows) == sorted(
        (f'LLM {writer}', seed) for writer in range(4) for seed in range(25))


def append_same(path, row) -> None:
    for _ in range(20):
        append_result(path, row)


def test_concurrent_appends_of_one_run_write_it_once(tmp_path):
    path = tmp_path / 'results.jsonl'
    row = ResultRow('VPN', 0, 3, {'success_rate': 50.0}, protocol='standard')
    run_processes(append_same, [(path, row)] * 3)
    assert read_results(path) == [row]


# --------------------------------------------------- two run_protocol.py on one --out
def fake_protocol_runner(out, log):
    """A ProtocolRunner whose training and test are stand-ins that record each call."""
    from vpn_plugin.protocol.runner import ProtocolRunner, Tested, Trained

    class Recording(ProtocolRunner):
        def train(self, unit, work_dir):
            with open(log, 'a') as handle:
                handle.write(f'train {work_dir}\n')
            time.sleep(0.05)
            return Trained('ckpt.pth', 1, shortened='', selection='unified: last epoch')

        def test(self, unit, spec, checkpoint, test_dir):
            with open(log, 'a') as handle:
                handle.write(f'test {test_dir}\n')
            time.sleep(0.02)
            return Tested(metrics={'success_rate': 10.0 * unit.seed}, params=1, limited='',
                          features=dict(kind='synthetic'))

    return Recording


def run_protocol_process(out, log, protocol, units):
    import vpn_plugin.protocol.runner as runner
    runner.check_units = len  # the configs were checked once, in the parent
    fake_protocol_runner(out, log)(protocol, out).run(units)


def test_two_protocol_runs_on_one_out_train_each_unit_once(tmp_path):
    from vpn_plugin.protocol.runner import expand_units, load_protocol
    protocol = load_protocol(str(REPO / 'configs/protocol/standard_niv.py'))
    units = expand_units(protocol, seeds=[0, 1], horizons=[3])
    out, log = tmp_path / 'out', tmp_path / 'calls.log'
    run_processes(run_protocol_process, [(out, log, protocol, units)] * 2)
    rows = read_results(out / 'standard_niv' / 'results.jsonl')
    keys = [row.key() for row in rows]
    expected = sum(len(unit.tests) for unit in units)
    assert len(keys) == len(set(keys)) == expected, 'every (method, seed) row exactly once'
    calls = log.read_text().splitlines()
    trainings = [c for c in calls if c.startswith('train')]
    assert len(trainings) == len(set(trainings)) == sum(unit.train for unit in units), \
        'each unit trained by one process'


def test_train_refuses_a_work_dir_another_process_trains_in(tmp_path, monkeypatch,
                                                            lock_held_elsewhere):
    from test_hostile_checkpoints import toy_config_text
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    monkeypatch.setenv('LOCAL_RANK', '0')
    work_dir = tmp_path / 'work'
    config = tmp_path / 'toy.py'
    config.write_text(toy_config_text(work_dir))
    with lock_held_elsewhere(work_dir):  # another trainer's
        with pytest.raises(SystemExit, match=rf'^error: work dir {work_dir} is in use by '
                                             rf'another process \(pid {os.getpid()}'):
            load_tool('train').main([str(config)])
    assert not list(work_dir.glob('*.pth'))


# ----------------------------------------------------------------------- item 4: report
def jsonl(path: Path, rows) -> Path:
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return path


def row(method='VPN', seed=0, value=50.0, **fields):
    return dict(method=method, seed=seed, horizon=3,
                metrics=fields.pop('metrics', dict(success_rate=value, mean_accuracy=value)),
                **fields)


def report_error(path, *flags) -> str:
    with pytest.raises(SystemExit) as stopped:
        load_tool('report').main([str(path), *flags])
    return str(stopped.value.code)


@pytest.mark.parametrize('field, other', [
    ('protocol', dict(protocol='ablation')),
    ('variant', dict(variant={'decode': 'emission_argmax'})),
    ('settings', dict(settings={'max_epochs': 3})),
])
def test_report_refuses_to_pool_rows_of_different_runs(tmp_path, field, other, monkeypatch):
    """Today a seed of another protocol / variant / training horizon / schedule lands in the
    same cell: '20.67 ± 20.00' and the best method drops to second."""
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    rows = [row('VPN', s, 50.0, protocol='standard') for s in (0, 1)]
    rows += [row('VPN', 2, 1.0, **{'protocol': 'standard', **other})]
    rows += [row('Base', s, 40.0, protocol='standard') for s in (0, 1, 2)]
    message = report_error(jsonl(tmp_path / 'r.jsonl', rows))
    assert f'differ in {field}' in message and "'VPN'" in message, message
    assert 'seed 2' in message


def test_report_shows_a_seed_of_another_training_horizon_apart(tmp_path, capsys):
    """A seed trained at T=6 never lands in the T=3-trained cell: it is its own row,
    'VPN (train T=6)' (pass4 R14), and the VPN cell keeps its two seeds."""
    rows = [row('VPN', s, 50.0, protocol='standard') for s in (0, 1)]
    rows += [row('VPN', 2, 1.0, protocol='standard', train_horizon=6)]
    rows += [row('Base', s, 40.0, protocol='standard') for s in (0, 1, 2)]
    load_tool('report').main([str(jsonl(tmp_path / 'r.jsonl', rows)),
                              '--metrics', 'success_rate', 'mean_accuracy'])
    table = capsys.readouterr().out
    assert '| VPN | **50.00** | **50.00** |' in table
    assert '| VPN (train T=6) | 1.00 | 1.00 |' in table


@pytest.mark.parametrize('metrics, expected', [
    (dict(success_rate=250.0), r'success_rate=250.0; expected a finite number >= 0 and <= 100'),
    (dict(success_rate=-40.0), r'success_rate=-40.0; expected a finite number >= 0 and <= 100'),
    (dict(success_rate=float('nan')), r'success_rate.*nan'),
    (dict(succes_rate=30.0), r"succes_rate.*did you mean 'success_rate'"),
])
def test_impossible_or_unknown_metrics_are_refused(tmp_path, metrics, expected, monkeypatch):
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    rows = [row(seed=s) for s in (0, 1)] + [row(seed=2, metrics=metrics)]
    assert __import__('re').search(expected, report_error(jsonl(tmp_path / 'r.jsonl', rows)))


def test_a_misspelled_or_missing_metric_is_an_error_not_a_smaller_cell(tmp_path, monkeypatch):
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    rows = [row(seed=s) for s in (0, 1, 2)]
    path = jsonl(tmp_path / 'r.jsonl', rows)
    message = report_error(path, '--metrics', 'success_rate', 'mean_acuracy')
    assert "'mean_acuracy'" in message and "did you mean 'mean_accuracy'?" in message
    rows[1]['metrics'] = dict(success_rate=50.0)  # no mean_accuracy for seed 1
    message = report_error(jsonl(path, rows), '--metrics', 'success_rate', 'mean_accuracy')
    assert "lacks the metric 'mean_accuracy'" in message and 'seed 1' in message


@pytest.mark.parametrize('field, value', [('seed', True), ('horizon', False), ('seed', 1.5),
                                          ('horizon', '3')])
def test_booleans_and_fractions_are_not_integers(tmp_path, field, value, monkeypatch):
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    rows = [row(seed=s) for s in (0, 1)] + [dict(row(seed=2), **{field: value})]
    message = report_error(jsonl(tmp_path / 'r.jsonl', rows))
    assert f'field {field}={value!r}; expected an integer' in message


# ---------------------------------------------------- issue 33: silent today, now refused
@pytest.mark.parametrize('edit, expected', [
    (dict(metrics=dict(success_rate='25', mean_accuracy=50.0)),
     "field metrics.success_rate='25'; expected a finite number >= 0 and <= 100"),
    (dict(params=-5), 'field params=-5; expected an integer >= 0 (or None)'),
    (dict(method='VPN '), "the method 'VPN' as ['VPN', 'VPN ']"),
])
def test_string_metrics_negative_counts_and_space_variants_are_refused(tmp_path, edit,
                                                                      expected, monkeypatch):
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    rows = [row(seed=s) for s in (0, 1)] + [dict(row(seed=2), **edit)]
    message = report_error(jsonl(tmp_path / 'r.jsonl', rows))
    assert expected in message, message


def test_csv_metric_cells_still_read_and_rename_onto_a_method_is_refused(tmp_path,
                                                                        monkeypatch):
    from vpn_plugin.protocol.results import write_results_csv
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    rows = read_results(jsonl(tmp_path / 'r.jsonl', [row('A', 0, 40.0), row('B', 0, 60.0)]))
    write_results_csv(tmp_path / 'r.csv', rows)
    assert [r.metrics['success_rate'] for r in read_results(tmp_path / 'r.csv')] == [40.0, 60.0]
    message = report_error(tmp_path / 'r.jsonl', '--rename', 'A=B')
    assert "rename A=B: 'B' is already a method of the results" in message, message

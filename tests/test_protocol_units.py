"""The protocol's unit function (issue 40, items 5 and 8): a unit cut at any point resumes from
its last checkpoint (``--checkpoint-interval``) and ends with the uninterrupted unit's rows;
running a finished unit again adds no row; a failing unit does not stop the others, and its
error is recorded in its work dir for status views."""
import json
import signal
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

import kill_switch
import resume_pause_hook  # noqa: F401  (registers FailForSeedHook)
from test_kill_safe_checkpoints import load, run_child
from test_protocol import tiny_protocol
from tool_modules import load_tool
from vpn_plugin.protocol.results import read_results
from vpn_plugin.protocol.runner import ProtocolRunner, UnitsFailedError, expand_units
from vpn_plugin.protocol.unit_state import read_unit_state, unit_status

REPO = Path(__file__).resolve().parents[1]
SETTINGS = dict(max_epochs=3, val_interval=1, batch_size=64, checkpoint_interval=1)


def vpn_protocol(tiny):
    """One ViterbiPlanNet training (3 epochs, a checkpoint each) tested twice: one unit."""
    protocol = tiny_protocol(tiny)
    return Config(dict(protocol.to_dict(), seeds=[0], runs=protocol.runs[:1]))


def comparable(rows) -> list:
    """The rows without their paths (each run has its own --out)."""
    return [dict(method=r.method, seed=r.seed, metrics=r.metrics, params=r.params,
                 selection=r.selection, shortened=r.shortened, key=r.key()[:-1]) for r in rows]


def weights_tested(runner, unit) -> dict:
    record = json.loads((runner.work_dir(unit) / 'train_done.json').read_text())
    return load(Path(record['checkpoint']))['state_dict']


@pytest.fixture(scope='module')
def uninterrupted(tiny_crosstask, tmp_path_factory):
    """The unit run once, in this process (the forked children start warm): the protocol, its
    rows and the tested checkpoint's tensors."""
    torch.set_num_threads(1)
    protocol = vpn_protocol(tiny_crosstask)
    runner = ProtocolRunner(protocol, tmp_path_factory.mktemp('uninterrupted'), **SETTINGS)
    (unit,) = expand_units(protocol)
    rows = runner.run_unit(unit)
    assert [r.method for r in rows] == ['ViterbiPlanNet', 'ViterbiPlanNet (argmax)']
    return protocol, rows, weights_tested(runner, unit)


def run_unit(protocol, out: Path, kill_at, epochs_file: Path) -> None:
    """Child: the unit function, killed at ``kill_at`` (tests/kill_switch.py); the number of
    epochs it trained goes to ``epochs_file``."""
    from mmengine.runner import EpochBasedTrainLoop
    torch.set_num_threads(1)
    epochs, run_epoch = [], EpochBasedTrainLoop.run_epoch

    def counted(loop):
        epochs.append(loop.epoch)
        run_epoch(loop)
    EpochBasedTrainLoop.run_epoch = counted
    kill_switch.install(kill_at)
    runner = ProtocolRunner(protocol, out, **SETTINGS)
    runner.run_unit(expand_units(protocol)[0])
    epochs_file.write_text(str(len(epochs)))


def inside_the_save_of_epoch_2(event: str) -> bool:
    return '/.epoch_2.pth.' in event and event.endswith(' half')


def after_the_rotation_of_epoch_2(event: str) -> bool:
    return event.startswith('remove ') and event.endswith('/epoch_1.pth after')


def between_the_two_rows(event: str) -> bool:
    return event.startswith('replace ') and '_argmax_' in event and \
        event.endswith('per_sample.json before')


@pytest.mark.parametrize('kill_at, epochs_left, rows_before', [
    (inside_the_save_of_epoch_2, 2, 0),   # resumes from epoch_1.pth
    (after_the_rotation_of_epoch_2, 1, 0),  # resumes from epoch_2.pth
    (between_the_two_rows, 0, 1),          # training done, one test row written
], ids=['inside-a-save', 'after-a-rotation', 'between-rows'])
def test_a_cut_unit_resumes_from_its_last_checkpoint_and_gives_the_same_rows(
        uninterrupted, tmp_path, kill_at, epochs_left, rows_before):
    protocol, expected_rows, expected_weights = uninterrupted
    (unit,) = expand_units(protocol)
    runner = ProtocolRunner(protocol, tmp_path, **SETTINGS)
    epochs = tmp_path / 'epochs'
    assert run_child(run_unit, protocol, tmp_path, kill_at, epochs) == -signal.SIGKILL
    work_dir = runner.work_dir(unit)
    assert unit_status(work_dir)['state'] == 'interrupted'
    written = read_results(runner.results_file) if runner.results_file.is_file() else []
    assert len(written) == rows_before
    assert run_child(run_unit, protocol, tmp_path, 0, epochs) == 0
    assert int(epochs.read_text()) == epochs_left  # not retrained from the start
    assert comparable(read_results(runner.results_file)) == comparable(expected_rows)
    weights = weights_tested(runner, unit)
    assert all(torch.equal(weights[k], v) for k, v in expected_weights.items())
    state = read_unit_state(work_dir)
    assert (state['state'], state['attempts']) == ('done', 2)


def test_a_finished_unit_run_again_adds_no_row(uninterrupted, tmp_path):
    """Slurm may run a requeued copy of a task that already finished."""
    protocol, expected_rows, _ = uninterrupted
    (unit,) = expand_units(protocol)
    first = ProtocolRunner(protocol, tmp_path, **SETTINGS)
    assert comparable(first.run_unit(unit)) == comparable(expected_rows)
    before = first.results_file.read_text()
    assert ProtocolRunner(protocol, tmp_path, **SETTINGS).run_unit(unit) == []
    assert first.results_file.read_text() == before
    assert read_unit_state(first.work_dir(unit))['attempts'] == 1


def test_checkpoint_interval_default_and_dry_run(tiny_crosstask, tmp_path, monkeypatch, capsys):
    """Default: about 10 minutes of training by the cost model (4.32 s per ViterbiPlanNet
    CrossTask epoch: 138 epochs; a 40x costlier epoch: 3); --checkpoint-interval overrides;
    the dry run prints it."""
    from vpn_plugin.protocol.dry_run import checkpoint_epochs
    assert checkpoint_epochs(4.32) == 138 and checkpoint_epochs(4.32 * 40) == 3
    assert checkpoint_epochs(10_800) == 1
    protocol = vpn_protocol(tiny_crosstask)
    (unit,) = expand_units(protocol)
    assert ProtocolRunner(protocol, tmp_path, max_epochs=500).checkpoint_epochs(unit) == 138
    assert ProtocolRunner(protocol, tmp_path, max_epochs=500, epoch_seconds=100,
                          checkpoint_interval=7).checkpoint_epochs(unit) == 7
    assert ProtocolRunner(protocol, tmp_path, epoch_seconds=100).checkpoint_epochs(unit) == 6
    monkeypatch.chdir(REPO)
    tool = load_tool('run_protocol')
    tool.main(['configs/protocol/standard_crosstask.py', '--dry-run', '--seeds', '0'])
    plan = capsys.readouterr().out
    assert '500 epochs at 4.32 s, ~36.0 min, checkpoint every 138 epochs |' in plan
    tool.main(['configs/protocol/standard_crosstask.py', '--dry-run', '--seeds', '0',
               '--checkpoint-interval', '25'])
    plan = capsys.readouterr().out
    assert 'checkpoint every 25 epochs' in plan and 'checkpoint every 138' not in plan


# ------------------------------------------------------------- a failing unit
def failing_protocol(tiny, seeds):
    """The PKG with uniform emissions (tested, not trained) x ``seeds``; seed 0's test
    fails."""
    options = {f'{split}_dataloader.dataset': dict(tiny[f'{split}_dataset'], _delete_=True)
               for split in ('train', 'val', 'test')}
    options['model.num_actions'] = tiny['num_actions']
    options['custom_hooks'] = [dict(type='PKGHook'), dict(type='FailForSeedHook', seed=0)]
    return Config(dict(protocol='failing', dataset='crosstask', seeds=seeds, runs=[
        dict(method='PKG + uniform emissions', train=False, cfg_options=options,
             config=str(REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py'))]))


@pytest.mark.parametrize('jobs', [1, 2])
def test_a_failing_unit_does_not_stop_the_others(tiny_crosstask, tmp_path, jobs):
    protocol = failing_protocol(tiny_crosstask, [0, 1, 2, 3])
    runner = ProtocolRunner(protocol, tmp_path, batch_size=64)
    units = expand_units(protocol)
    with pytest.raises(UnitsFailedError, match=r'1 protocol run\(s\) failed \(the others ran'):
        runner.run(units, jobs=jobs)
    assert [r.seed for r in read_results(runner.results_file)] == [1, 2, 3]
    state = unit_status(runner.work_dir(units[0]))
    assert state['state'] == 'failed'
    assert state['error'] == 'ValueError: planned failure of seed 0'
    assert 'raise ValueError' in state['traceback']
    assert [read_unit_state(runner.work_dir(u))['state'] for u in units[1:]] == ['done'] * 3
    with pytest.raises(SystemExit, match=r'1 of the 4 results rows of the protocol are missing'
                                         r'.*\n  PKG \+ uniform emissions seed=0 T=3 '):
        load_tool('report').main([str(runner.results_file), '--metrics', 'success_rate'])


def test_run_protocol_exits_non_zero_naming_the_failed_unit(tiny_crosstask, tmp_path,
                                                            capsys):
    config = tmp_path / 'failing.py'
    failing_protocol(tiny_crosstask, [0, 1]).dump(str(config))
    tool = load_tool('run_protocol')
    with pytest.raises(SystemExit) as exit_info:
        tool.main([str(config), '--out', str(tmp_path / 'out'), '--batch-size', '64'])
    message = str(exit_info.value)
    work_dir = tmp_path / 'out/failing/PKG_uniform_emissions/T3/seed0_batch_size-64'
    assert message.startswith('error: 1 protocol run(s) failed')
    assert (f'PKG + uniform emissions T=3 seed=0: ValueError: planned failure of seed 0 '
            f'(traceback: {work_dir}/unit_state.json)') in message
    assert 'FAILED PKG + uniform emissions T=3 seed=0' in capsys.readouterr().err


# ------------------------------------------------------------- report of an incomplete protocol
def incomplete_results(folder: Path) -> Path:
    """A, B: seeds 0-2 written; the run was also asked for A seed 3 and C seeds 0-2."""
    from vpn_plugin.protocol.expected import add_expected
    from vpn_plugin.protocol.results import ResultRow, append_result
    results = folder / 'results.jsonl'

    def row(method, seed, value=50.0):
        return ResultRow(method=method, seed=seed, horizon=3, dataset='crosstask',
                         config=f'configs/{method.lower()}_t3.py', protocol='p',
                         metrics=dict(success_rate=value + seed, mean_accuracy=value + 10))
    for method in ('A', 'B'):
        for seed in range(3):
            append_result(results, row(method, seed))
    add_expected(results, [row(m, s) for m in ('A', 'B') for s in range(3)])
    add_expected(results, [row('A', 3), row('A', 0)] + [row('C', s) for s in range(3)])
    return results


def test_report_of_an_incomplete_protocol_names_the_missing_rows(tmp_path, capsys):
    results = incomplete_results(tmp_path)
    assert (tmp_path / 'results.expected').is_file()
    report = load_tool('report')
    with pytest.raises(SystemExit) as exit_info:
        report.main([str(results), '--metrics', 'success_rate'])
    message = str(exit_info.value)
    assert message.startswith('error: 4 of the 10 results rows of the protocol are missing')
    for line in ('A seed=3 T=3 configs/a_t3.py', 'C seed=0 T=3 configs/c_t3.py',
                 'C seed=2 T=3 configs/c_t3.py'):
        assert f'\n  {line}\n' in message
    assert 'give --allow-missing to make the table anyway' in message
    # a selection without missing rows is complete
    report.main([str(results), '--metrics', 'success_rate', '--methods', 'B'])
    assert '¶' not in capsys.readouterr().out


def test_allow_missing_marks_the_table_and_its_incomplete_cells(tmp_path, capsys):
    results = incomplete_results(tmp_path)
    report = load_tool('report')
    report.main([str(results), '--metrics', 'success_rate', '--allow-missing',
                 '--out', str(tmp_path / 'table')])
    captured = capsys.readouterr()
    assert 'INCOMPLETE: 4 of the 10 results rows are missing' in captured.err
    table = {line.split(' | ')[0].strip('| '): line for line in captured.out.splitlines()
             if line.startswith('| ')}
    assert table['A'].endswith('¶ |') and not table['B'].endswith('¶ |')
    assert table['C'].endswith('| -¶ |')  # no row at all
    assert ('¶ INCOMPLETE: 4 result row(s) of the protocol are missing (A seed=3 T=3 '
            'configs/a_t3.py; C seed=0 T=3 configs/c_t3.py; ') in captured.out
    latex = (tmp_path / 'table.tex').read_text()
    assert r'\textsuperscript{\P} INCOMPLETE' in latex and '¶' not in latex

"""``run_protocol.py --launcher slurm`` without a cluster (issue 40): the array's plan (packing,
time limits, what a resubmission skips), dispatch through submitit's local executor (the rows
of a local run, a failing unit that does not stop the others), ``--max-requeues``, and
``--status`` of local runs. The real cluster: tests/test_slurm_cluster.py."""
import json
import multiprocessing
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from mmengine.config import Config

from tool_modules import load_tool
from vpn_plugin.locks import exclusive_lock, lock_path_of
from vpn_plugin.protocol.results import read_results
from vpn_plugin.protocol.runner import ProtocolRunner, UnitsFailedError, expand_units
from vpn_plugin.protocol.slurm import (ProtocolTask, SlurmRequest, format_array_plan, pack,
                                       parse_memory, parse_options, parse_slurm_time,
                                       plan_array, queued_work_dirs, set_threads, submit,
                                       wall_seconds, wait_for)
from vpn_plugin.protocol.status import QueuedTask, format_status, unit_statuses
from vpn_plugin.protocol.unit_state import read_unit_state, unit_started

REPO = Path(__file__).resolve().parents[1]
LIMIT = (120, 'partition debug MaxTime 02:00:00')  # what scontrol would say


def uniform_protocol(tiny, broken: bool = False) -> Config:
    """The PKG with uniform emissions (tested, not trained: seconds per unit) and, with
    ``broken``, a run whose test video list does not exist: it fails when it runs, after every
    check before submission passed."""
    options = {f'{split}_dataloader.dataset': dict(tiny[f'{split}_dataset'], _delete_=True)
               for split in ('train', 'val', 'test')}
    options['model.num_actions'] = tiny['num_actions']
    config = str(REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py')
    runs = [dict(method='PKG + uniform emissions', train=False, cfg_options=options,
                 config=config)]
    if broken:
        missing = dict(options)
        missing['test_dataloader.dataset'] = dict(options['test_dataloader.dataset'],
                                                  video_list='/nonexistent/test_videos.json')
        runs.append(dict(method='Broken', train=False, cfg_options=missing, config=config))
    return Config(dict(protocol='array', dataset='crosstask', seeds=[0, 1], runs=runs))


def rows_of(runner: ProtocolRunner) -> list:
    """The results rows without their paths, in a fixed order (a job array writes them in the
    order its tasks end)."""
    return sorted((json.dumps([row.key(), row.metrics, row.params], default=str)
                   for row in read_results(runner.results_file)))


def fake_units(seconds) -> list:
    return [SimpleNamespace(slug=f'm{i}', horizon=3, seed=i, tests=[SimpleNamespace(method=f'M{i}')])
            for i in range(len(seconds))]


# ------------------------------------------------------------------------------- flags
def test_slurm_times_memory_and_options_are_parsed_or_refused():
    assert [parse_slurm_time(t) for t in ('90', '90:30', '2:00:00', '1-12', '1-00:30',
                                          '2-00:00:01')] == [90, 91, 120, 2160, 1470, 2881]
    assert parse_slurm_time('UNLIMITED') is None
    for bad in ('2h', '0', '-1', ''):
        with pytest.raises(ValueError, match='--time-limit'):
            parse_slurm_time(bad)
    assert parse_memory('16g') == '16G' and parse_memory('4000') == '4000'
    with pytest.raises(ValueError, match="--mem-per-run '1.5G'"):
        parse_memory('1.5G')
    assert parse_options(['account=proj', 'qos=normal', 'exclusive']) == {
        'account': 'proj', 'qos': 'normal', 'exclusive': True}
    with pytest.raises(ValueError, match='time is set by --time-limit'):
        parse_options(['time=10'])
    with pytest.raises(ValueError, match='expected key=value'):
        parse_options(['account='])


def test_the_tool_refuses_slurm_flags_without_the_launcher_and_a_second_gpu(capsys):
    tool = load_tool('run_protocol')
    protocol = 'configs/protocol/standard_niv.py'
    for argv, message in (
            ([protocol, '--partition', 'gpu'], '--partition only with --launcher slurm'),
            ([protocol, '--launcher', 'slurm'], 'needs --partition'),
            ([protocol, '--launcher', 'slurm', '--partition', 'p', '--jobs', '2'],
             '--jobs is for local runs'),
            ([protocol, '--launcher', 'slurm', '--partition', 'p', '--gpus-per-run', '2'],
             'its other GPUs would idle')):
        with pytest.raises(SystemExit):
            tool.parse_args(argv)
        assert message in capsys.readouterr().err
    args = tool.parse_args([protocol, '--launcher', 'slurm', '--partition', 'p', '--seeds', '0',
                            '1', '--methods', 'PKG + uniform emissions', '--max-epochs', '3',
                            '--runs-per-job', '4', '--out', 'w'])
    assert tool.status_command(args).endswith(
        "tools/run_protocol.py configs/protocol/standard_niv.py --out w --seeds 0 1 --methods "
        "'PKG + uniform emissions' --max-epochs 3 --status")
    smoke = tool.parse_args([protocol, '--launcher', 'slurm', '--partition', 'p', '--smoke'])
    assert tool.status_command(smoke).endswith(  # a smoke run's own results file
        'tools/run_protocol.py configs/protocol/standard_niv.py --out work_dirs/protocol '
        '--smoke --status')


# ------------------------------------------------------------------------------- planning
def test_pack_puts_the_longest_units_first_and_only_short_ones_k_per_task():
    seconds = [10, 300, 10, 300, 0, 100, 10, 0]
    units = fake_units(seconds)
    tasks = pack(units, seconds, 3)
    # up to 3 units and 3 x 10 s per task: the expensive units alone, the cheap ones together
    assert [[u.seed for u in t.units] for t in tasks] == [[1], [3], [5], [0, 2, 6], [4, 7]]
    assert [t.seconds for t in tasks] == [300, 300, 100, 30, 0]
    assert [len(t.units) for t in pack(units, seconds, 1)] == [1] * 8
    assert [len(t.units) for t in pack(fake_units([5] * 5), [5] * 5, 2)] == [2, 2, 1]
    assert [len(t.units) for t in pack(fake_units([0] * 3), [0] * 3, 2)] == [2, 1]
    # the wall time of tasks in array order, n at once
    assert wall_seconds(tasks, 1) == 730 and wall_seconds(tasks, 2) == 400
    assert wall_seconds(tasks, 8) == 300


def test_cpus_above_the_partitions_nodes_are_refused_with_a_known_time_limit(tmp_path,
                                                                             monkeypatch):
    """Before: plan_array checked --cpus-per-run against the partition's nodes only when it
    read the partition's time limit itself; given the limit (as submit passes it on), 99 CPUs
    on 2-CPU nodes were planned, while a --time-limit above that limit was refused."""
    sinfo = tmp_path / 'bin' / 'sinfo'
    sinfo.parent.mkdir()
    sinfo.write_text('#!/bin/sh\necho 2\n')
    sinfo.chmod(0o755)
    monkeypatch.setenv('PATH', f'{sinfo.parent}:{os.environ["PATH"]}')
    protocol = Config.fromfile(REPO / 'configs/protocol/standard_niv.py')
    units = expand_units(protocol, seeds=[0], horizons=[3], methods=['ViterbiPlanNet'])
    runner = ProtocolRunner(protocol, tmp_path / 'out', max_epochs=30)
    with pytest.raises(ValueError, match='--cpus-per-run 99: the largest node of partition '
                                         'debug has 2 CPUs'):
        plan_array(runner, units, SlurmRequest('debug', cpus_per_run=99), 4.32, limit=LIMIT)
    assert plan_array(runner, units, SlurmRequest('debug', cpus_per_run=2), 4.32,
                      limit=LIMIT).tasks


def test_the_time_limit_is_the_longest_task_times_the_factor_capped_by_the_partition(
        monkeypatch, tmp_path, sinfo_of_no_nodes):
    tool = load_tool('run_protocol')
    protocol = Config.fromfile(REPO / 'configs/protocol/standard_niv.py')
    units = expand_units(protocol, seeds=[0, 1], horizons=[3],
                         methods=['ViterbiPlanNet', 'PKG + uniform emissions', 'PDPP'])
    runner = ProtocolRunner(protocol, tmp_path, max_epochs=30)
    request = SlurmRequest('debug', runs_per_job=2)
    plan = plan_array(runner, units, request, 4.32, limit=(None, 'no limit'))
    assert [[u.slug for u in t.units] for t in plan.tasks] == [  # PDPP too long to share
        ['PDPP'], ['PDPP'], ['ViterbiPlanNet', 'ViterbiPlanNet'],
        ['PKG_uniform_emissions', 'PKG_uniform_emissions']]
    pdpp_epoch = 23.0 * 4.32  # NIV's relative cost of PDPP (dry_run.py) x --epoch-seconds
    pdpp_unit = 30 * pdpp_epoch * 1.08  # + its task classifier, 0.08 epochs per epoch
    assert plan.tasks[0].seconds == pytest.approx(pdpp_unit)
    assert plan.time_limit == int(-(-(pdpp_unit * 2 / 60 + 10) // 1))
    capped = plan_array(runner, units, request, 4.32, limit=(60, 'partition short MaxTime 1:00:00'))
    assert capped.time_limit == 60 and capped.limit_note == (
        'the longest task ~53.7 min x 2 + 10 min per unit, capped at the partition short MaxTime '
        '1:00:00')
    given = plan_array(runner, units, SlurmRequest('debug', time_limit=30), 4.32, limit=LIMIT)
    assert given.time_limit == 30 and given.limit_note == '--time-limit'
    with pytest.raises(ValueError, match='--time-limit 03:00:00 is above the partition debug'):
        plan_array(runner, units, SlurmRequest('debug', time_limit=180), 4.32, limit=LIMIT)
    lines = format_array_plan(capped, request, 4.32)
    assert lines[0] == ('Slurm: 1 job array of 4 tasks (6 units, --runs-per-job 2) on '
                        'partition debug')
    assert lines[1] == ('each task: 0 GPUs, 1 CPU, memory the partition default, time limit '
                        f'01:00:00 ({capped.limit_note}), requeue on, --max-requeues 3, no '
                        'throttle')
    assert '  PDPP: 2 units x ~53.7 min = 1.8 h' in lines
    assert any(line.startswith('warning: the units differ') for line in lines)
    # a smoke run's tasks are priced as its smoke runs (vpn_plugin/smoke.py), not full schedules
    smoke = plan_array(ProtocolRunner(protocol, tmp_path, smoke=True), units, request, 4.32,
                       limit=LIMIT)
    assert 0 < max(t.seconds for t in smoke.tasks) < 600
    assert smoke.time_limit < 60 and not any('requeues' in w for w in smoke.warnings)

    # the tool's dry run: the runs, then the array; nothing submitted
    monkeypatch.setattr('vpn_plugin.protocol.slurm.partition_limit', lambda name: LIMIT)
    plan = tool.main(['configs/protocol/standard_niv.py', '--seeds', '0', '--horizons', '3',
                      '--methods', 'ViterbiPlanNet', '--out', str(tmp_path), '--dry-run',
                      '--launcher', 'slurm', '--partition', 'debug', '--max-parallel', '4'])
    assert len(plan.tasks) == 1 and not (tmp_path / 'standard_niv' / 'slurm').exists()


# ------------------------------------------------------------------------------- dispatch
def test_local_executor_runs_the_units_of_a_local_run_and_a_failure_stops_no_other(
        tiny_crosstask, tmp_path, single_thread, sinfo_of_no_nodes):
    """submitit's local executor runs the array's tasks as the cluster would (a process each,
    the pickled task): the rows are the local run's, the broken unit is failed with its error
    and log, the unit packed after it still ran; then what a resubmission would send."""
    protocol = uniform_protocol(tiny_crosstask, broken=True)
    local = ProtocolRunner(uniform_protocol(tiny_crosstask), tmp_path / 'local', batch_size=64)
    local.run(expand_units(local.cfg))
    runner = ProtocolRunner(protocol, tmp_path / 'array', batch_size=64)
    uniform0, broken0, uniform1, _ = expand_units(protocol)
    units = [uniform0, broken0, uniform1]
    nothing_queued = lambda jobs: {}  # noqa: E731
    plan, jobs = submit(runner, units, SlurmRequest('debug', runs_per_job=2), 4.32,
                        cluster='local', queue=nothing_queued, limit=LIMIT)
    assert [[u.slug for u in t.units] for t in plan.tasks] == [
        ['PKG_uniform_emissions', 'Broken'], ['PKG_uniform_emissions']]
    alive = {str(job.job_id): job for job in jobs}
    statuses = wait_for(runner, units, 0.2, queue=lambda ids: {
        i: QueuedTask('RUNNING') for i in ids if i in alive and alive[i].state == 'RUNNING'})
    assert 'Broken T=3 seed=0: FileNotFoundError: annotation file' in str(jobs[0].exception())
    assert 'UnitsFailedError: 1 protocol run(s) failed' in str(jobs[0].exception())
    assert jobs[1].exception() is None
    assert rows_of(runner) == rows_of(local)

    assert [s.state for s in statuses] == ['done', 'failed', 'done']
    failed = statuses[1]
    assert failed.job == str(jobs[0].job_id) and failed.log == str(jobs[0].paths.stderr)
    assert failed.why == ('FileNotFoundError: annotation file /nonexistent/test_videos.json '
                          'does not exist')
    assert 'Traceback' in Path(failed.log).read_text()
    assert 'Traceback' in read_unit_state(runner.work_dir(broken0))['traceback']
    lines = format_status(statuses)
    assert lines[1].startswith(f'Broken T=3 seed=0 | failed | job {failed.job} | ')
    assert lines[3] == '3 units: 2 done, 1 failed'
    assert lines[4] == f'  failed: Broken T=3 seed=0: {failed.why} (log: {failed.log})'

    # a resubmission sends what is neither done nor queued: the broken unit, unless its task
    # is still queued
    folder = runner.root / 'slurm'
    again = plan_array(runner, units, SlurmRequest('debug'), 4.32,
                       queued_work_dirs(folder, nothing_queued), LIMIT)
    assert [[u.slug for u in t.units] for t in again.tasks] == [['Broken']]
    assert (again.skipped_done, again.skipped_queued) == (2, 0)
    first_task_queued = lambda ids: {str(jobs[0].job_id): QueuedTask('PENDING')}  # noqa: E731
    again = plan_array(runner, units, SlurmRequest('debug'), 4.32,
                       queued_work_dirs(folder, first_task_queued), LIMIT)
    assert again.tasks == [] and (again.skipped_done, again.skipped_queued) == (2, 1)


def test_the_wait_bar_draws_each_state_once(monkeypatch):
    """``--wait``: one line per change of state in a log (tqdm redrew each on its own
    ``update`` after our ``refresh``, and the last one again at ``close``)."""
    import io
    import vpn_plugin.protocol.status as status
    polls = iter([['pending', 'pending'], ['running', 'pending'], ['running', 'pending'],
                  ['done', 'running'], ['done', 'running'], ['done', 'done']])
    monkeypatch.setattr(status, 'unit_statuses', lambda runner, units, queue: [
        SimpleNamespace(state=state) for state in next(polls)])
    log = io.StringIO()
    wait_for(None, ['a', 'b'], 0.15, queue=None, out=log)  # > tqdm's 0.1 s between draws
    lines = [line.strip() for line in log.getvalue().replace('\r', '\n').splitlines()
             if line.strip()]
    assert [line.split('units', 1)[1].split(' (')[0] for line in lines] == [
        ', 2 pending', ', 1 running, 1 pending', ', 1 running', ',']
    assert lines[-1].startswith('100%|##########| 2/2 units, (2/2 done, elapsed ')
    assert log.getvalue().endswith('\n')


def test_a_task_requeued_too_often_marks_its_units_failed(tiny_crosstask, tmp_path, monkeypatch):
    protocol = uniform_protocol(tiny_crosstask)
    runner = ProtocolRunner(protocol, tmp_path, batch_size=64)
    units = expand_units(protocol)
    monkeypatch.setenv('SLURM_RESTART_COUNT', '4')
    with pytest.raises(UnitsFailedError, match='2 protocol run.s. failed') as failed:
        ProtocolTask(runner, os.getcwd(), 1, max_requeues=3)(units)
    assert 'its task was requeued 4 times, more than --max-requeues 3' in str(failed.value)
    assert not runner.results_file.exists()
    for unit in units:
        state = read_unit_state(runner.work_dir(unit))
        assert state['state'] == 'failed' and state['error'] == (
            'RuntimeError: its task was requeued 4 times, more than --max-requeues 3')
        assert sorted(p.name for p in runner.work_dir(unit).iterdir()) == [
            'run.json', 'unit_state.json']  # claimed, nothing ran
    monkeypatch.setenv('SLURM_RESTART_COUNT', '3')  # within the limit: the units run
    assert ProtocolTask(runner, os.getcwd(), 1, max_requeues=3)(units) == [
        str(runner.work_dir(u)) for u in units]
    assert [s.state for s in unit_statuses(runner, units)] == ['done', 'done']


def test_threads_follow_the_cpus_unless_the_environment_sets_them(monkeypatch, single_thread):
    import torch
    for name in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS'):  # recorded, so restored afterwards
        monkeypatch.setenv(name, 'x')
        monkeypatch.delenv(name)
    assert set_threads(2) == 2 and torch.get_num_threads() == 2
    assert os.environ['OMP_NUM_THREADS'] == '2'
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    assert set_threads(2) == 1 and torch.get_num_threads() == 1


# ------------------------------------------------------------------------------- --status
def hold_lock(path: Path, held, release) -> None:
    with exclusive_lock(path):
        held.set()
        release.wait(60)


def test_status_of_a_local_run(tiny_crosstask, tmp_path, capsys):
    """Done from the results file; a unit whose process holds its work dir's lock runs; one
    whose process died is interrupted; one that never started is named so."""
    protocol = uniform_protocol(tiny_crosstask)
    runner = ProtocolRunner(protocol, tmp_path, batch_size=64)
    first, second = expand_units(protocol)
    runner.run([first])
    work_dir = runner.work_dir(second)
    assert [s.state for s in unit_statuses(runner, [first, second])] == ['done', 'not started']
    work_dir.mkdir(parents=True)
    unit_started(work_dir)  # as a run that was killed since
    time.sleep(1)
    context = multiprocessing.get_context('fork')
    held, release = context.Event(), context.Event()
    holder = context.Process(target=hold_lock, args=(lock_path_of(work_dir), held, release))
    holder.start()
    held.wait(30)
    try:
        running = unit_statuses(runner, [first, second])[1]
    finally:
        release.set()
        holder.join(30)
    assert running.state == 'running' and running.elapsed >= 1 and running.log == str(work_dir)
    interrupted = unit_statuses(runner, [first, second])[1]
    assert interrupted.state == 'interrupted' and 'process ended' in interrupted.why
    # submitted to Slurm, but squeue does not answer (a copy of the folder elsewhere)
    records = runner.root / 'slurm' / 'submissions.jsonl'
    records.parent.mkdir()
    records.write_text(json.dumps(dict(array='7', tasks=[dict(
        job='7_0', log='7_0_0_log.err', units=[str(work_dir.absolute())])])) + '\n')

    def no_squeue(jobs):
        raise RuntimeError('squeue failed (No such file or directory)')
    unknown = unit_statuses(runner, [first, second], queue=no_squeue)
    assert [s.state for s in unknown] == ['done', 'unknown'] and unknown[1].job == '7_0'
    assert unknown[1].why == 'squeue failed (No such file or directory)'
    records.unlink()

    tool = load_tool('run_protocol')
    capsys.readouterr()
    protocol_file = tmp_path / 'array.py'
    protocol_file.write_text(protocol.pretty_text)
    tool.main([str(protocol_file), '--out', str(tmp_path), '--batch-size', '64', '--status'])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('PKG + uniform emissions T=3 seed=0 | done | - | ')
    assert out[1].startswith('PKG + uniform emissions T=3 seed=1 | interrupted | - | ')
    assert out[2] == '2 units: 1 done, 1 interrupted'


def test_the_flags_become_the_sbatch_options_of_the_array(monkeypatch, tmp_path):
    """What submitit writes into the array's sbatch file for the command line's resources
    (without Slurm here: submitit is told srun exists)."""
    from submitit.slurm import slurm
    from vpn_plugin.protocol.slurm import make_executor
    monkeypatch.setattr(slurm.SlurmExecutor, 'affinity', classmethod(lambda cls: 2))
    request = SlurmRequest('gpu', gpus_per_run=1, cpus_per_run=8, mem_per_run='16G',
                           max_parallel=2, max_requeues=5,
                           options=parse_options(['account=proj', 'exclusive']))
    executor = make_executor(tmp_path, request, 90, 'vpn_standard')._executor
    assert executor.max_num_timeout == 5
    lines = slurm._make_sbatch_string(command='run', folder=tmp_path, map_count=3,
                                      **executor.parameters).splitlines()
    for expected in ('--array=0-2%2', '--cpus-per-task=8', '--gpus-per-node=1', '--mem=16G',
                     '--partition=gpu', '--time=90', '--requeue', '--account=proj',
                     '--exclusive', '--job-name=vpn_standard', '--signal=USR2@90'):
        assert f'#SBATCH {expected}' in lines

"""``run_protocol.py --launcher slurm`` on a real one-host Slurm cluster (issue 40).

The cluster is started by ``.ci/start_slurm.sh`` when none answers (root and apt-get needed,
else these tests skip with the reason). One small protocol runs once for every test of this
file (module fixture :func:`scenario`): ViterbiPlanNet (tiny, 2 epochs, a checkpoint each), the
PKG with uniform emissions and a run whose tests fail in their jobs ("Broken"), 2 seeds,
packed two units per array task, two tasks at once. While it runs: the same command is
submitted again, one task is cancelled, and the task training ViterbiPlanNet is requeued after
the first epoch's checkpoint of seed 0 (submitit's ``USR2``: checkpoint and requeue, as at a
time limit or preemption) and of seed 1 (``scontrol requeue``, with slurmd killed and started
again before); then the same command resubmits what is missing, waiting for it (``--wait``).
Every test ends on the same ground: nothing lost, no row twice, the rows and the report's
table equal to those of the same protocol run locally.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tool_modules import load_tool
from vpn_plugin.protocol.results import read_results
from vpn_plugin.protocol.runner import ProtocolRunner, expand_units, load_protocol
from vpn_plugin.protocol.unit_state import read_unit_state

REPO = Path(__file__).resolve().parents[1]
START = REPO / '.ci' / 'start_slurm.sh'
SLURM_DIR = Path(os.environ.get('VPN_SLURM_DIR', '/tmp/vpn_slurm'))
TIMEOUT = 420  # seconds for the whole array (a loaded 2-core machine)


def sh(*command, check=True) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if check and done.returncode:
        raise AssertionError(f'{" ".join(command)}: {done.stderr or done.stdout}')
    return done.stdout


@pytest.fixture(scope='module')
def partition() -> str:
    """The default partition of a running cluster, started here when none answers."""
    if os.geteuid() != 0 and not shutil.which('sinfo'):
        pytest.skip('no Slurm here and not root: .ci/start_slurm.sh cannot start one')
    done = subprocess.run([str(START)], capture_output=True, text=True, timeout=600)
    if done.returncode == 77:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stderr
    names = sh('sinfo', '-h', '-o', '%P').split()
    return next((n.rstrip('*') for n in names if n.endswith('*')), names[0])


def write_protocol(folder: Path, tiny: dict) -> Path:
    """The protocol file and the ViterbiPlanNet config it trains (tiny, 2 epochs, a hook that
    pauses seed s after epoch 1 while ``folder/pause<s>`` exists)."""
    loaders = {f'{split}_dataloader': dict(batch_size=64, dataset=dict(
        tiny[f'{split}_dataset'], _delete_=True)) for split in ('train', 'val', 'test')}
    vpn = folder / 'vpn_tiny.py'
    vpn.write_text(
        f"_base_ = [{str(REPO / 'configs/vpn_crosstask_t3.py')!r}]\n"
        "custom_imports = dict(imports=['vpn_plugin.mm', 'resume_pause_hook'], "
        "allow_failed_imports=False)\n"
        f"model = dict(num_actions={tiny['num_actions']}, num_tasks={tiny['num_tasks']}, "
        "embed_dim=32, loss_weights=dict(state=0.0))\n"
        "train_cfg = dict(max_epochs=2, val_interval=2)\n"
        # a comprehension: rows' configs outside configs/ are read without running code (the
        # resubmission compares its rows with this config), comprehensions computed
        "custom_hooks = [dict(type='PKGHook')] + [dict(type='PauseAfterEpochOnRequestHook', "
        f"epoch=1, seed=seed, request={str(folder)!r} + f'/pause{{seed}}', "
        f"marker={str(folder)!r} + f'/paused{{seed}}') for seed in (0, 1)]\n"
        + ''.join(f'{name} = {value!r}\n' for name, value in loaders.items()))
    options = {f'{split}_dataloader.dataset': dict(tiny[f'{split}_dataset'], _delete_=True)
               for split in ('train', 'val', 'test')}
    options['model.num_actions'] = tiny['num_actions']
    broken = dict(options)  # fails in its job, not at submission (which checks the data)
    broken['custom_imports'] = dict(imports=['vpn_plugin.mm', 'resume_pause_hook'],
                                    allow_failed_imports=False)
    broken['custom_hooks'] = [dict(type='PKGHook'), dict(type='FailForSeedHook', seed=None)]
    uniform = str(REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py')
    protocol = folder / 'cluster_protocol.py'
    protocol.write_text(
        "protocol = 'cluster'\ndataset = 'crosstask'\nseeds = [0, 1]\nruns = [\n"
        f"    dict(method='ViterbiPlanNet', config={str(vpn)!r}),\n"
        f"    dict(method='PKG + uniform emissions', train=False, config={uniform!r}, "
        f"cfg_options={options!r}),\n"
        f"    dict(method='Broken', train=False, config={uniform!r}, cfg_options={broken!r}),\n"
        "]\n")
    return protocol


def retried(*command, timeout: float = 60) -> str:
    """``command`` (scancel, scontrol), again while Slurm answers that the job is between two
    states ("Job can not be altered now, try again later": a loaded machine)."""
    start = time.time()
    while True:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode == 0:
            return done.stdout
        if 'try again later' not in done.stderr or time.time() - start > timeout:
            raise AssertionError(f'{" ".join(command)}: {done.stderr or done.stdout}')
        time.sleep(1)


def queue(array: str) -> dict:
    """``{task: state}`` of the array's tasks as squeue lists them now."""
    lines = sh('squeue', '-h', '-r', '-t', 'all', '-j', array, '-O', 'JobArrayID:|,State:|',
               check=False)
    return dict(line.split('|')[:2] for line in lines.splitlines() if '|' in line)


def wait_until(condition, what: str, timeout: float = TIMEOUT):
    start = time.time()
    while not condition():
        if time.time() - start > timeout:
            jobs = sh('scontrol', 'show', 'job', check=False)  # why it waits: Reason=, state
            raise AssertionError(f'{what}: not after {timeout} s (slurm logs: {SLURM_DIR}/log)'
                                 f'\nscontrol show job:\n{jobs[-4000:]}')
        time.sleep(0.5)


ALIVE = ('PENDING', 'RUNNING', 'CONFIGURING', 'COMPLETING', 'REQUEUED', 'SUSPENDED')


def run_tool(capsys, argv) -> tuple:
    capsys.readouterr()
    result = load_tool('run_protocol').main(argv)
    captured = capsys.readouterr()
    return result, captured.out, captured.err


@pytest.fixture(scope='module')
def scenario(partition, tiny_crosstask, tmp_path_factory):
    """Run the protocol locally and on Slurm (module docstring); what the tests check."""
    folder = tmp_path_factory.mktemp('slurm_protocol')
    protocol_file = write_protocol(folder, tiny_crosstask)
    os.environ['PYTHONPATH'] = os.pathsep.join(  # the jobs import resume_pause_hook
        [str(REPO / 'tests'), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the jobs (--cpus-per-run 1): bit-exact rows
    try:
        protocol = load_protocol(str(protocol_file))
        local = ProtocolRunner(protocol, folder / 'local', checkpoint_interval=1)
        local.run(expand_units(protocol, methods=['ViterbiPlanNet', 'PKG + uniform emissions']))
    finally:
        torch.set_num_threads(threads)
    for seed in (0, 1):
        (folder / f'paused{seed}.epochs').unlink()  # the local run's
    runner = ProtocolRunner(protocol, folder / 'slurm', checkpoint_interval=1)
    yield dict(folder=folder, protocol=str(protocol_file), local=local, runner=runner,
               units=expand_units(protocol), partition=partition)
    records = runner.root / 'slurm' / 'submissions.jsonl'
    if records.is_file():  # a failed test leaves no job behind
        arrays = [json.loads(line)['array'] for line in records.read_text().splitlines()]
        sh('scancel', *arrays, check=False)


def submit_command(scenario, *extra) -> list:
    return [scenario['protocol'], '--out', str(scenario['folder'] / 'slurm'), '--launcher',
            'slurm', '--partition', scenario['partition'], '--runs-per-job', '2',
            '--max-parallel', '2', '--checkpoint-interval', '1', '--poll-seconds', '1', *extra]


def test_the_array_survives_a_second_submission_scancel_requeues_and_slurmd_kill(
        scenario, capsys):
    folder, runner, units = scenario['folder'], scenario['runner'], scenario['units']
    for seed in (0, 1):  # both trainings pause after epoch 1 (its checkpoint written)
        (folder / f'pause{seed}').write_text(f'pause ViterbiPlanNet seed {seed} after epoch 1')
    jobs, out, err = run_tool(capsys, submit_command(scenario))
    array = str(jobs[0].job_id).split('_')[0]
    assert f'submitted job array {array}: 3 tasks, 6 units' in out
    assert f'logs: {runner.root / "slurm"}' in out and out.rstrip().endswith('--status')
    # longest first, two per task: both trainings, then the uniform and broken units by seed
    tasks = [json.loads(line) for line in
             (runner.root / 'slurm/submissions.jsonl').read_text().splitlines()][0]['tasks']
    names = [[Path(d).parts[-3] + '/' + Path(d).name for d in t['units']] for t in tasks]
    assert names == [['ViterbiPlanNet/seed0', 'ViterbiPlanNet/seed1'],
                     ['PKG_uniform_emissions/seed0', 'Broken/seed0'],
                     ['PKG_uniform_emissions/seed1', 'Broken/seed1']]
    # the same command again while everything is queued or running: nothing is sent
    again, out, _ = run_tool(capsys, submit_command(scenario))
    assert again == [] and 'nothing to submit: 0 units done, 6 queued or running' in out
    retried('scancel', f'{array}_2')  # throttled (two at once): cancelled before it starts
    task = f'{array}_0'

    def requeued(request: Path):
        """Wait for the requeued task to be pending; release it (the pause request gone)."""
        wait_until(lambda: queue(array).get(task) == 'PENDING', f'{task} requeued, pending')
        request.unlink()  # only now: the paused training was cut, not let finish
        retried('scontrol', 'update', f'jobid={task}', 'StartTime=now')

    # preempted or at its time limit: submitit's signal, checkpoint (the Checkpointable) and
    # requeue, as `scancel --signal USR2` sends it (submitit's own test does so)
    wait_until(lambda: (folder / 'paused0').exists(), 'ViterbiPlanNet seed 0 paused')
    # (scancel may report "can not be altered now" for a signal it delivered: the task left
    # RUNNING, requeued by submitit, then)
    wait_until(lambda: subprocess.run(['scancel', '--signal=USR2', task]).returncode == 0
               or queue(array).get(task) != 'RUNNING', f'USR2 sent to {task}', timeout=60)
    requeued(folder / 'pause0')

    def paused_or_released_again(marker: Path) -> bool:
        """The release may be lost while the requeue settles (a loaded, long-lived cluster
        left the task pending for good): send it again while the task is pending."""
        if marker.exists():
            return True
        if queue(array).get(task) == 'PENDING':
            subprocess.run(['scontrol', 'update', f'jobid={task}', 'StartTime=now'],
                           capture_output=True, timeout=120)
        return False

    # slurmd dies during the run and comes back: the running task goes on
    wait_until(lambda: paused_or_released_again(folder / 'paused1'),
               'ViterbiPlanNet seed 1 paused')
    os.kill(int((SLURM_DIR / 'slurmd.pid').read_text()), signal.SIGKILL)
    time.sleep(1)
    subprocess.run([str(START)], check=True, capture_output=True, timeout=120)
    assert queue(array)[task] == 'RUNNING'
    # `scontrol requeue`: SIGTERM (which submitit ignores), SIGKILL after KillWait, pending
    retried('scontrol', 'requeue', task)
    requeued(folder / 'pause1')
    wait_until(lambda: not any(state in ALIVE for state in queue(array).values()),
               'the array ended')

    _, out, _ = run_tool(capsys, [scenario['protocol'], '--out', str(folder / 'slurm'),
                                  '--status'])
    lines = out.splitlines()
    states = [line.split(' | ')[1] for line in lines[:6]]  # seeds outermost
    assert states == ['done (requeued 1 time)', 'done', 'failed', 'done (requeued 2 times)',
                      'interrupted', 'interrupted'], out
    assert lines[2].startswith(f'Broken T=3 seed=0 | failed | job {array}_1 | ')
    assert lines[2].endswith(f'{array}_1_0_log.err | ValueError: planned failure of seed 0')
    # '(CANCELLED)' while squeue still lists the cancelled task; without accounting, later not.
    # The task may be cancelled before it reached this unit (no work dir): status says so
    assert re.search(rf'its task {array}_2 ended( \(CANCELLED\))?( before the unit finished|'
                     r'; the unit left no work dir and its rows are not in the results '
                     r'\(never reached, or deleted\): a rerun runs it)$', lines[4]), lines[4]
    assert lines[6] == '6 units: 3 done, 1 failed, 2 interrupted'
    for unit, attempts, restarts in ((units[0], 2, 1), (units[3], 2, 2)):  # ViterbiPlanNet
        state = read_unit_state(runner.work_dir(unit))
        assert (state['attempts'], state['restarts'], state['job']) == (attempts, restarts, task)
    # each requeued copy began at epoch 1 (the second), from epoch 1's checkpoint
    for seed in (0, 1):
        assert (folder / f'paused{seed}.epochs').read_text().split() == ['0', '1', '1']
    log = (runner.root / 'slurm' / f'{task}_0_log.out').read_text()  # submitit's lines
    attempts = log.split('Starting with JobEnvironment')[1:]
    assert len(attempts) == 3, log
    # the USR2 path in the first attempt (its own requeue's SIGTERM may be logged before or
    # after 'Requeued job'), then scontrol requeue's SIGTERM in the second
    assert 'Calling checkpoint method' in attempts[0] and f'Requeued job {task}' in attempts[0]
    assert attempts[0].index('Calling checkpoint method') < attempts[0].index(
        f'Requeued job {task}')
    assert 'Bypassing signal SIGTERM' in attempts[1], log
    scenario['array'] = array


def test_resubmitting_sends_what_is_missing_and_the_rows_equal_the_local_run(scenario, capsys):
    if 'array' not in scenario:
        pytest.skip('the first test did not run its array')
    runner, local = scenario['runner'], scenario['local']
    with pytest.raises(SystemExit, match='2 of 6 units did not finish'):
        run_tool(capsys, submit_command(scenario, '--wait'))
    out, err = capsys.readouterr()
    # --wait's bar: one line per change, none drawn twice (tqdm redrew each one)
    bars = [line.strip() for line in err.replace('\r', '\n').splitlines() if ' units' in line]
    assert bars and all(a != b for a, b in zip(bars, bars[1:])), bars
    record = json.loads((runner.root / 'slurm/submissions.jsonl').read_text().splitlines()[-1])
    assert [[Path(d).parts[-3] + '/' + Path(d).name for d in t['units']]
            for t in record['tasks']] == [['Broken/seed0', 'PKG_uniform_emissions/seed1'],
                                          ['Broken/seed1']]
    assert '6 units: 4 done, 2 failed' in out

    rows = read_results(runner.results_file)
    assert len({row.key() for row in rows}) == len(rows) == 4  # no row lost or doubled
    assert not [row for row in rows if row.method == 'Broken']

    def comparable(results_runner):
        return sorted(json.dumps([r.key(), r.metrics, r.params], default=str)
                      for r in read_results(results_runner.results_file))
    assert comparable(runner) == comparable(local)

    report = load_tool('report')
    with pytest.raises(SystemExit, match=r'2 of the 6 results rows of the protocol are missing'
                       r'[^$]*Broken seed=0 T=3[^$]*Broken seed=1 T=3'):
        report.main([str(runner.results_file)])
    tables = []
    for results in (runner.results_file, local.results_file):
        capsys.readouterr()
        # --methods: the row order (an array writes its rows in the order its tasks end)
        report.main([str(results), '--metrics', 'success_rate', 'mean_accuracy', '--methods',
                     'ViterbiPlanNet', 'PKG + uniform emissions'])
        tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1] and 'ViterbiPlanNet' in tables[0]

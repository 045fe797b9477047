"""``run_protocol.py ... --status``: the state of every unit of a protocol, local or on Slurm.

A unit's state comes from three things on the shared filesystem and ``squeue`` (never ``sacct``,
which clusters without accounting lack):

* the results file: a unit whose rows are all there is ``done``;
* the Slurm records (``<out>/<protocol>/slurm/submissions.jsonl``, ``slurm.py``): which array
  task a unit was last submitted in, and ``squeue`` for that task's state;
* the unit's state file (``<work dir>/unit_state.json``, ``unit_state.py``): its attempt,
  job, start, end and error.

States: ``done``; ``running`` (its task runs it, or locally a process holds its work dir's
lock); ``pending`` (its task is queued, requeued, or runs the units before it);
``failed`` (the unit raised, or its task was requeued more than ``--max-requeues`` times,
or its work dir holds a run made with other settings, which a rerun refuses: the error line
says which); ``interrupted`` (it started, or was submitted, but its task or
process ended before it finished: cancelled, killed, node failure; run the same command
again: it resumes from its last checkpoint);
``not started``; ``unknown`` (submitted, but ``squeue`` cannot answer here).
"""
from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from vpn_plugin.errors import json_lines, read_text, unique_keys
from .dry_run import format_duration
from .progress import unit_name
from .runner import check_work_dir
from .unit_state import read_unit_state, unit_status

# squeue states of a job that still runs or will run (squeue(1), "JOB STATE CODES")
ALIVE_STATES = {'PENDING', 'RUNNING', 'CONFIGURING', 'COMPLETING', 'REQUEUED', 'REQUEUE_HOLD',
                'REQUEUE_FED', 'RESIZING', 'SIGNALING', 'STAGE_OUT', 'STOPPED', 'SUSPENDED'}
RECORDS = 'submissions.jsonl'


@dataclass
class UnitStatus:
    """One line of the status."""
    unit: object          # runner.TrainUnit
    work_dir: Path
    state: str            # done | running | pending | failed | interrupted | not started
    job: str = ''         # the Slurm task (``<array>_<index>``), '' for a local run
    elapsed: float | None = None  # seconds of the last attempt (so far)
    restarts: int = 0     # how often its Slurm task was requeued
    log: str = ''         # the task's stderr file (Slurm) or the work dir (local)
    why: str = ''         # failed: the error line; interrupted / pending: the reason


@dataclass
class QueuedTask:
    """An array task as ``squeue`` lists it."""
    state: str
    elapsed: str = ''
    restarts: int = 0
    reason: str = ''

    @property
    def alive(self) -> bool:
        return self.state in ALIVE_STATES


def slurm_folder(runner) -> Path:
    """submitit's folder of a protocol (logs, pickles) and the submission records."""
    return Path(runner.root) / 'slurm'


def read_submissions(folder: Path) -> dict:
    """``{work dir (absolute): (task job id, log file)}`` of the latest submission of each
    unit in ``folder``'s records (``slurm.record_submission``)."""
    path = Path(folder) / RECORDS
    tasks = {}
    if not path.is_file():
        return tasks
    for number, line in enumerate(json_lines(read_text(path, 'submission records')), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, object_pairs_hook=unique_keys(f'{path}:{number}',
                                                                     'submission record'))
            for task in record['tasks']:
                old_root = Path(task['log']).parent.parent  # the protocol folder it was in
                for work_dir in task['units']:
                    work_dir = str(relocated(work_dir, old_root, folder))
                    tasks[work_dir] = (task['job'], str(relocated(task['log'], old_root, folder)))
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f'{path}: line {number}: not a submission record ({error!r}); '
                             'it is written by run_protocol.py --launcher slurm') from None
    return tasks


def relocated(path, old_root, folder) -> Path:
    """``path`` recorded under the protocol folder ``old_root`` (absolute), read under the
    protocol folder of the Slurm folder ``folder`` when the protocol folder was moved or copied
    since (its records and unit states keep absolute paths); other paths as they are."""
    path, new_root = Path(path), Path(folder).absolute().parent
    if Path(old_root) == new_root or not path.is_relative_to(old_root):
        return path
    return new_root / path.relative_to(old_root)


def squeue_tasks(jobs) -> dict:
    """``{task job id: QueuedTask}`` of the array jobs of the task ids ``jobs`` (``A_i`` or
    ``J``), as ``squeue -r -t all`` lists them (ended jobs only until Slurm forgets them,
    ``MinJobAge``). A job Slurm no longer knows is absent. Raises ``RuntimeError`` when
    ``squeue`` cannot answer (what is queued is then unknown)."""
    arrays = sorted({str(job).split('_')[0] for job in jobs})
    if not arrays:
        return {}
    command = ['squeue', '-h', '-r', '-t', 'all', '-j', ','.join(arrays),
               '-O', 'JobArrayID:|,State:|,TimeUsed:|,RestartCnt:|,Reason:|']
    return {fields[0]: QueuedTask(fields[1], fields[2], _int(fields[3]), fields[4])
            for fields in squeue_lines(command, 5) if fields[0]}


def squeue_lines(command: list, width: int, no_slurm_ok: bool = False) -> list:
    """The ``|``-separated fields of each line ``squeue`` prints for ``command`` (lines of
    fewer than ``width`` fields left out); ``[]`` when every job asked for has been forgotten,
    or (``no_slurm_ok``) there is no ``squeue`` here. Raises ``RuntimeError`` when it cannot
    answer (what is queued is then unknown)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except OSError as error:
        if no_slurm_ok:
            return []
        raise RuntimeError(f'squeue failed ({error}); what is queued is unknown') from None
    except subprocess.TimeoutExpired as error:
        raise RuntimeError(f'squeue failed ({error}); what is queued is unknown') from None
    if done.returncode and 'Invalid job id' in done.stderr:
        return []  # every job has ended and been forgotten
    if done.returncode:
        raise RuntimeError(f'{" ".join(command)} failed: {done.stderr.strip()}; what is queued '
                           'is unknown')
    rows = ([field.strip() for field in line.split('|')] for line in done.stdout.splitlines())
    return [fields for fields in rows if len(fields) >= width]


def folder_marker(root) -> str:
    """The sbatch ``--comment`` of a protocol folder's jobs (``vpn_plugin:`` and a hash of its
    absolute path: a path may hold spaces or letters sbatch options do not carry), by which
    :func:`marked_arrays` finds them without the records."""
    import hashlib
    digest = hashlib.sha256(str(Path(root).absolute()).encode()).hexdigest()[:16]
    return f'vpn_plugin:{digest}'


def marked_arrays(marker: str) -> dict:
    """``{array job id: state}`` of the jobs ``squeue`` lists as queued or running with the
    comment ``marker``; ``{}`` where there is no ``squeue`` (no Slurm here)."""
    command = ['squeue', '-h', '-r', '-O', 'JobArrayID:|,Comment:|,State:|']
    arrays = {}
    for fields in squeue_lines(command, 3, no_slurm_ok=True):
        if fields[1] == marker and fields[2] in ALIVE_STATES:
            arrays.setdefault(fields[0].split('_')[0], fields[2])
    return arrays


def recorded_arrays(folder: Path) -> set:
    """The array job ids of every submission in ``folder``'s records."""
    path = Path(folder) / RECORDS
    if not path.is_file():
        return set()
    arrays = set()
    for line in json_lines(read_text(path, 'submission records')):
        try:
            arrays.add(str(json.loads(line)['array']))
        except (ValueError, KeyError, TypeError):
            continue  # read_submissions names a broken line
    return arrays


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def unit_statuses(runner, units, queue=squeue_tasks) -> list[UnitStatus]:
    """The :class:`UnitStatus` of each of ``units`` (a ``ProtocolRunner``'s); ``queue``: the
    squeue reader (:func:`squeue_tasks`; tests pass another)."""
    done = runner.done_keys()
    submitted = read_submissions(slurm_folder(runner))
    work_dirs = [Path(runner.work_dir(unit)).absolute() for unit in units]
    tasks = [submitted.get(str(work_dir)) for work_dir in work_dirs]
    unknown = ''
    try:
        queued = queue({task[0] for task in tasks if task}) if any(tasks) else {}
    except RuntimeError as error:  # e.g. a copy of the work dirs outside the cluster
        queued, unknown = {}, str(error)
    statuses = [_status(runner, unit, work_dir, task, queued, done)
                for unit, work_dir, task in zip(units, work_dirs, tasks)]
    for status, task in zip(statuses, tasks):
        if unknown and task and status.state not in ('done', 'failed'):
            status.state, status.why = 'unknown', unknown
    return statuses


def _status(runner, unit, work_dir: Path, task, queued: dict, done: set) -> UnitStatus:
    job, log = task or ('', '')
    state = read_unit_state(work_dir) or {}
    this_job = bool(task) and state.get('job') == job
    if not this_job:  # a local attempt (or none): alive while a process holds the lock
        state = unit_status(work_dir) or {}
    old_folder = Path(state.get('log') or '.').parent
    if old_folder.name == slurm_folder(runner).name:  # a task's stderr: <protocol>/slurm/<file>
        state = dict(state, log=str(relocated(state['log'], Path(state['log']).parent.parent,
                                              slurm_folder(runner))))
    status = UnitStatus(unit, work_dir, 'not started', job, _elapsed(state),
                        int(state.get('restarts') or 0), log or state.get('log') or '')
    if not task and state:
        status.job, status.log = state.get('job', ''), state.get('log') or str(work_dir)
    in_queue = queued.get(job)
    if in_queue and not (this_job and state.get('state') in ('done', 'failed')):
        status.restarts = max(status.restarts, in_queue.restarts)  # its task's, while it waits
    if runner.is_done(unit, done):
        status.state = 'done'
    elif state.get('state') == 'failed' and (this_job or not (in_queue and in_queue.alive)):
        status.state, status.why = 'failed', state.get('error', '')
    elif in_queue and in_queue.alive:
        running = in_queue.state == 'RUNNING' and this_job and state.get('state') == 'running'
        status.state = 'running' if running else 'pending'
        if not running:
            status.elapsed = None
            status.why = ('its task runs the units before it' if in_queue.state == 'RUNNING'
                          else in_queue.reason if in_queue.reason not in ('None', '') else '')
    elif state.get('state') == 'running' and not this_job:
        status.state = 'running'  # locally, by the process holding the work dir's lock
    elif task and (this_job or not state) and state.get('state') != 'done':
        status.state = 'interrupted'
        ended = f'its task {job} ended' + (f' ({in_queue.state})' if in_queue else '')
        status.why = (f'{ended} before the unit finished' if state or work_dir.exists() else
                      # nothing says how far it got: a finished unit's deleted folder and rows
                      # look the same as a unit its task never reached
                      f'{ended}; the unit left no work dir and {_missing_rows(runner, unit, done)}'
                      ' not in the results (never reached, or deleted): a rerun runs it')
    elif state.get('state') == 'done':  # finished, but rows of it are not in the results file
        status.state = 'interrupted'
        status.why = (f'its run finished, but {_missing_rows(runner, unit, done)} not in '
                      f'{runner.results_file} (deleted, or another results file?): a rerun '
                      'tests it again')
    elif state:
        status.state = 'interrupted'
        status.why = 'its process ended before the unit finished (killed or interrupted)'
    if status.state in ('interrupted', 'not started') and (work_dir / 'run.json').is_file():
        try:  # a rerun refuses the folder (runner.claim_work_dir): it is no resume
            check_work_dir(work_dir, runner.identity(unit))
        except ValueError as conflict:
            status.state, status.why = 'failed', f'a rerun refuses it: {conflict}'
    if status.state == 'interrupted' and not state.get('ended'):
        status.elapsed = None  # when it died is not recorded: now - start would grow forever
    return status


def _missing_rows(runner, unit, done: set) -> str:
    """Which rows of ``unit`` the results file lacks: 'its rows are' when all, else e.g.
    "1 of its 2 rows is (method 'B', T=4)"."""
    missing = [spec for spec in unit.tests if runner.row_for(unit, spec).key() not in done]
    if len(missing) == len(unit.tests):
        return 'its rows are'
    named = '; '.join(f'method {spec.method!r}, T={spec.horizon}'
                      + (f', variant {spec.variant}' if spec.variant else '') for spec in missing)
    return (f'{len(missing)} of its {len(unit.tests)} rows {"is" if len(missing) == 1 else "are"}'
            f' ({named})')


def _elapsed(state: dict) -> float | None:
    if not state.get('started'):
        return None
    return (state.get('ended') or time.time()) - state['started']


STATES = ('done', 'running', 'pending', 'failed', 'interrupted', 'not started', 'unknown')


def format_status(statuses: list[UnitStatus]) -> list[str]:
    """One line per unit (method, T, seed, state, job, elapsed, log, why), then a summary that
    names each failed or interrupted unit with its log."""
    lines = []
    for status in statuses:
        state = status.state
        if status.restarts:
            state += f' (requeued {status.restarts} time{"s" if status.restarts > 1 else ""})'
        fields = [unit_name(status.unit), state, f'job {status.job}' if status.job else '-',
                  format_duration(status.elapsed) if status.elapsed is not None else '-',
                  status.log or '-']
        lines.append(' | '.join(fields) + (f' | {status.why}' if status.why else ''))
    counts = {name: sum(s.state == name for s in statuses) for name in STATES}
    lines.append(f'{len(statuses)} units: ' + ', '.join(
        f'{count} {name}' for name, count in counts.items() if count or name == 'done'))
    for status in statuses:
        if status.state in ('failed', 'interrupted'):
            lines.append(f'  {status.state}: {unit_name(status.unit)}: {status.why} '
                         f'(log: {status.log or "-"})')
    return lines

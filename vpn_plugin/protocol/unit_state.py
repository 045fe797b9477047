"""``<work dir>/unit_state.json``: where a protocol unit stands, for status views.

The unit function (``ProtocolRunner.run_unit``, which a sequential run, the ``--jobs`` pool
and a Slurm array task all call) writes it, atomically, in the unit's work dir once the work
dir is claimed (``run.json``). Fields::

    state      'running' | 'done' | 'failed'
    attempts   how many times the unit started (1 on the first; a resumed attempt adds one)
    pid, host  the process of the latest attempt
    job        its submitit job ('<array>_<index>' of a Slurm array task; absent outside one)
    log        that job's stderr file, restarts: SLURM_RESTART_COUNT (requeues of its task)
    started    its start, ended: its end (seconds since the epoch; ended absent while running)
    error      a failed attempt's error on one line (type: message)
    traceback  a failed attempt's whole traceback

'done' means the unit's rows were produced (a sequential run or a Slurm task appended them to
the results file before writing it; the pool's job hands them to its parent, which appends
them): the results file stays the authority on which rows exist. A 'running' unit whose work
dir's lock (``locks.lock_path_of``) no process holds was cut (killed, preempted, timed out):
:func:`unit_status` calls it 'interrupted'; running the unit again resumes it from its last
checkpoint. A unit that fails before it claims its work dir (a work dir of other settings)
writes no file: the error is in the run's summary and log.
"""
from __future__ import annotations

import json
import os
import socket
import time
import traceback as traceback_module
from pathlib import Path

from vpn_plugin.errors import write_text_atomically
from vpn_plugin.locks import LockBusyError, exclusive_lock, lock_path_of

STATE_FILE = 'unit_state.json'
STATES = ('running', 'done', 'failed')


def read_unit_state(work_dir) -> dict | None:
    """The unit's recorded state (module docstring), None when it has none (never started,
    or written by a version without it)."""
    path = Path(work_dir) / STATE_FILE
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f'{path}: not valid JSON ({error}); the file is written atomically, '
                         'so something else wrote it: delete it') from None
    if not isinstance(state, dict) or state.get('state') not in STATES:
        raise ValueError(f'{path}: expected a JSON object with "state" one of {STATES}, got '
                         f'{str(state)[:200]}')
    return state


def unit_status(work_dir) -> dict | None:
    """:func:`read_unit_state`, with a 'running' state whose work dir lock is free (no process
    runs the unit) reported as 'interrupted'."""
    state = read_unit_state(work_dir)
    if state is None or state['state'] != 'running':
        return state
    try:
        with exclusive_lock(lock_path_of(work_dir), wait=False):
            return dict(state, state='interrupted')
    except LockBusyError:
        return state


def unit_started(work_dir) -> None:
    """Record the start of an attempt: 'running', one more attempt, this process (and its
    Slurm job: :func:`launcher_job`)."""
    previous = read_unit_state(work_dir) or {}
    _write(work_dir, dict(state='running', attempts=int(previous.get('attempts', 0)) + 1,
                          pid=os.getpid(), host=socket.gethostname(), started=time.time(),
                          **launcher_job()))


def launcher_job() -> dict:
    """``job``, ``log`` and ``restarts`` of the submitit job this process runs in (a Slurm
    array task, or submitit's local executor's job); empty outside one."""
    if not os.environ.get('SUBMITIT_EXECUTOR'):
        return {}
    import submitit
    environment = submitit.JobEnvironment()
    return dict(job=str(environment.job_id), log=str(environment.paths.stderr),
                restarts=int(os.environ.get('SLURM_RESTART_COUNT') or 0))


def unit_done(work_dir) -> None:
    """Record that the unit produced its rows."""
    previous = read_unit_state(work_dir) or dict(attempts=0)
    if previous.get('state') != 'done':
        _write(work_dir, dict(_attempt(previous), state='done', ended=time.time()))


def unit_failed(work_dir, error: BaseException) -> None:
    """Record the error that ended the attempt: its last line and its whole traceback."""
    previous = read_unit_state(work_dir) or dict(attempts=0)
    text = ''.join(traceback_module.format_exception(error))
    line = ' '.join(''.join(traceback_module.format_exception_only(error)).split())
    _write(work_dir, dict(_attempt(previous), state='failed', ended=time.time(), error=line,
                          traceback=text))


def _attempt(state: dict) -> dict:
    """The fields of ``state`` that describe its attempt (not its outcome)."""
    return {k: state[k] for k in ('attempts', 'pid', 'host', 'started', 'job', 'log', 'restarts')
            if k in state}


def _write(work_dir, state: dict) -> None:
    write_text_atomically(Path(work_dir) / STATE_FILE, json.dumps(state, indent=1,
                                                                  sort_keys=True),
                          'unit state')

"""The state file of a protocol unit: how far it got, where, and why it failed.

Written by the unit function (``ProtocolRunner.unit_rows``) whichever way it runs (in turn,
``--jobs N``, a Slurm array task), read by ``run_protocol.py --status`` (``status.py``). It is
the hidden sibling ``.<work dir name>.state.json`` of the unit's work dir, beside its lock file
(the work dir itself holds the run only: ``claim_work_dir``), written atomically. Fields:

``state``     ``running`` (an attempt started and has not ended; a killed attempt stays so),
              ``done`` (every row written) or ``failed``;
``started``   Unix time the attempt started, ``finished`` when it ended (done or failed);
``attempts``  how many times the unit started;
``restarts``  ``SLURM_RESTART_COUNT`` of the attempt (how often its Slurm task was requeued);
``job``       the Slurm job of the attempt (``<array job>_<index>`` or ``<job>``; '' locally);
``host``, ``pid``, ``log`` (the Slurm task's stderr file; '' locally);
``error``     a failed attempt's error line (the exception's type and message, one line).

Whether a ``running`` attempt is alive is not in the file: the status reads it from ``squeue``
(Slurm) or the work dir's lock (a local process holds it while it runs the unit).
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path

from vpn_plugin.errors import describe, write_text_atomically


def state_path(work_dir) -> Path:
    """``<parent>/.<work dir name>.state.json``."""
    work_dir = Path(work_dir)
    return work_dir.parent / f'.{work_dir.name}.state.json'


def read_state(work_dir) -> dict | None:
    """The unit's state (module docstring), ``None`` when it never started."""
    path = state_path(work_dir)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as error:  # written atomically: only a foreign edit gets here
        raise ValueError(f'{path}: not a unit state file ({error}); delete it') from None


def write_state(work_dir, state: dict) -> None:
    write_text_atomically(state_path(work_dir), json.dumps(state, sort_keys=True),
                          'unit state file')


def launcher_job() -> tuple:
    """(job id, stderr log file) of the submitit job this process runs in (a Slurm array task
    ``<array>_<index>``, or submitit's local executor's job), ('', '') outside one."""
    if not os.environ.get('SUBMITIT_EXECUTOR'):
        return '', ''
    import submitit
    environment = submitit.JobEnvironment()
    return str(environment.job_id), str(environment.paths.stderr)


@contextlib.contextmanager
def tracking(work_dir):
    """Record one attempt at the unit in ``work_dir``: ``running`` now, then ``done`` when the
    block ends, or ``failed`` with the error's last line when it raises an ``Exception``. An
    interruption (``SystemExit`` of a requeue, ``KeyboardInterrupt``, a kill) leaves it
    ``running``: the status tells a live attempt from a dead one by the job or the lock."""
    previous = read_state(work_dir) or {}
    job, log = launcher_job()
    state = dict(state='running', started=time.time(), attempts=previous.get('attempts', 0) + 1,
                 restarts=int(os.environ.get('SLURM_RESTART_COUNT') or 0), job=job, log=log,
                 host=socket.gethostname(), pid=os.getpid())
    write_state(work_dir, state)
    try:
        yield
    except Exception as error:
        write_state(work_dir, dict(state, state='failed', finished=time.time(),
                                   error=error_line(error)))
        raise
    write_state(work_dir, dict(state, state='done', finished=time.time()))


def mark_failed(work_dir, error: str) -> None:
    """Record that the unit will not run again without being resubmitted (e.g. its task was
    requeued more often than ``--max-requeues``)."""
    job, log = launcher_job()
    previous = read_state(work_dir) or {}
    write_state(work_dir, dict(previous, state='failed', finished=time.time(), error=error,
                               job=job, log=log,
                               restarts=int(os.environ.get('SLURM_RESTART_COUNT') or 0)))


def error_line(error: BaseException, limit: int = 400) -> str:
    """``<type>: <message>`` on one line (at most ``limit`` characters)."""
    text = f'{type(error).__name__}: ' + ' '.join(describe(error).split())
    return text if len(text) <= limit else text[:limit - 3] + '...'

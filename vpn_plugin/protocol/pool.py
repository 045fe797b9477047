"""``run_protocol.py --jobs N``: N protocol units at once, one process each.

Each unit (a training and its tests, ``ProtocolRunner.unit_rows``) runs in a process of its
own, pinned to a slot: a share of the CPU cores (``sched_setaffinity``) with as many torch
threads, and on a machine with GPUs one GPU (slot i -> GPU i mod count). The child sends its
rows back; only this (the parent) process writes the results file, in the order of the units,
so the file is the one a sequential run writes, and resuming works as for a sequential run.
The children die with the parent (Linux ``PR_SET_PDEATHSIG``): a killed pool leaves no
orphan training behind in a work dir that the next call would reuse. Each job runs the unit
function (``ProtocolRunner.run_unit``, as a sequential run and a Slurm array task do) with its
rows handed to the parent. A unit that fails does not stop the others: its error is logged
and recorded in its work dir (``unit_state.json``), the pool goes on, and at the end
``UnitsFailedError`` names every failed unit.

Processes are forked (no re-import; children start in milliseconds) unless this process has
already initialised CUDA, which a forked child cannot use: then they are spawned.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import traceback
from dataclasses import asdict, dataclass
from multiprocessing.connection import wait

from .results import row_from_dict
from .progress import Progress, log, unit_name


@dataclass
class Slot:
    """Where one job runs: CPU cores (and torch threads), GPU index among the visible ones."""
    index: int
    cores: tuple
    gpu: int


def slots(jobs: int, cores=None) -> list[Slot]:
    """``jobs`` slots sharing ``cores`` (default: this process's) evenly; with more jobs than
    cores, jobs share single cores round-robin."""
    if jobs < 1:
        raise ValueError(f'--jobs {jobs}; expected >= 1')
    cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
    if len(cores) >= jobs:
        per_job = len(cores) // jobs
        groups = [tuple(cores[i * per_job:(i + 1) * per_job]) for i in range(jobs)]
    else:
        groups = [(cores[i % len(cores)],) for i in range(jobs)]
    return [Slot(i, group, i) for i, group in enumerate(groups)]


def run_pool(runner, units: list, done: set, jobs: int,
             progress: Progress | None = None) -> list:
    """Run ``units`` with ``runner`` (a ``ProtocolRunner``), ``jobs`` at once (module docstring);
    every row goes through ``runner.record``; ``progress`` counts the finished units (ETA).
    Returns the failed units as ``(unit, error text)``."""
    import torch
    context = multiprocessing.get_context('spawn' if torch.cuda.is_initialized() else 'fork')
    free, queue = slots(jobs), list(enumerate(units))
    running, finished, failures = {}, {}, []
    written = 0
    progress = progress or Progress(len(units), jobs=jobs)
    try:
        while queue or running:
            while queue and free:
                index, unit = queue.pop(0)
                running.update(_start(context, runner, index, unit, done, free.pop(0), len(units)))
            for receiver in wait(list(running)):
                index, unit, process, slot = running.pop(receiver)
                status, payload = _receive(receiver, process)
                free.append(slot)
                if status == 'error':
                    failures.append((unit, payload))
                    finished[index] = []  # no rows: the units behind it are written
                    if payload.startswith(DIED):
                        runner.failure(unit, RuntimeError(payload))
                else:
                    finished[index] = [row_from_dict(row, f'job of {unit_name(unit)}')
                                       for row in payload]
                    progress.done(index)  # not len(finished): written units leave it
                    log(f'finished {unit_name(unit)}' + progress.text())
            while written in finished:  # in unit order: the file of a sequential run
                for row in finished.pop(written):
                    runner.record(row, done)
                written += 1
    finally:
        for _, _, process, _ in running.values():
            process.terminate()
    for index in sorted(finished):  # after an interruption: what finished behind it
        for row in finished[index]:
            runner.record(row, done)
    return failures


def _start(context, runner, index, unit, done, slot: Slot, total: int) -> dict:
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(runner, unit, done, slot, sender,
                                                   os.getpid()),
                              name=f'protocol-job-{slot.index}')
    process.start()
    sender.close()
    log(f'[{index + 1}/{total}] {unit_name(unit)} -> job {slot.index} (cores '
         f'{",".join(map(str, slot.cores))}, pid {process.pid})')
    return {receiver: (index, unit, process, slot)}


def _receive(receiver, process) -> tuple:
    try:
        message = receiver.recv()
    except EOFError:
        message = None
    process.join()
    receiver.close()
    if message is None:
        return 'error', f'{DIED} {process.exitcode} and no result'
    return message


DIED = 'the process of the run exited with code'


def _child(runner, unit, done, slot: Slot, sender, parent: int) -> None:
    _die_with_parent(parent)
    try:
        _pin(slot)
        rows = runner.run_unit(unit, done, record=lambda row: None)  # the parent records them
        sender.send(('ok', [asdict(row) for row in rows]))
    except Exception as error:  # noqa: BLE001  (logged and recorded; the parent goes on)
        sender.send(('error', runner.failure(unit, error)[1]))
    except BaseException:  # noqa: BLE001  (an interruption: reported to the parent)
        sender.send(('error', f'{unit_name(unit)}:\n{traceback.format_exc()}'))
    finally:
        sender.close()


def _pin(slot: Slot) -> None:
    import torch
    os.sched_setaffinity(0, slot.cores)
    os.environ['OMP_NUM_THREADS'] = str(len(slot.cores))
    torch.set_num_threads(len(slot.cores))
    if torch.cuda.is_available():
        torch.cuda.set_device(slot.gpu % torch.cuda.device_count())


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when its parent (pid ``parent``) dies; elsewhere nothing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call
        os._exit(1)


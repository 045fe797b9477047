"""``run_protocol.py --launcher slurm``: a protocol's units as ONE Slurm job array (submitit).

What is submitted
    The units the dry run lists, less those done (every row in the results file) and those
    queued or running (their task of an earlier submission is still in ``squeue``), so the
    same command submitted again submits only what is missing. ``--runs-per-job K`` puts up
    to K units into one array task, run one after the other, in order of decreasing estimated
    time (stable: the dry run's order among equals), so units of like cost share a task and
    the longest tasks start first when ``--max-parallel`` throttles them. A task holds no more
    estimated time than K of the shortest units (:func:`task_capacity`): ViterbiPlanNet units
    of a few minutes share tasks while a PDPP or CEFITO unit stays alone, never waiting
    behind another.
One array, one set of resources
    A Slurm array has one time limit and one resource request for all its tasks. Every task
    gets ``--gpus-per-run``, ``--cpus-per-run``, ``--mem-per-run``; the time limit is
    ``--time-limit`` or the LARGEST task's estimate (the dry run's cost model with
    ``--epoch-seconds``) x :data:`SAFETY_FACTOR` + :data:`MINUTES_PER_UNIT` per unit of that
    task, capped at the partition's ``MaxTime`` (``scontrol show partition``). The maximum,
    not one array per method: one job id to follow and to cancel, and ``--max-parallel`` (the
    array's ``%N`` throttle) bounds the whole protocol, which several arrays cannot; a task
    that ends early frees its resources at once, so the longer limit costs queue priority
    only (backfill places short limits more easily). A protocol whose methods differ by
    orders of magnitude is submitted method by method (``--methods``), one array each,
    and the dry run says so. A task that reaches its limit is checkpointed and requeued
    (below) and goes on, so a limit below the estimate costs requeues, not the unit.
Dispatch only
    An array task (:class:`ProtocolTask`) runs its units with ``ProtocolRunner.run_unit``, the
    function a local run calls: it trains (or resumes) in the unit's work dir, appends each row
    to the results file under its lock, and skips a unit whose rows are there (a requeued
    copy of a finished task adds nothing). A failing unit is recorded in its state file
    (``unit_state.py``) and the task goes on with its next unit; the task then fails, naming
    them. The shared filesystem is the only channel: no service, no database.
Requeue
    Tasks are submitted with ``--requeue``: Slurm requeues one on node failure, preemption or
    ``scontrol requeue``; submitit (the task is a ``Checkpointable``) requeues it when its time
    limit nears (``USR2`` 90 s before). The requeued task runs its units again: finished ones
    are skipped, the interrupted one resumes from the last checkpoint in its work dir. A task
    started more than ``--max-requeues`` times (``SLURM_RESTART_COUNT``) marks its unfinished
    units failed instead.
Records
    ``<out>/<protocol>/slurm/``: submitit's files (``<job>_submission.sh``, pickles, the task
    logs ``<array>_<index>_0_log.out`` / ``.err``) and ``submissions.jsonl``, one line per
    submission: the array job, each task's id, log and units (by work dir), the resources.
    ``--status`` (``status.py``) and a resubmission read them. Each array carries the
    sbatch ``--comment`` :func:`status.folder_marker` of its protocol folder: a submission
    asks ``squeue`` for the folder's queued or running arrays and refuses when one of them is
    not in the records (the records deleted or replaced while it runs would send its units
    a second time).
Time limits
    A limit at or below submitit's signal lead (:data:`SIGNAL_LEAD_SECONDS`) requeues every
    task as it starts: ``--time-limit`` is refused below 2 minutes, and so is a partition
    whose ``MaxTime`` caps every limit below that floor.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from submitit.helpers import Checkpointable

from vpn_plugin.locks import exclusive_lock, lock_path_of
from .dry_run import format_duration, plan_runs
from .progress import Progress, log, unit_name
from .runner import TRAIN_DONE, claim_work_dir, with_stages
from .status import (RECORDS, folder_marker, marked_arrays, read_submissions, recorded_arrays,
                     slurm_folder, squeue_tasks)
from .unit_state import unit_failed

SAFETY_FACTOR = 2.0     # time limit = the task's estimate x this + MINUTES_PER_UNIT per unit ...
MINUTES_PER_UNIT = 10   # ... for what the cost model leaves out: start-up, tests, checkpoints
SIGNAL_LEAD_SECONDS = 90  # submitit's --signal=USR2@90 (slurm_signal_delay_s, its default)
SPREAD_NOTE = 8.0       # the dry run suggests one array per method beyond this cost ratio
# sbatch options that have their own flag (--slurm-options must not set them)
OWN_FLAGS = {'partition': '--partition', 'p': '--partition', 'time': '--time-limit',
             't': '--time-limit', 'array': '--max-parallel', 'cpus-per-task': '--cpus-per-run',
             'c': '--cpus-per-run', 'gpus': '--gpus-per-run', 'gpus-per-node': '--gpus-per-run',
             'gres': '--gpus-per-run', 'mem': '--mem-per-run', 'requeue': '(always on)',
             'no-requeue': '(requeue is always on)', 'output': '(the log folder)',
             'error': '(the log folder)', 'signal': '(submitit)', 'open-mode': '(submitit)',
             'comment': '(this tool: it marks the protocol folder\'s jobs)'}


@dataclass
class SlurmRequest:
    """The command line's Slurm flags (``tools/run_protocol.py --help``)."""
    partition: str
    gpus_per_run: int = 0
    cpus_per_run: int = 1
    mem_per_run: str | None = None      # sbatch --mem syntax: 16G, 4000M
    time_limit: int | None = None       # minutes; None: from the cost model
    max_parallel: int | None = None     # the array throttle %N
    runs_per_job: int = 1
    max_requeues: int = 3
    options: dict = field(default_factory=dict)  # other sbatch options (account, qos, ...)


@dataclass
class Task:
    """One array task: its units, run one after the other, and their estimated seconds."""
    units: list
    seconds: float


@dataclass
class ArrayPlan:
    """What one submission sends (``--dry-run`` prints it)."""
    tasks: list
    time_limit: int             # minutes
    limit_note: str             # how the time limit was set
    skipped_done: int = 0
    skipped_queued: int = 0
    methods: list = field(default_factory=list)  # (name, units, seconds per unit, total seconds)
    warnings: list = field(default_factory=list)


# ---------------------------------------------------------------------------- parsing flags
def parse_slurm_time(text: str, what: str = '--time-limit') -> int | None:
    """Minutes of a Slurm time (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
    ``D-HH:MM:SS``), rounded up; ``None`` for ``UNLIMITED``/``INFINITE``."""
    text = str(text).strip()
    if text.upper() in ('UNLIMITED', 'INFINITE'):
        return None
    match = re.fullmatch(r'(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?', text)
    if not match:
        raise ValueError(f'{what} {text!r} is not a Slurm time; expected minutes, MM:SS, '
                         'HH:MM:SS or D-HH:MM:SS')
    days, first, second, third = match.groups()
    numbers = [int(n) for n in (first, second, third) if n is not None]
    if days is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = (numbers + [0, 0])[:3]
        total = int(days) * 1440 + hours * 60 + minutes + seconds / 60
    elif len(numbers) == 3:
        total = numbers[0] * 60 + numbers[1] + numbers[2] / 60
    else:  # MM or MM:SS
        total = numbers[0] + (numbers[1] / 60 if len(numbers) == 2 else 0)
    if total <= 0:
        raise ValueError(f'{what} {text!r}: expected a time above 0')
    return math.ceil(total)


def format_slurm_time(minutes: int) -> str:
    """``D-HH:MM:00`` / ``HH:MM:00`` of whole minutes."""
    days, rest = divmod(int(minutes), 1440)
    text = f'{rest // 60:02d}:{rest % 60:02d}:00'
    return f'{days}-{text}' if days else text


def parse_memory(text: str) -> str:
    """An sbatch ``--mem`` value (``16G``, ``4000M``, ``1T``; a number alone is megabytes)."""
    if not re.fullmatch(r'[1-9]\d*[KMGT]?', str(text).strip().upper()):
        raise ValueError(f'--mem-per-run {text!r}: expected a size as sbatch --mem takes it, '
                         'e.g. 16G or 4000M')
    size = str(text).strip().upper()
    if size.isdigit() and int(size) < 1024:  # "16" meant as 16G is 16 MB to sbatch
        raise ValueError(f'--mem-per-run {text!r}: sbatch reads a number without a unit as '
                         f'megabytes ({size} MB, too little for a training); expected the unit '
                         f'written: {size}G, or {size}M if megabytes are meant')
    return size


def parse_options(items) -> dict:
    """``--slurm-options key=value ...`` (or ``key`` alone for a switch, e.g. ``exclusive``)
    as sbatch options; keys with a flag of their own are refused, naming it."""
    options = {}
    for item in items or ():
        key, has_value, value = str(item).partition('=')
        key = key.strip().lstrip('-')
        if not re.fullmatch(r'[a-z][a-z0-9_-]*', key) or (has_value and not value.strip()):
            raise ValueError(f'--slurm-options {item!r}: expected key=value with an sbatch '
                             'option name, e.g. account=myproject qos=normal constraint=a100')
        if key.replace('_', '-') in OWN_FLAGS:
            raise ValueError(f'--slurm-options {item!r}: {key} is set by '
                             f'{OWN_FLAGS[key.replace("_", "-")]}, not here')
        if key.replace('_', '-') in options:
            raise ValueError(f'--slurm-options {item!r}: {key} is given twice; give each '
                             'option once')
        options[key.replace('_', '-')] = value.strip() if has_value else True
    return options


# ---------------------------------------------------------------------------- Slurm queries
def partition_limit(partition: str) -> tuple:
    """(MaxTime of ``partition`` in minutes or ``None`` when unlimited, note); a partition
    Slurm does not know is an error naming those it knows. Without ``scontrol`` (a machine
    outside the cluster): ``None`` and a note saying the limit is unknown."""
    try:
        done = subprocess.run(['scontrol', 'show', 'partition', partition, '-o'],
                              capture_output=True, text=True, timeout=60)
    except OSError:
        return None, 'the partition limit is unknown here (no scontrol)'
    except subprocess.TimeoutExpired:
        raise RuntimeError('scontrol show partition did not answer in 60 s; is slurmctld '
                           'up?') from None
    if done.returncode:
        raise ValueError(f'--partition {partition!r}: {done.stderr.strip() or done.stdout.strip()}'
                         f'; partitions here: {", ".join(known_partitions()) or "none"}')
    match = re.search(r'\bMaxTime=(\S+)', done.stdout)
    if not match:
        return None, 'the partition lists no MaxTime'
    limit = parse_slurm_time(match.group(1), f'MaxTime of partition {partition}')
    return limit, (f'partition {partition} MaxTime {match.group(1)}' if limit
                   else f'partition {partition} has no time limit')


def check_partition_cpus(partition: str, cpus: int) -> None:
    """``--cpus-per-run`` must fit one node of ``partition``: Slurm accepts a larger request
    and leaves it pending for ever (reason ``PartitionConfig``). Unchecked without ``sinfo``."""
    try:
        done = subprocess.run(['sinfo', '-h', '-N', '-p', partition, '-o', '%c'],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return
    counts = [int(n) for n in re.findall(r'\d+', done.stdout)]
    if counts and cpus > max(counts):
        raise ValueError(f'--cpus-per-run {cpus}: the largest node of partition {partition} has '
                         f'{max(counts)} CPUs (sinfo); Slurm would keep the tasks pending for ever '
                         f'(reason PartitionConfig): give at most {max(counts)}')


def known_partitions() -> list:
    try:
        done = subprocess.run(['sinfo', '-h', '-o', '%P'], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [name.rstrip('*') for name in done.stdout.split()]


# ---------------------------------------------------------------------------- planning
def unit_seconds(runner, units, epoch_seconds: float) -> list:
    """The dry run's estimate (seconds, one process) of each unit's training, plus its
    pre-training stage's while that stage is not trained (any of its units may train it)."""
    planned = plan_runs(with_stages(units), runner.work_dir, runner.max_epochs, epoch_seconds,
                        smoke=runner.smoke)
    by_unit = {id(unit): run.seconds for unit, run in zip(with_stages(units), planned)}
    seconds = []
    for unit in units:
        stage = unit.pretrained['unit'] if unit.pretrained else None
        pending_stage = stage and not (Path(runner.work_dir(stage)) / TRAIN_DONE).is_file()
        seconds.append(by_unit[id(unit)] + (by_unit[id(stage)] if pending_stage else 0.0))
    return seconds


def pack(units, seconds, runs_per_job: int) -> list:
    """:class:`Task` s of up to ``runs_per_job`` units in order of decreasing estimate; a task
    takes the next unit while it stays within :func:`task_capacity` (module docstring)."""
    if runs_per_job < 1:
        raise ValueError(f'--runs-per-job {runs_per_job}; expected >= 1')
    capacity = task_capacity(seconds, runs_per_job) * (1 + 1e-9)
    tasks = []
    for index in sorted(range(len(units)), key=lambda i: -seconds[i]):
        last = tasks[-1] if tasks else None
        if (last is None or len(last.units) == runs_per_job
                or last.seconds + seconds[index] > capacity):
            tasks.append(Task([], 0.0))
        tasks[-1].units.append(units[index])
        tasks[-1].seconds += seconds[index]
    return tasks


def task_capacity(seconds, runs_per_job: int) -> float:
    """The most estimated seconds one task may hold: ``runs_per_job`` times the shortest
    (non-zero) unit's. Only short units share a task: a unit longer than that is alone,
    so packing never delays an expensive unit behind others."""
    costs = [value for value in seconds if value > 0]
    return runs_per_job * min(costs) if costs else 0.0


def plan_array(runner, units, request: SlurmRequest, epoch_seconds: float,
               queued: set = frozenset(), limit=None) -> ArrayPlan:
    """The array that submitting ``units`` sends: the units neither done nor in ``queued``
    (absolute work dirs), packed, with the time limit (module docstring). ``limit``: the
    partition's (minutes, note), read from Slurm when not given."""
    done = runner.done_keys()
    open_units = [u for u in units if not runner.is_done(u, done)]
    runner.check_done_configs([u for u in units if u not in open_units])
    runner.check_done_features([u for u in units if u not in open_units])
    todo = [u for u in open_units if str(Path(runner.work_dir(u)).absolute()) not in queued]
    seconds = unit_seconds(runner, todo, epoch_seconds)
    tasks = pack(todo, seconds, request.runs_per_job)
    check_partition_cpus(request.partition, request.cpus_per_run)  # whoever read the limit
    partition_max, partition_note = limit if limit else partition_limit(request.partition)
    check_time_floor(request, partition_max, partition_note)
    plan = ArrayPlan(tasks, 0, '', len(units) - len(open_units), len(open_units) - len(todo),
                     _per_method(todo, seconds))
    longest = max(tasks, key=lambda t: t.seconds) if tasks else None
    if request.time_limit:
        plan.time_limit, plan.limit_note = request.time_limit, '--time-limit'
        if request.time_limit * 60 <= SIGNAL_LEAD_SECONDS:
            raise ValueError(
                f'--time-limit {format_slurm_time(request.time_limit)}: submitit signals a task '
                f'to checkpoint and requeue {SIGNAL_LEAD_SECONDS} s before its time limit, so '
                'under this limit every task is requeued as soon as it starts and ends '
                f'"timed-out too many times"; expected at least '
                f'{SIGNAL_LEAD_SECONDS // 60 + 1} minutes')
        if partition_max and request.time_limit > partition_max:
            raise ValueError(f'--time-limit {format_slurm_time(request.time_limit)} is above '
                             f'the {partition_note}')
    elif longest:
        wanted = math.ceil(longest.seconds * SAFETY_FACTOR / 60
                           + MINUTES_PER_UNIT * len(longest.units))
        plan.time_limit = min(wanted, partition_max) if partition_max else wanted
        plan.limit_note = (f'the longest task ~{format_duration(longest.seconds)} x '
                           f'{SAFETY_FACTOR:g} + {MINUTES_PER_UNIT} min per unit'
                           + (f', capped at the {partition_note}' if plan.time_limit < wanted
                              else f'; {partition_note}'))
    plan.warnings = _warnings(plan, request)
    return plan


def check_time_floor(request: SlurmRequest, partition_max, partition_note: str) -> None:
    """A partition whose ``MaxTime`` is at or below submitit's signal lead
    (:data:`SIGNAL_LEAD_SECONDS`) caps every limit below the floor ``--time-limit`` has: each
    task would be signalled to requeue as it starts and end "timed-out too many times"
    without training. Refused, naming the partition, its MaxTime and the floor."""
    if partition_max and partition_max * 60 <= SIGNAL_LEAD_SECONDS:
        raise ValueError(
            f'--partition {request.partition}: its MaxTime caps every task at '
            f'{format_slurm_time(partition_max)} ({partition_note}), but submitit signals a task '
            f'to checkpoint and requeue {SIGNAL_LEAD_SECONDS} s before its time limit, so every '
            'task would be requeued as soon as it starts and nothing would train; expected a '
            f'partition whose MaxTime is at least {SIGNAL_LEAD_SECONDS // 60 + 1} minutes')


def _method(unit) -> str:
    """A unit's methods as the progress lines name them, without horizon and seed."""
    return unit_name(unit).rsplit(' T=', 1)[0]


def _per_method(units, seconds) -> list:
    """(name, units, seconds per unit, total seconds) per training run of the protocol."""
    groups = {}
    for unit, estimate in zip(units, seconds):
        groups.setdefault(_method(unit), []).append(estimate)
    return [(name, len(values), sum(values) / len(values), sum(values))
            for name, values in groups.items()]


def _warnings(plan: ArrayPlan, request: SlurmRequest) -> list:
    """Tasks that need more requeues at the time limit than allowed (one line per kind of
    task), and a spread of unit costs that one time limit serves badly."""
    warnings, kinds = [], {}
    limit_seconds = plan.time_limit * 60
    for task in plan.tasks:
        requeues = math.ceil(task.seconds / limit_seconds) - 1 if limit_seconds else 0
        if requeues > request.max_requeues:
            kind = ', '.join(dict.fromkeys(_method(u) for u in task.units))
            count, most = kinds.get(kind, (0, 0.0))
            kinds[kind] = (count + 1, max(most, task.seconds))
    for kind, (count, seconds) in kinds.items():
        requeues = math.ceil(seconds / limit_seconds) - 1
        warnings.append(f'{count} task{"s" if count > 1 else ""} of {kind}: up to '
                        f'~{format_duration(seconds)} by the cost model, ~{requeues} requeues at '
                        f'the time limit {format_slurm_time(plan.time_limit)}, more than '
                        f'--max-requeues {request.max_requeues}: raise it, or give '
                        '--epoch-seconds measured on your nodes')
    costs = [per_unit for _, _, per_unit, _ in plan.methods if per_unit > 0]
    if costs and max(costs) > SPREAD_NOTE * min(costs):
        warnings.append(f'the units differ {max(costs) / min(costs):.0f}x in estimated time; '
                        'every task gets the longest one\'s time limit: submit the methods '
                        'as separate arrays (--methods) for tighter limits')
    return warnings


def wall_seconds(tasks, parallel: int) -> float:
    """Wall time of ``tasks`` run ``parallel`` at a time in array order (each starts when one
    ends; queue waits not counted)."""
    ends = [0.0] * max(1, min(parallel, len(tasks) or 1))
    for task in tasks:
        first = min(range(len(ends)), key=ends.__getitem__)
        ends[first] += task.seconds
    return max(ends)


def format_array_plan(plan: ArrayPlan, request: SlurmRequest, epoch_seconds: float) -> list:
    """The ``--dry-run --launcher slurm`` lines."""
    units = sum(len(t.units) for t in plan.tasks)
    skipped = ', '.join(text for count, text in (
        (plan.skipped_done, 'done'), (plan.skipped_queued, 'queued or running')) if count)
    lines = [f'Slurm: 1 job array of {len(plan.tasks)} tasks ({units} units, '
             f'--runs-per-job {request.runs_per_job}'
             + (f'; skipped: {plan.skipped_done + plan.skipped_queued} {skipped}' if skipped
                else '') + f') on partition {request.partition}']
    if not plan.tasks:
        return lines + ['nothing to submit']
    gpus = request.gpus_per_run
    lines.append(
        f'each task: {gpus} GPU{"s" if gpus != 1 else ""}, {request.cpus_per_run} CPU'
        f'{"s" if request.cpus_per_run != 1 else ""}, memory {request.mem_per_run or "the partition default"}'
        f', time limit {format_slurm_time(plan.time_limit)} ({plan.limit_note}), requeue on, '
        f'--max-requeues {request.max_requeues}, '
        + (f'at most {request.max_parallel} at once' if request.max_parallel else 'no throttle')
        + (''.join(f', {k}={v}' for k, v in request.options.items())))
    lines.append(f'per method, by the dry run\'s cost model (--epoch-seconds {epoch_seconds:g}; '
                 'hours of one task each, x --gpus-per-run = GPU-hours):')
    for name, count, per_unit, total in plan.methods:
        lines.append(f'  {name}: {count} unit{"s" if count != 1 else ""} x ~'
                     f'{format_duration(per_unit)} = {total / 3600:.1f} h')
    for index, task in enumerate(plan.tasks):
        lines.append(f'  task {index}: ' + '; '.join(unit_name(u) for u in task.units)
                     + f' (~{format_duration(task.seconds)})')
    parallel = request.max_parallel or len(plan.tasks)
    lines.append('wall time by the cost model (queue waits not counted): ' + ', '.join(
        f'{n} at once ~{format_duration(wall_seconds(plan.tasks, n))}'
        for n in sorted({min(parallel, len(plan.tasks)), 8, 32, 128})))
    return lines + [f'warning: {text}' for text in plan.warnings]


# ---------------------------------------------------------------------------- the array task
class ProtocolTask(Checkpointable):
    """What an array task runs: its units, one after another, through the runner's unit
    function (module docstring). submitit pickles it with the runner; on a requeue
    (``checkpoint``: the same call again) the units resume from their work dirs."""

    def __init__(self, runner, cwd: str, cpus: int, max_requeues: int):
        self.runner, self.cwd, self.cpus, self.max_requeues = runner, cwd, cpus, max_requeues

    def __call__(self, units: list) -> list:
        os.chdir(self.cwd)  # configs and data paths are relative to the submitting directory
        set_threads(self.cpus)
        restarts = int(os.environ.get('SLURM_RESTART_COUNT') or 0)
        failures = []
        for number, unit in enumerate(units, 1):
            log(f'[{number}/{len(units)}] {unit_name(unit)} -> {self.runner.work_dir(unit)}')
            try:
                if restarts > self.max_requeues:
                    self.give_up(unit, restarts)
                else:
                    self.runner.run_unit(unit)
            except Exception as error:  # noqa: BLE001  (recorded; the other units go on)
                traceback.print_exc()
                failures.append(self.runner.failure(unit, error))
        self.runner.raise_failures(failures)
        return [str(self.runner.work_dir(unit)) for unit in units]

    def give_up(self, unit, restarts: int) -> None:
        """Record an unfinished unit of a task requeued more than ``--max-requeues`` times as
        failed (its state file), without running it; raise that error."""
        runner, work_dir = self.runner, self.runner.work_dir(unit)
        with exclusive_lock(lock_path_of(work_dir), what=f'work dir {work_dir}'):
            if runner.is_done(unit, runner.done_keys()):
                return
            claim_work_dir(work_dir, runner.identity(unit))
            error = RuntimeError(f'its task was requeued {restarts} times, more than '
                                 f'--max-requeues {self.max_requeues}')
            unit_failed(work_dir, error)
        raise error


def set_threads(cpus: int) -> int:
    """torch threads = ``OMP_NUM_THREADS`` when the environment sets it, else ``cpus``."""
    import torch
    threads = os.environ.get('OMP_NUM_THREADS')
    if not threads:
        threads = os.environ['OMP_NUM_THREADS'] = str(cpus)
        os.environ.setdefault('MKL_NUM_THREADS', threads)
    torch.set_num_threads(int(threads))
    return int(threads)


# ---------------------------------------------------------------------------- submission
def make_executor(folder: Path, request: SlurmRequest, time_limit: int, name: str,
                  cluster: str = 'slurm', marker: str = ''):
    """The submitit executor of the array (``cluster='local'``: submitit's local executor,
    for tests without Slurm)."""
    import submitit
    executor = submitit.AutoExecutor(folder, cluster=cluster,
                                     slurm_max_num_timeout=request.max_requeues)
    options = dict(request.options, requeue=True, **({'comment': marker} if marker else {}))
    executor.update_parameters(
        name=name, timeout_min=time_limit, cpus_per_task=request.cpus_per_run,
        gpus_per_node=request.gpus_per_run, slurm_partition=request.partition,
        slurm_additional_parameters=options,
        **({'slurm_mem': request.mem_per_run} if request.mem_per_run else {}),
        **({'slurm_array_parallelism': request.max_parallel} if request.max_parallel else {}))
    return executor


def queued_work_dirs(folder: Path, queue=squeue_tasks) -> set:
    """Work dirs (absolute) whose latest task is still queued or running."""
    submitted = read_submissions(folder)
    if not submitted:
        return set()
    tasks = queue({job for job, _ in submitted.values()})
    return {work_dir for work_dir, (job, _) in submitted.items()
            if job in tasks and tasks[job].alive}


def submit_array(executor, task, tasks) -> list:
    """``executor.map_array`` of the tasks' units; sbatch's refusal (an unknown
    ``--slurm-options`` key, an account or QOS the cluster lacks) becomes one line naming it."""
    from submitit.core.utils import FailedJobError
    try:
        return executor.map_array(task, [t.units for t in tasks])
    except FailedJobError as error:
        reason = ' '.join(str(error).split())
        raise ValueError(f'sbatch refused the job array ({reason}); nothing was submitted: '
                         'check --slurm-options, --partition and the resources') from None


def check_unrecorded_jobs(folder: Path, alive: dict) -> None:
    """``alive`` (``{array: state}``, the jobs Slurm lists with this protocol folder's
    comment) must all be in the records: a records folder deleted or replaced while its job
    runs would send that job's units a second time."""
    unrecorded = sorted(set(alive) - recorded_arrays(folder))
    if unrecorded:
        jobs = ', '.join(f'{job} ({alive[job]})' for job in unrecorded)
        raise ValueError(
            f'job array {jobs} of this protocol folder ({folder.parent}) is still queued or '
            f'running, but {folder / RECORDS} does not record it (deleted or replaced?), so '
            'its units would be submitted a second time; nothing was submitted: wait for it '
            f'to end (squeue -j {unrecorded[0]}) or cancel it (scancel {" ".join(unrecorded)}), '
            'then submit again')


def submit(runner, units, request: SlurmRequest, epoch_seconds: float, *, command: str = '',
           cluster: str = 'slurm', queue=squeue_tasks, limit=None, marked=marked_arrays):
    """Submit the units of ``units`` neither done nor queued as one array; returns
    (:class:`ArrayPlan`, submitit's jobs, one per task: none when nothing was submitted). Held
    under the records' lock, so two submissions at once never send a unit twice."""
    folder = slurm_folder(runner)
    folder.mkdir(parents=True, exist_ok=True)
    records = folder / RECORDS
    with exclusive_lock(lock_path_of(records), what=f'Slurm records {records}'):
        if cluster == 'slurm':
            check_unrecorded_jobs(folder, marked(folder_marker(runner.root)))
        plan = plan_array(runner, units, request, epoch_seconds,
                          queued_work_dirs(folder, queue), limit)
        runner.expect(units)  # tools/report.py names the rows still missing
        if not plan.tasks:
            return plan, []
        task = ProtocolTask(runner, os.getcwd(), request.cpus_per_run, request.max_requeues)
        executor = make_executor(folder, request, plan.time_limit,
                                 f'vpn_{runner.protocol}', cluster, folder_marker(runner.root))
        jobs = submit_array(executor, task, plan.tasks)
        record = dict(array=str(jobs[0].job_id).split('_')[0], submitted=time.time(),
                      command=command, partition=request.partition,
                      time_limit=plan.time_limit, tasks=[
                          dict(job=str(job.job_id), log=str(job.paths.stderr),
                               units=[str(Path(runner.work_dir(u)).absolute()) for u in t.units])
                          for job, t in zip(jobs, plan.tasks)])
        with open(records, 'a') as handle:
            handle.write(json.dumps(record) + '\n')
    return plan, jobs


def wait_for(runner, units, poll_seconds: float, estimate: float | None = None,
             queue=squeue_tasks, out=None) -> list:
    """Block until no unit of ``units`` is pending or running, with a progress bar and the
    ETA of :class:`progress.Progress` (units left x measured seconds per finished unit);
    returns the final statuses. The bar is drawn once per change of state (or minute), by
    this function alone: tqdm's own draws (on ``update``, again at ``close``) would repeat
    each line in a log. ``out``: where the bar goes (default: ``sys.stderr`` at the call)."""
    from tqdm import tqdm
    from .status import unit_statuses
    statuses = unit_statuses(runner, units, queue)
    open_at_start = [s for s in statuses if s.state != 'done']
    progress = Progress(len(open_at_start), estimate=estimate)
    shown = state_counts(statuses)
    with tqdm(total=len(units), initial=len(statuses) - len(open_at_start), unit='unit',
              file=out or sys.stderr, bar_format='{l_bar}{bar}| {n_fmt}/{total_fmt} units{postfix}',
              postfix=(shown + progress.text()).strip(), mininterval=math.inf) as bar:
        shown_at = time.monotonic()
        while True:
            finished = max(sum(s.state == 'done' for s in statuses) - bar.n, 0)
            for _ in range(finished):
                progress.done()
            bar.update(finished)  # drawn below (mininterval: never by tqdm)
            states = state_counts(statuses)
            ended = not any(s.state in ('running', 'pending', 'unknown') for s in statuses)
            if finished or states != shown or time.monotonic() - shown_at > 60:
                bar.set_postfix_str((states + progress.text()).strip(), refresh=False)
                if not ended:  # the last line is drawn by close(), once
                    bar.refresh()
                shown, shown_at = states, time.monotonic()
            if ended:
                return statuses  # ('unknown': squeue did not answer this time)
            time.sleep(poll_seconds)
            statuses = unit_statuses(runner, units, queue)


def state_counts(statuses) -> str:
    """``'1 running, 2 pending'``: the units not done, by state."""
    counts = {state: sum(s.state == state for s in statuses)
              for state in ('running', 'pending', 'unknown', 'failed', 'interrupted')}
    return ', '.join(f'{n} {k}' for k, n in counts.items() if n)

"""Run an evaluation protocol (configs x seeds x horizons) and collect one results file.

    .venv/bin/python tools/run_protocol.py configs/protocol/standard_crosstask.py \
        --seeds 0 1 2 --max-epochs 30 --out work_dirs/protocol
    # every run with its config, seed, horizons, epochs, folder and estimated time; no training
    .venv/bin/python tools/run_protocol.py configs/protocol/standard_crosstask.py --dry-run
    .venv/bin/python tools/report.py work_dirs/protocol/standard/results_max_epochs-30.jsonl

Resumable: rerunning the same command skips finished trainings and tests, and an interrupted
training goes on from its last checkpoint (``--checkpoint-interval``; default: about 10 min of
training by the dry run's cost model). A unit that fails does not stop the others; the run
then exits non-zero naming them (state and traceback: ``<work dir>/unit_state.json``).
``--jobs N`` runs N
trainings at once, one process each pinned to its share of the CPU cores (and to a GPU), with
the same rows and results file as one at a time (``vpn_plugin/protocol/pool.py``). Overrides
(``--max-epochs``, ``--val-interval``, ``--batch-size``) name the work dirs and the results
file (``results_max_epochs-30.jsonl`` above), so they never mix with runs of other settings.
The protocol config format is documented in ``vpn_plugin/protocol/runner.py``; the results
format in ``vpn_plugin/protocol/results.py``.

On a Slurm cluster, ``--launcher slurm --partition P`` submits the units as one job array
(submitit) and returns; the same command again submits only what is neither done nor queued;
``--status`` lists every unit's state, local runs included (``vpn_plugin/protocol/slurm.py``,
``status.py``)::

    .venv/bin/python tools/run_protocol.py configs/protocol/standard_niv.py --max-epochs 30 \
        --launcher slurm --partition gpu --gpus-per-run 1 --cpus-per-run 8 --dry-run
    .venv/bin/python tools/run_protocol.py configs/protocol/standard_niv.py --max-epochs 30 --status
"""
import argparse
import contextlib
import os
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# vpn_plugin.mm (torch, OpenMMLab) is imported after the arguments are parsed (--help and
# refusals answer in ~0.1 s; tests/test_import_purity.py)
from vpn_plugin.data_paths import add_data_arguments, data_path_args  # noqa: E402
from vpn_plugin.errors import (NON_NEGATIVE_INT, POSITIVE_FLOAT, POSITIVE_INT,  # noqa: E402
                               at_least, check_folder_target, join_dash_values, parse_once,
                               path_argument, seed_argument, tool_main)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('protocol', type=path_argument, help='protocol config, e.g. '
                        'configs/protocol/ablation_crosstask.py')
    parser.add_argument('--out', type=path_argument,
                        default='work_dirs/protocol', help='root of work dirs and results')
    parser.add_argument('--seeds', nargs='+', type=seed_argument, help='override the protocol seeds')
    parser.add_argument('--horizons', nargs='+', type=POSITIVE_INT, help='run only these training horizons')
    parser.add_argument('--methods', nargs='+', help='run only these methods (test names)')
    parser.add_argument('--max-epochs', type=POSITIVE_INT, help='override train_cfg.max_epochs')
    parser.add_argument('--val-interval', type=POSITIVE_INT, help='with --max-epochs (default: at the end)')
    parser.add_argument('--batch-size', type=POSITIVE_INT, help='override every dataloader batch size')
    parser.add_argument('--smoke', action='store_true',
                        help='a smoke run of every training and test (vpn_plugin/smoke.py: 1 '
                        'epoch of 4 steps, small pre-stages, 32 test windows; well under a minute of CPU '
                        'each on a CPU); rows marked shortened, results_smoke.jsonl')
    parser.add_argument('--checkpoint-interval', type=POSITIVE_INT, metavar='EPOCHS',
                        help='epochs between the checkpoints of each training, which an '
                        'interrupted run resumes from (default: about 10 min of training by '
                        'the --dry-run cost model, at least 1; it changes no result)')
    parser.add_argument('--jobs', type=POSITIVE_INT, default=1,
                        help='runs at once, one process each (pinned to cores / a GPU)')
    parser.add_argument('--log-level', default='WARNING', help='mmengine log level of each run',
                        choices=('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'))
    parser.add_argument('--dry-run', action='store_true',
                        help='list the runs (config, seed, horizons, epochs, folder, estimated '
                        'time), check their configs and options, and exit')
    parser.add_argument('--epoch-seconds', type=POSITIVE_FLOAT,
                        help='--dry-run estimate (and the ETA until the first run finishes): '
                        'seconds per training epoch of ViterbiPlanNet on '
                        'CrossTask T=3 (default: measured on one CPU thread; '
                        'tools/benchmark_epoch.py configs/vpn_crosstask_t3.py measures yours); '
                        "other datasets and methods scale by their measured cost")
    parser.add_argument('--status', action='store_true',
                        help='one line per unit (state, job, elapsed, log, error) and a summary, '
                        'for local and Slurm runs; runs nothing')
    add_data_arguments(parser)
    add_launcher_arguments(parser)
    argv = join_dash_values(parser, sys.argv[1:] if argv is None else argv)
    args = parse_once(parser, argv)
    check_launcher_arguments(parser, args, argv)
    if args.epoch_seconds is None:
        from vpn_plugin.protocol.dry_run import CPU_EPOCH_SECONDS
        args.epoch_seconds = CPU_EPOCH_SECONDS
    return args


# --wait looks at squeue and the work dirs at least this often: its bar and ETA are redrawn each
# minute, and a longer pause (86400 for 86.4) would leave the protocol's end unseen for as long
MAX_POLL_SECONDS = 600.0
POLL_LIMIT_WHY = '--wait must see the end of the protocol within 10 minutes'
SLURM_FLAGS = ('partition', 'gpus_per_run', 'cpus_per_run', 'mem_per_run', 'time_limit',
               'max_parallel', 'runs_per_job', 'max_requeues', 'slurm_options', 'wait')


def add_launcher_arguments(parser) -> None:
    """``--launcher slurm`` and its flags (``vpn_plugin/protocol/slurm.py``)."""
    group = parser.add_argument_group('Slurm (--launcher slurm: one job array through submitit)')
    group.add_argument('--launcher', choices=['local', 'slurm'], default='local',
                       help='local: run here (--jobs N at once); slurm: submit the units as one '
                       'Slurm job array and return')
    group.add_argument('--partition', help='Slurm partition (required with --launcher slurm)')
    group.add_argument('--gpus-per-run', type=NON_NEGATIVE_INT, default=0,
                       help='GPUs of each array task (0 or 1: a unit trains in one process)')
    group.add_argument('--cpus-per-run', type=POSITIVE_INT, default=1,
                       help='CPUs of each array task; its torch threads unless OMP_NUM_THREADS '
                       'is set')
    group.add_argument('--mem-per-run', help='memory of each array task, as sbatch --mem (16G)')
    group.add_argument('--time-limit', help='time limit of each array task (minutes or '
                       'D-HH:MM:SS; default: the longest task\'s estimate x 2 + 10 min per unit, '
                       'capped at the partition\'s MaxTime)')
    group.add_argument('--max-parallel', type=POSITIVE_INT,
                       help='at most this many tasks at once (the array throttle %%N)')
    group.add_argument('--runs-per-job', type=POSITIVE_INT, default=1,
                       help='units per array task, run one after another (pack short units)')
    group.add_argument('--max-requeues', type=NON_NEGATIVE_INT, default=3,
                       help='a task requeued more often marks its unfinished units failed')
    group.add_argument('--slurm-options', nargs='+', metavar='KEY=VALUE',
                       help='other sbatch options, e.g. account=myproject qos=normal')
    group.add_argument('--wait', action='store_true',
                       help='after submitting, wait with a progress bar and ETA until every '
                       'unit has ended; exit status 1 when one failed')
    group.add_argument('--poll-seconds', default=15.0,
                       type=at_least(float, 0.0, strict=True, high=MAX_POLL_SECONDS,
                                     why=POLL_LIMIT_WHY),
                       help='--wait: seconds between two looks at squeue and the work dirs '
                       f'(at most {MAX_POLL_SECONDS:g})')


def check_launcher_arguments(parser, args, argv) -> None:
    given = {token.split('=', 1)[0] for token in argv if token.startswith('--')}
    if args.launcher != 'slurm':
        stray = [f'--{name.replace("_", "-")}' for name in SLURM_FLAGS
                 if f'--{name.replace("_", "-")}' in given]
        if stray:
            parser.error(f'{", ".join(stray)} only with --launcher slurm')
        return
    if args.partition is not None and not args.partition.strip():
        parser.error(f'--partition {args.partition!r}: an empty value; expected the name of a '
                     'Slurm partition (sinfo lists the partitions)')
    if not args.partition and not args.status:
        parser.error('--launcher slurm needs --partition (sinfo lists the partitions)')
    if '--jobs' in given:
        parser.error('--jobs is for local runs; with --launcher slurm, --max-parallel bounds '
                     'the tasks at once')
    if args.gpus_per_run > 1:
        parser.error(f'--gpus-per-run {args.gpus_per_run}: a protocol unit trains in one '
                     'process on one GPU, so its other GPUs would idle; give 0 or 1')


@tool_main
def main(argv=None):
    args = parse_args(argv)
    try:  # reading the protocol and its configs (seconds): a Ctrl-C here ran nothing
        import vpn_plugin.mm  # noqa: F401  (compat fixes + registration before configs are read)
        from vpn_plugin.protocol.dry_run import plan_runs
        from vpn_plugin.protocol.runner import (UnitsFailedError, expand_units, load_protocol,
                                                with_stages)
        check_folder_target(args.out, 'protocol output folder', 'the work dirs and results',
                            '--out')
        if args.status:
            return show_status(args)
        protocol = load_protocol(args.protocol)
        units = expand_units(protocol, seeds=args.seeds, methods=args.methods,
                             horizons=args.horizons)
        runner = protocol_runner(protocol, args)
        if args.dry_run and args.launcher != 'slurm':
            print_dry_run(args, protocol, units, runner)
            return units
    except KeyboardInterrupt:  # one line, not Python's traceback (exit 128 + SIGINT)
        print('interrupted (Ctrl-C) before any unit started: nothing was run or written',
              file=sys.stderr)
        raise SystemExit(130) from None
    if args.launcher == 'slurm':
        return launch_on_slurm(args, protocol, units, runner)
    try:
        def planned(todo):
            return plan_runs(todo, runner.work_dir, runner.max_epochs, args.epoch_seconds,
                             smoke=args.smoke)
        results = runner.run(units, jobs=args.jobs, estimate=lambda todo: sum(
            run.seconds for run in planned(with_stages(todo))),
            unit_estimates=lambda todo: [run.seconds for run in planned(todo)])
    except UnitsFailedError as error:  # the others ran: their rows are written
        raise SystemExit(f'error: {error}') from None
    except KeyboardInterrupt:  # Ctrl-C: one line, not Python's traceback (exit 128 + SIGINT)
        print(f'interrupted (Ctrl-C): the rows of the finished units are kept in '
              f'{runner.results_file}, and each interrupted training keeps its last checkpoint '
              f'in its work dir under {runner.root}; run the same command again to resume '
              '(finished units are skipped, an interrupted training goes on from its last '
              'checkpoint)', file=sys.stderr)
        raise SystemExit(130) from None
    print(results)
    return results


def print_dry_run(args, protocol, units, runner) -> None:
    """Every run with its rows, config, time and folder; the configs checked."""
    from vpn_plugin.protocol.dry_run import format_plan, plan_runs
    from vpn_plugin.protocol.runner import check_units, with_stages
    if protocol.get('requires'):
        print(f'protocol {protocol.protocol} needs: {protocol.requires}', file=sys.stderr)
    planned = plan_runs(with_stages(units), runner.work_dir, runner.max_epochs,
                        args.epoch_seconds, args.checkpoint_interval, smoke=args.smoke)
    print('\n'.join(format_plan(planned, args.epoch_seconds)))
    stages = len(planned) - len(units)
    configs = check_units(units)
    videos, problems = runner.check_feature_files(units)
    for text in problems:
        print(f'warning: {text}', file=sys.stderr)
    found = (f'{len(problems)} splits lack feature files (warnings above): these runs would '
             'fail' if problems else f'the feature files of {videos} videos found')
    print(f'{len(units)} runs' + (f' (+{stages} pre-training stages)' if stages else '')
          + f'; {configs} configs checked; {found}')


def slurm_request(args):
    from vpn_plugin.protocol.slurm import (SlurmRequest, parse_memory, parse_options,
                                           parse_slurm_time)
    return SlurmRequest(
        partition=args.partition, gpus_per_run=args.gpus_per_run,
        cpus_per_run=args.cpus_per_run,
        mem_per_run=parse_memory(args.mem_per_run) if args.mem_per_run else None,
        time_limit=parse_slurm_time(args.time_limit) if args.time_limit else None,
        max_parallel=args.max_parallel, runs_per_job=args.runs_per_job,
        max_requeues=args.max_requeues, options=parse_options(args.slurm_options))


def launch_on_slurm(args, protocol, units, runner):
    """``--launcher slurm``: the dry run of the array, or its submission (and ``--wait``)."""
    from vpn_plugin.protocol.slurm import (format_array_plan, format_slurm_time, plan_array,
                                           submit, wait_for)
    from vpn_plugin.protocol.status import format_status, slurm_folder
    from vpn_plugin.protocol.runner import check_units
    request = slurm_request(args)
    if args.dry_run:
        print_dry_run(args, protocol, units, runner)
        plan = plan_array(runner, units, request, args.epoch_seconds, dry_run_queued(runner))
        print('\n'.join(format_array_plan(plan, request, args.epoch_seconds)))
        return plan
    done = runner.done_keys()
    runner.drop_replaced_rows()
    todo = [u for u in units if not runner.is_done(u, done)]
    check_units(todo)
    runner.check_requirements(todo)
    problems = runner.check_feature_files(todo)[1]
    if problems:  # each task would fail after its wait in the queue
        raise ValueError('nothing was submitted: ' + '\n'.join(problems))
    plan, jobs = submit(runner, units, request, args.epoch_seconds, command=shlex.join(sys.argv))
    for text in plan.warnings:
        print(f'warning: {text}', file=sys.stderr)
    if not jobs:
        print(f'nothing to submit: {plan.skipped_done} units done, {plan.skipped_queued} '
              f'queued or running (of {len(units)})')
    else:
        print(f'submitted job array {str(jobs[0].job_id).split("_")[0]}: {len(plan.tasks)} '
              f'tasks, {sum(len(t.units) for t in plan.tasks)} units (--runs-per-job '
              f'{request.runs_per_job}; skipped {plan.skipped_done} done, '
              f'{plan.skipped_queued} queued or running), time limit '
              f'{format_slurm_time(plan.time_limit)}\nlogs: {slurm_folder(runner)}\n'
              f'status: {status_command(args)}')
    if not args.wait:
        return jobs
    estimate = sum(t.seconds for t in plan.tasks) / max(1, min(
        len(plan.tasks), args.max_parallel or len(plan.tasks)))
    try:
        statuses = wait_for(runner, units, args.poll_seconds, estimate or None)
    except KeyboardInterrupt:  # the wait ends; the submitted jobs do not
        array = str(jobs[0].job_id).split('_')[0]
        print(f'interrupted (Ctrl-C) while waiting: job array {array} keeps running (scancel '
              f'{array} stops it); status: {status_command(args)}', file=sys.stderr)
        raise SystemExit(130) from None
    print('\n'.join(format_status(statuses)))
    unfinished = [s for s in statuses if s.state != 'done']
    if unfinished:
        raise SystemExit(f'error: {len(unfinished)} of {len(units)} units did not finish '
                         '(above, with their logs); run the same command again to resubmit them')
    print(runner.results_file)
    return statuses


def dry_run_queued(runner) -> set:
    """What a submission would skip as queued; empty (with a note) where squeue cannot answer."""
    from vpn_plugin.protocol.slurm import queued_work_dirs
    from vpn_plugin.protocol.status import slurm_folder
    try:
        return queued_work_dirs(slurm_folder(runner))
    except RuntimeError as error:
        print(f'note: {error}; the dry run counts no unit as queued', file=sys.stderr)
        return set()


def protocol_runner(protocol, args):
    """The ``ProtocolRunner`` of ``protocol`` with the command line's settings."""
    from vpn_plugin.protocol.runner import ProtocolRunner
    return ProtocolRunner(protocol, args.out, max_epochs=args.max_epochs,
                          val_interval=args.val_interval, batch_size=args.batch_size,
                          log_level=args.log_level, data_paths=data_path_args(args),
                          checkpoint_interval=args.checkpoint_interval,
                          epoch_seconds=args.epoch_seconds, smoke=args.smoke)


def show_status(args):
    """``--status``: every unit's state. It only reads, so it works from any folder: the
    protocol's relative config paths (``configs/...``) that are no file from the current folder
    are read from the repository, as a results row's config is (``results.config_file``)."""
    from vpn_plugin.data_paths import REPO_ROOT
    from vpn_plugin.protocol.runner import expand_units, load_protocol
    from vpn_plugin.protocol.status import format_status, unit_statuses
    for name in ('protocol', 'out', 'data_root', 'feature_dir'):
        if getattr(args, name, None) is not None:
            setattr(args, name, os.path.abspath(getattr(args, name)))
    protocol = load_protocol(args.protocol)
    def expanded():
        return expand_units(protocol, seeds=args.seeds, methods=args.methods,
                            horizons=args.horizons)
    here = os.getcwd()
    try:
        units = expanded()
    except ValueError as error:
        if 'which is no file' not in str(error) or Path.cwd().resolve() == REPO_ROOT.resolve():
            raise
        here, units = str(REPO_ROOT), None
    with contextlib.chdir(here):
        units = units or expanded()
        print('\n'.join(format_status(unit_statuses(protocol_runner(protocol, args), units))))
    return units


def status_command(args) -> str:
    """The ``--status`` command of this selection (the launcher's flags left out)."""
    command = [os.path.relpath(sys.executable), 'tools/run_protocol.py', args.protocol,
               '--out', args.out]
    for flag in ('seeds', 'horizons', 'methods', 'max_epochs', 'val_interval', 'batch_size',
                 'data_root', 'feature_dir'):
        value = getattr(args, flag)
        if value is not None:
            command += [f'--{flag.replace("_", "-")}',
                        *map(str, value if isinstance(value, list) else [value])]
    return shlex.join(command + ['--smoke'] * args.smoke + ['--status'])


if __name__ == '__main__':
    main()

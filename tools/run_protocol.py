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
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import vpn_plugin.mm  # noqa: E402,F401  (compat fixes + registration before configs are read)
from vpn_plugin.data_paths import add_data_arguments, data_path_args  # noqa: E402
from vpn_plugin.protocol.dry_run import CPU_EPOCH_SECONDS, format_plan, plan_runs  # noqa: E402
from vpn_plugin.protocol.runner import (ProtocolRunner, UnitsFailedError,  # noqa: E402
                                         check_units, expand_units, load_protocol,
                                         with_stages)
from vpn_plugin.errors import (NON_NEGATIVE_INT, POSITIVE_FLOAT, POSITIVE_INT,  # noqa: E402
                               tool_main)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('protocol', help='protocol config, e.g. '
                        'configs/protocol/ablation_crosstask.py')
    parser.add_argument('--out', default='work_dirs/protocol', help='root of work dirs and results')
    parser.add_argument('--seeds', nargs='+', type=NON_NEGATIVE_INT, help='override the protocol seeds')
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
    parser.add_argument('--log-level', default='WARNING', help='mmengine log level of each run')
    parser.add_argument('--dry-run', action='store_true',
                        help='list the runs (config, seed, horizons, epochs, folder, estimated '
                        'time), check their configs and options, and exit')
    parser.add_argument('--epoch-seconds', type=POSITIVE_FLOAT, default=CPU_EPOCH_SECONDS,
                        help='--dry-run estimate (and the ETA until the first run finishes): '
                        'seconds per training epoch of ViterbiPlanNet on '
                        'CrossTask T=3 (default: measured on one CPU thread; '
                        'tools/benchmark_epoch.py configs/vpn_crosstask_t3.py measures yours); '
                        "other datasets and methods scale by their measured cost")
    add_data_arguments(parser)
    return parser.parse_args(argv)


@tool_main
def main(argv=None):
    args = parse_args(argv)
    protocol = load_protocol(args.protocol)
    units = expand_units(protocol, seeds=args.seeds, methods=args.methods,
                         horizons=args.horizons)
    runner = ProtocolRunner(protocol, args.out, max_epochs=args.max_epochs,
                            val_interval=args.val_interval, batch_size=args.batch_size,
                            log_level=args.log_level, data_paths=data_path_args(args),
                            checkpoint_interval=args.checkpoint_interval,
                            epoch_seconds=args.epoch_seconds, smoke=args.smoke)
    if args.dry_run:
        if protocol.get('requires'):
            print(f'protocol {protocol.protocol} needs: {protocol.requires}', file=sys.stderr)
        planned = plan_runs(with_stages(units), runner.work_dir, runner.max_epochs,
                            args.epoch_seconds, args.checkpoint_interval, smoke=args.smoke)
        print('\n'.join(format_plan(planned, args.epoch_seconds)))
        stages = len(planned) - len(units)
        print(f'{len(units)} runs' + (f' (+{stages} pre-training stages)' if stages else '')
              + f'; {check_units(units)} configs checked')
        return units
    try:
        results = runner.run(units, jobs=args.jobs, estimate=lambda todo: sum(
            run.seconds for run in plan_runs(with_stages(todo), runner.work_dir,
                                             runner.max_epochs, args.epoch_seconds,
                                             smoke=args.smoke)))
    except UnitsFailedError as error:  # the others ran: their rows are written
        raise SystemExit(f'error: {error}') from None
    print(results)
    return results


if __name__ == '__main__':
    main()

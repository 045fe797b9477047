"""Evaluate a checkpoint on a config's test split with the mmengine Runner.

    .venv/bin/python tools/test.py configs/vpn_crosstask_t3.py work_dirs/.../epoch_50.pth \
        [--out predictions.pkl] [--out-metrics metrics.json]
    tools/dist_test.sh CONFIG CHECKPOINT NPROC [test.py args...]      # torchrun, CPU or GPU

As in MMAction2/mmdet, ``--out`` (alias ``--dump``) pickles the predictions (one dict per test
sample: ``pred_plan``, ``gt_plan``, ``soft_plan``, ``emissions``, ...) through mmengine's
``DumpResults``, written atomically (``AtomicDumpResults``); the metrics go to ``--out-metrics``,
by default ``<log dir>/test_metrics.json``.
"""
import argparse
import json
import os
import os.path as osp

import vpn_plugin.compat_applied  # noqa: F401  (compat fixes before configs are parsed)
from vpn_plugin.compat import shutdown_distributed
from vpn_plugin.data_paths import (add_runner_arguments, data_path_args,
                                  load_config as read_config)
from vpn_plugin.errors import path_argument, tool_main, write_text_atomically
from vpn_plugin.outputs import add_overwrite_argument, check_output
from vpn_plugin.runner import build_runner

UNCHECKED_METRIC = 'checkpoint/unchecked'  # in the metrics of an unchecked_checkpoint=True test


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test a vpn_plugin checkpoint')
    parser.add_argument('config', help='config file path')
    parser.add_argument('checkpoint', nargs='?',
                        help='checkpoint file (.pth); may be omitted only for models without '
                        'trainable parameters (e.g. LLMPlanner, UniformEmissionPlanner)')
    parser.add_argument('--work-dir', type=path_argument,
                        help='where logs go (default: work_dirs/<config name>)')
    parser.add_argument('--out', '--dump', dest='out', metavar='FILE.pkl',
                        help='pickle the predictions (list of per-sample dicts) to this file')
    parser.add_argument('--out-metrics', metavar='FILE.json',
                        help='write the test metrics here (default: <log dir>/test_metrics.json)')
    add_overwrite_argument(parser, '--out / --out-metrics files')
    add_runner_arguments(parser, 'test_dataloader.batch_size=64')
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def check_outputs(args) -> None:
    """``--out`` and ``--out-metrics`` may replace neither an input (the config, the
    checkpoint) nor a file of another kind (vpn_plugin/outputs.py), before the test runs."""
    inputs = (args.config, args.checkpoint)
    if args.out is not None:
        args.out = str(check_output(args.out, 'predictions', '--out', inputs, args.overwrite))
    if args.out_metrics is not None:
        args.out_metrics = str(check_output(args.out_metrics, 'metrics', '--out-metrics',
                                            inputs, args.overwrite))


def add_dump(cfg, dump_path):
    evaluators = cfg.test_evaluator
    if not isinstance(evaluators, (list, tuple)):
        evaluators = [evaluators]
    cfg.test_evaluator = [*evaluators, dict(type='AtomicDumpResults', out_file_path=dump_path)]


def load_config(args):
    if 'load_from' in (args.cfg_options or {}):
        raise SystemExit(f"--cfg-options load_from={args.cfg_options['load_from']}: test.py "
                         'scores the CKPT argument (given: '
                         f'{args.checkpoint or "none"}); give the checkpoint to test as CKPT, '
                         'not as load_from')
    if args.checkpoint is not None and not osp.isfile(args.checkpoint):
        raise SystemExit(f'checkpoint {args.checkpoint} does not exist')
    cfg = read_config(args.config, args.cfg_options, horizon=args.horizon,
                      **data_path_args(args))
    cfg.launcher = args.launcher
    cfg.work_dir = (args.work_dir or cfg.get('work_dir')
                    or osp.join('work_dirs', osp.splitext(osp.basename(args.config))[0]))
    cfg.load_from = args.checkpoint
    cfg.resume = False
    if cfg.get('load_partial'):
        raise SystemExit(f'{args.config}: load_partial=True is for starting a fine-tuning '
                         '(tools/train.py); a test scores a checkpoint that fits the model '
                         'exactly: drop load_partial')
    if args.out:
        add_dump(cfg, args.out)
    return cfg


def require_parameter_free(model, config):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if trainable:
        raise SystemExit(f'{config}: the model has {trainable} trainable parameters; '
                         'pass the checkpoint to test')


def write_metrics(metrics, path):
    write_text_atomically(path, json.dumps({key: float(value) for key, value in metrics.items()},
                                           indent=2), 'metrics file')


@tool_main
def main(argv=None):
    args = parse_args(argv)
    check_outputs(args)
    runner = build_runner(load_config(args))
    if args.checkpoint is None:
        require_parameter_free(runner.model, args.config)
    metrics = runner.test()
    runner.logger.info(f"model selection: {runner.cfg.get('selection', 'unified')} "
                       '(unified: held-out training videos; authors: best test-window SR)')
    if runner.unchecked_checkpoint:  # unchecked_checkpoint=True: the metrics say so
        metrics = dict(metrics, **{UNCHECKED_METRIC: 1.0})
        runner.logger.warning(f'{UNCHECKED_METRIC}=1: {args.checkpoint} records no '
                              f'{", ".join(runner.unchecked_checkpoint)}; not checked')
    if runner.rank == 0:
        path = args.out_metrics or osp.join(runner.log_dir, 'test_metrics.json')
        write_metrics(metrics, path)
        runner.logger.info(f'test metrics written to {path}')
    shutdown_distributed()
    return metrics


if __name__ == '__main__':
    main()

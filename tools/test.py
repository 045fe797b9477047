"""Evaluate a checkpoint on a config's test split with the mmengine Runner.

    .venv/bin/python tools/test.py configs/vpn_crosstask_t3.py work_dirs/.../epoch_50.pth \
        [--out metrics.json] [--dump predictions.pkl]
"""
import argparse
import json
import os
import os.path as osp

import vpn_plugin  # noqa: F401  (applies vpn_plugin.compat before configs are parsed)
from vpn_plugin.compat import shutdown_distributed
from mmengine.config import Config, DictAction
from mmengine.runner import Runner


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test a vpn_plugin checkpoint')
    parser.add_argument('config', help='config file path')
    parser.add_argument('checkpoint', nargs='?',
                        help='checkpoint file (.pth); may be omitted only for models without '
                        'trainable parameters (e.g. LLMPlanner, UniformEmissionPlanner)')
    parser.add_argument('--work-dir', help='where logs go (default: work_dirs/<config name>)')
    parser.add_argument('--out', help='write the test metrics to this JSON file')
    parser.add_argument('--dump', help='pickle the raw predictions to this .pkl file')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config keys, e.g. test_dataloader.batch_size=64')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                        default='none', help='job launcher')
    parser.add_argument('--local-rank', '--local_rank', type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def add_dump(cfg, dump_path):
    if not dump_path.endswith(('.pkl', '.pickle')):
        raise SystemExit(f'--dump {dump_path}: expected a .pkl or .pickle file name')
    evaluators = cfg.test_evaluator
    if not isinstance(evaluators, (list, tuple)):
        evaluators = [evaluators]
    cfg.test_evaluator = [*evaluators, dict(type='DumpResults', out_file_path=dump_path)]


def load_config(args):
    if args.checkpoint is not None and not osp.isfile(args.checkpoint):
        raise SystemExit(f'checkpoint {args.checkpoint} does not exist')
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    cfg.launcher = args.launcher
    cfg.work_dir = (args.work_dir or cfg.get('work_dir')
                    or osp.join('work_dirs', osp.splitext(osp.basename(args.config))[0]))
    cfg.load_from = args.checkpoint
    cfg.resume = False
    if args.dump:
        add_dump(cfg, args.dump)
    return cfg


def require_parameter_free(model, config):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if trainable:
        raise SystemExit(f'{config}: the model has {trainable} trainable parameters; '
                         'pass the checkpoint to test')


def write_metrics(metrics, path):
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, 'w') as file:
        json.dump({key: float(value) for key, value in metrics.items()}, file, indent=2)


def main(argv=None):
    args = parse_args(argv)
    runner = Runner.from_cfg(load_config(args))
    if args.checkpoint is None:
        require_parameter_free(runner.model, args.config)
    metrics = runner.test()
    runner.logger.info(f"model selection: {runner.cfg.get('selection', 'unified')} "
                       '(unified: held-out training videos; authors: best test-window SR)')
    if args.out and runner.rank == 0:
        write_metrics(metrics, args.out)
    shutdown_distributed()
    return metrics


if __name__ == '__main__':
    main()

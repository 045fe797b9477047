"""Train a vpn_plugin config with the mmengine Runner (mmaction2-style CLI).

    .venv/bin/python tools/train.py configs/vpn_crosstask_t3.py [--resume] [--amp]
    tools/dist_train.sh configs/vpn_crosstask_t3.py 2       # torchrun, CPU or GPU

Same flags as MMAction2's ``tools/train.py`` (``--no-validate``, ``--auto-scale-lr``,
``--diff-rank-seed``, ``--launcher``, ...); the config is written to the work dir, not logged.
"""
import argparse
import os
import os.path as osp

import torch

import vpn_plugin.compat_applied  # noqa: F401  (compat fixes before configs are parsed)
from vpn_plugin.compat import shutdown_distributed
from vpn_plugin.data_paths import add_data_arguments, data_path_args, load_config as read_config
from vpn_plugin.runner import build_runner
from mmengine.config import DictAction


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Train a vpn_plugin model')
    parser.add_argument('config', help='config file path')
    parser.add_argument('--work-dir', help='where logs and checkpoints go '
                        '(default: work_dirs/<config name>)')
    parser.add_argument('--resume', nargs='?', const='auto', metavar='CKPT',
                        help='resume from CKPT, or from the latest checkpoint of '
                        'the work dir when no CKPT is given')
    parser.add_argument('--amp', action='store_true', help='mixed precision (needs a GPU)')
    parser.add_argument('--tensorboard', action='store_true',
                        help='also log to TensorBoard (<work-dir>/<timestamp>/vis_data)')
    parser.add_argument('--seed', type=int, help='random seed (overrides randomness.seed)')
    parser.add_argument('--deterministic', action='store_true',
                        help='deterministic cuDNN / torch algorithms')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config keys, e.g. train_cfg.max_epochs=5')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                        default='none', help='job launcher')
    # torch.distributed.launch passes --local-rank; torchrun sets LOCAL_RANK.
    parser.add_argument('--local-rank', '--local_rank', type=int, default=0)
    add_data_arguments(parser)
    add_mmaction_flags(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def add_mmaction_flags(parser):
    """MMAction2 ``tools/train.py`` switches not covered above."""
    parser.add_argument('--no-validate', action='store_true',
                        help='no validation during training (drops val_cfg/loader/evaluator)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by (total batch size) / '
                        'auto_scale_lr.base_batch_size')
    parser.add_argument('--diff-rank-seed', action='store_true',
                        help='a different seed on each distributed rank')


def apply_mmaction_flags(cfg, args):
    """Fold ``--no-validate``, ``--auto-scale-lr``, ``--diff-rank-seed`` into the config."""
    if args.no_validate:
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
        checkpoint = cfg.get('default_hooks', {}).get('checkpoint', {})
        checkpoint.pop('save_best', None)  # nothing to select on without validation
    if args.auto_scale_lr:
        if 'base_batch_size' not in cfg.get('auto_scale_lr', {}):
            raise SystemExit(f'--auto-scale-lr: {args.config} has no '
                             'auto_scale_lr.base_batch_size (the batch size its lr is for)')
        cfg.auto_scale_lr.enable = True
    if args.diff_rank_seed:
        cfg.setdefault('randomness', dict(seed=None))['diff_rank_seed'] = True


def default_work_dir(config_path):
    return osp.join('work_dirs', osp.splitext(osp.basename(config_path))[0])


def enable_amp(cfg):
    if not torch.cuda.is_available():
        raise SystemExit('--amp needs a CUDA GPU (mmengine AmpOptimWrapper); '
                         'this machine has none, run without --amp')
    cfg.optim_wrapper.type = 'AmpOptimWrapper'
    cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')


def set_resume(cfg, resume):
    cfg.resume = True
    cfg.load_from = None if resume == 'auto' else resume


def apply_args(cfg, args):
    """Fold the command-line switches into the config (CLI wins over the file)."""
    cfg.launcher = args.launcher
    cfg.work_dir = args.work_dir or cfg.get('work_dir') or default_work_dir(args.config)
    if args.amp:
        enable_amp(cfg)
    if args.resume is not None:
        set_resume(cfg, args.resume)
    randomness = cfg.setdefault('randomness', dict(seed=None))
    if args.seed is not None:
        randomness['seed'] = args.seed
    if args.deterministic:
        randomness['deterministic'] = True
    if args.tensorboard:
        cfg.visualizer.vis_backends.append(dict(type='TensorboardVisBackend'))
    apply_mmaction_flags(cfg, args)
    return cfg


def load_config(args):
    cfg = read_config(args.config, args.cfg_options, **data_path_args(args))
    return apply_args(cfg, args)


def main(argv=None):
    args = parse_args(argv)
    runner = build_runner(load_config(args))
    runner.train()
    shutdown_distributed()


if __name__ == '__main__':
    main()

"""Seconds per training epoch of a config, and the share of it spent loading data.

    OMP_NUM_THREADS=1 .venv/bin/python tools/benchmark_epoch.py \
        configs/synthetic/vpn_crosstask_t3_synthetic.py --epochs 3 [--threads 1]

Trains ``--epochs`` epochs with the mmengine Runner (no validation, no checkpoints) and
prints one row per epoch: wall seconds, iterations, and the data-loading share
(mmengine's ``data_time`` over the iteration ``time``, both from IterTimerHook). The
one-off feature extraction that fills the observation cache happens when the dataset is
built, before the first epoch, and is reported separately.
"""
import argparse
import tempfile
import time

import torch

import vpn_plugin.mm  # noqa: F401  (compat + registration)
from mmengine.config import DictAction
from mmengine.hooks import Hook
from mmengine.runner import Runner
from vpn_plugin.data_paths import load_config
from vpn_plugin.errors import tool_main


class EpochClock(Hook):
    """Wall time of each training epoch and its iterations' data/total time."""

    def __init__(self):
        self.rows = []

    def before_train_epoch(self, runner):
        self.began, self.data_time, self.iter_time, self.iters = time.perf_counter(), 0.0, 0.0, 0

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        hub = runner.message_hub
        self.data_time += hub.get_scalar('train/data_time').current()
        self.iter_time += hub.get_scalar('train/time').current()
        self.iters += 1

    def after_train_epoch(self, runner):
        self.rows.append(dict(epoch=runner.epoch + 1, seconds=time.perf_counter() - self.began,
                              iters=self.iters, data_share=self.data_time / self.iter_time))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config')
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--threads', type=int, default=1, help='torch intra-op threads')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    return parser.parse_args(argv)


def build_runner(args, work_dir):
    cfg = load_config(args.config, args.cfg_options)
    cfg.work_dir = work_dir
    cfg.train_cfg.max_epochs = args.epochs
    cfg.train_cfg.val_interval = args.epochs + 1  # no validation inside the measurement
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=args.epochs + 1)
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=10 ** 6)
    return Runner.from_cfg(cfg)


@tool_main
def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as work_dir:
        runner = build_runner(args, work_dir)
        began = time.perf_counter()
        # Built here so that the one-off dataset build is timed apart; train() reuses it.
        runner._train_dataloader = runner.build_dataloader(runner._train_dataloader)
        build_seconds = time.perf_counter() - began
        dataset = runner._train_dataloader.dataset
        clock = EpochClock()
        runner.register_hook(clock, priority='LOWEST')
        runner.train()
    print(f'\n{args.config}: {len(dataset)} training windows, feature dim '
          f'{dataset.feature_dim}, batch {runner.train_dataloader.batch_size}, '
          f'{args.threads} thread(s)')
    print(f'dataset build (feature extraction or cache read): {build_seconds:.1f} s')
    print(f'{"epoch":>5} {"seconds":>8} {"iters":>6} {"data share":>11}')
    for row in clock.rows:
        print(f'{row["epoch"]:>5} {row["seconds"]:>8.2f} {row["iters"]:>6} '
              f'{100 * row["data_share"]:>10.1f}%')
    return clock.rows


if __name__ == '__main__':
    main()

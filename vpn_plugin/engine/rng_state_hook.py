"""Bit-exact resume: the random-number streams travel in the checkpoints.

mmengine checkpoints hold the weights, optimizer, schedulers and the seed, but not the RNG
states: a resumed run reseeds and replays the dropout stream of its first epochs, so it ends
with other weights than the uninterrupted run. ``RNGStateHook`` (in ``default_hooks`` of
``configs/_base_/default_runtime.py``) saves the python, numpy and torch (CPU and every CUDA
device) states in each checkpoint (key ``rng_states``) and restores them when training starts
after ``--resume``. Validation runs between the checkpoint and the next epoch, so it draws from
a forked stream (states saved before it, restored after it): training sees the same numbers
whether or not, and however often, it is validated.

The sampler position: ``DefaultSampler`` shuffles each epoch from ``seed + epoch``, so an
epoch-end checkpoint resumes at the right batch; a checkpoint taken in the middle of an epoch
(``CheckpointHook(by_epoch=False)`` with an epoch loop) cannot resume bit-exactly because the
epoch loop restarts the epoch, and is refused with the reason.

Distributed runs: rank 0 writes the checkpoint, so every rank resumes with rank 0's states;
that is exact with ``randomness.diff_rank_seed=False`` (the default here: the ranks' streams
are the same), not with ``diff_rank_seed=True``.
"""
from __future__ import annotations

import logging

from mmengine.hooks import Hook
from mmengine.logging import print_log

from mmaction.registry import HOOKS
from vpn_plugin.compat import is_resuming
from vpn_plugin.config_types import checked_arguments

from .random_states import get_rng_states, set_rng_states

CHECKPOINT_KEY = 'rng_states'


@HOOKS.register_module()
class RNGStateHook(Hook):
    """Save the RNG states in every checkpoint and restore them on resume (module docstring).

    Priority LOWEST: the states are restored after every other ``before_train`` hook ran, and
    the validation fork closes after every other ``after_val`` hook.
    """

    priority = 'LOWEST'

    @checked_arguments(prefix='RNGStateHook: ')
    def __init__(self):
        self._resumed = None  # RNG states from the resumed checkpoint, until training starts
        self._before_val = None  # training's states while validation runs
        self._batches_in_epoch = 0

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        states = self._before_val if self._before_val is not None else get_rng_states()
        checkpoint[CHECKPOINT_KEY] = dict(states, batches_in_epoch=self._position(runner))

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if not is_resuming(runner):
            return  # loading weights only (load_from, tests): nothing to continue
        if CHECKPOINT_KEY not in checkpoint:
            print_log('RNGStateHook: the resumed checkpoint holds no RNG states (written without '
                      'this hook): the run continues from freshly seeded streams, so it will not '
                      'match an uninterrupted run bit for bit', 'current', logging.WARNING)
            return
        states = dict(checkpoint[CHECKPOINT_KEY])
        batches = states.pop('batches_in_epoch', 0)
        if batches and _is_epoch_loop(runner):
            raise RuntimeError(
                f'the checkpoint was saved after batch {batches} of epoch '
                f'{checkpoint["meta"].get("epoch")}: the epoch loop would restart that epoch, '
                'so the resumed run cannot match the uninterrupted one; resume from an '
                'epoch-end checkpoint (CheckpointHook by_epoch=True)')
        self._resumed = states

    def before_train(self, runner) -> None:
        if self._resumed is not None:
            set_rng_states(self._resumed)
            self._resumed = None

    def before_train_epoch(self, runner) -> None:
        self._batches_in_epoch = 0

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        # counted before the batch: CheckpointHook saves in after_train_iter, before this hook
        self._batches_in_epoch = batch_idx + 1

    def before_val(self, runner) -> None:
        self._before_val = get_rng_states()

    def after_val(self, runner) -> None:
        if self._before_val is not None:
            set_rng_states(self._before_val)
            self._before_val = None

    def _position(self, runner) -> int:
        """Batches of the current epoch already trained; 0 at an epoch's end."""
        if not _is_epoch_loop(runner):
            return 0
        length = len(runner.train_loop.dataloader)
        return 0 if self._batches_in_epoch >= length else self._batches_in_epoch


def _is_epoch_loop(runner) -> bool:
    from mmengine.runner import EpochBasedTrainLoop
    return isinstance(runner.train_loop, EpochBasedTrainLoop)

"""What the EMA copy of a model takes from its pre-stages (PDPP's and CEFITO's EMA hooks).

mmengine's ``EMAHook`` copies the model in ``before_run``, before the pre-stage hooks of
``before_train`` (``PKGHook``: the PKG; ``TaskClassifierHook``: the task classifier;
``KEPPStepModelHook``: the step model) fill it. Until the EMA's first update its copy holds
the untrained task classifier, the placeholder PKG and ``classifier_ready`` / ``pkg_ready`` /
``step_ready`` False; and the EMA copy is what validation scores and every checkpoint stores as
its ``state_dict``. A run shorter than the EMA's first update (CEFITO's ``update_every``) wrote
checkpoints that cannot be tested. :func:`sync_pre_stages` copies the frozen parameters and
the buffers of the model into the EMA copy once the pre-stages ran: the official code trains
its task classifier and step model in scripts of their own before the EMA is made, so its EMA
starts from them too.

A run shorter than the EMA's first copy is allowed (as in the official code) and said: before
training (:func:`log_short_run`) and by every test of its checkpoints (:func:`scored_ema_note`,
from the schedule each checkpoint records: :class:`ScheduledEMAHook`).
"""
from __future__ import annotations

import copy
import logging

import torch
from mmengine.logging import print_log


@torch.no_grad()
def copy_frozen_and_buffers(ema: torch.nn.Module, model: torch.nn.Module) -> None:
    """Copy ``model``'s frozen parameters (``requires_grad`` False: trained by a pre-stage,
    never averaged) and buffers into ``ema`` (its copy). A non-persistent buffer (in no
    checkpoint: KEPP's ``train_endpoints``, (M, 2), empty until the step model fills it) is
    replaced by a clone of the model's, shape included: once the EMA averages, mmengine's
    ``update_parameters`` copies every buffer of the model into the copy, which failed on the
    empty one at the first averaging step of every KEPP training longer than 390 steps."""
    averages = dict(ema.named_parameters())
    parameters = dict(model.named_parameters())
    for name, current in parameters.items():
        if not current.requires_grad:
            averages[name].copy_(current)
    buffers = dict(ema.named_buffers())
    persistent = model.state_dict()
    for name, current in model.named_buffers():
        if name in persistent:
            buffers[name].copy_(current)
        else:
            owner, _, attribute = name.rpartition('.')
            ema.get_submodule(owner)._buffers[attribute] = current.detach().clone()


def sync_pre_stages(hook) -> None:
    """In an ``EMAHook``'s ``before_train`` (priority NORMAL: after the pre-stage hooks' HIGH /
    VERY_HIGH ``before_train``): its EMA copy takes what the pre-stages trained."""
    copy_frozen_and_buffers(hook.ema_model.module, hook.src_model)


def short_run_note(hook: str, steps: int, first_copy: int, every: int, averages_from: int):
    """What the EMA weights of a run of ``steps`` optimiser steps are when it ends before its
    EMA first averages (at step ``averages_from``, 1-based): the model after the last step at
    which the EMA copied it (steps ``first_copy``, ``first_copy + every``, ...), or, before the
    first copy, the initial weights with only what the pre-stages trained.
    ``(is_untrained, text)``; ``None`` when the run reaches ``averages_from``. The EMA weights are what validation scores,
    every checkpoint stores as its ``state_dict`` and ``tools/test.py`` tests, so a short run
    (``--cfg-options train_cfg.max_epochs=1``) must say which weights they are."""
    if steps >= averages_from:
        return None
    weights = ('the EMA weights (what validation scores, every checkpoint stores as its '
               'state_dict and tools/test.py tests)')
    if steps < first_copy:
        return True, (f'{before_first_copy(hook, steps, first_copy)}: {weights} are the '
                      f'initial weights, '
                      f'untrained but for what the pre-stages made (the PKG, a task '
                      f'classifier, a step model); '
                      f'train at least {first_copy} steps to test a trained model')
    last = first_copy + (steps - first_copy) // every * every
    return False, (f'{hook}: {steps} training steps, ending before step {averages_from} where '
                   f'the EMA starts averaging: {weights} are the model after step {last} of {steps} '
                   f'(the EMA copies the model after steps {first_copy}, '
                   f'{first_copy + every}, ... until then)')


def log_short_run(hook: str, steps: int, first_copy: int, every: int,
                  averages_from: int) -> None:
    """Log :func:`short_run_note` (a warning when the EMA weights are untrained)."""
    note = short_run_note(hook, steps, first_copy, every, averages_from)
    if note:
        untrained, text = note
        print_log(text, logger='current', level=logging.WARNING if untrained else logging.INFO)


def untrained_ema_note(hook: str, steps: int, first_copy: int, every: int,
                       averages_from: int) -> str:
    """The short mark of EMA weights that never took the model (a run of ``steps`` optimiser
    steps, fewer than ``first_copy``: :func:`short_run_note`), '' when they took it."""
    note = short_run_note(hook, steps, first_copy, every, averages_from)
    if not note or not note[0]:
        return ''
    return f'EMA weights untrained ({before_first_copy(hook, steps, first_copy)})'


def before_first_copy(hook: str, steps: int, first_copy: int) -> str:
    return (f'{hook}: {steps} training steps, fewer than the {first_copy} after which the EMA '
            'first takes the model')


class ScheduledEMAHook:
    """What PDPP's and CEFITO's EMA hooks share (mixed in before mmengine's ``EMAHook``): a
    :meth:`schedule` (when the EMA first copies the model, how often, from which step it
    averages), logged before training when the run is shorter than its averaging start, and
    written into every checkpoint's ``meta['ema_schedule']``, which a test reads to say
    whether the EMA weights it scores ever took the trained model (:func:`scored_ema_note`);
    tensors the EMA and the model share are saved once (``checkpoint.share_ema_tensors``)."""

    def schedule(self) -> dict:
        """``dict(first_copy=, every=, averages_from=)`` in 1-based optimiser steps."""
        raise NotImplementedError

    def log_short_run(self, runner) -> None:
        log_short_run(type(self).__name__, runner.max_iters, **self.schedule())

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """mmengine's; a resume from a checkpoint without ``ema_state_dict`` says what it
        does (:func:`resumed_without_ema_note`, in place of mmengine's "will make a copy of
        state_dict as the initial ema_state_dict")."""
        from vpn_plugin.compat import is_resuming
        if 'ema_state_dict' in checkpoint or not is_resuming(runner):
            super().after_load_checkpoint(runner, checkpoint)
            return
        from mmengine.runner.checkpoint import load_state_dict
        source = getattr(runner, '_load_from', None) or 'the resumed checkpoint'
        print_log(resumed_without_ema_note(type(self).__name__, source,
                                           self.resumed_ema_count_note()),
                  logger='current', level=logging.WARNING)
        load_state_dict(self.ema_model.module, copy.deepcopy(checkpoint['state_dict']),
                        strict=self.strict_load)

    def resumed_ema_count_note(self) -> str:
        """What the EMA's update count reset to 0 changes (a resume without its state)."""
        raise NotImplementedError

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        from .checkpoint import share_ema_tensors
        super().before_save_checkpoint(runner, checkpoint)
        checkpoint.setdefault('meta', {})['ema_schedule'] = dict(
            hook=type(self).__name__, **self.schedule())
        share_ema_tensors(checkpoint)  # each tensor once in the file


def resumed_without_ema_note(hook: str, source: str, count_note: str) -> str:
    """What a resume from ``source``, a checkpoint without ``ema_state_dict``, does."""
    return (f'{hook}: resuming from {source}, which holds no ema_state_dict (the trained '
            'model\'s own weights and the EMA\'s update count): the model trains on from its '
            'state_dict, which holds the EMA weights when a run with an EMA wrote it (the '
            'trained, un-averaged weights are not in the file), and the EMA restarts as a copy '
            f'of the same weights; {count_note}. The run will not match an uninterrupted one')


def scored_ema_note(hook, checkpoint: dict, source: str) -> tuple:
    """Why a test of ``checkpoint`` under a config with the EMA ``hook`` (None: no EMA) does
    not score trained EMA weights: ``(mark, warning)``, ``('', '')`` when it does.

    * the checkpoint holds no ``ema_state_dict`` (written without an EMA): its ``state_dict``,
      the raw model, is scored where the config asks for EMA weights;
    * its run stopped before the EMA first took the model (``meta['iter']`` steps against the
      schedule that wrote it, ``meta['ema_schedule']``; the config's hook's for a checkpoint
      written before it was recorded): the EMA weights are the initial ones.
    """
    if hook is None:
        return '', ''
    name = type(hook).__name__
    # an EMA hook recorded its schedule: the state_dict holds the EMA weights (swapped in at
    # save), even when the raw model's ema_state_dict was removed from the file since (vague6)
    if 'ema_state_dict' not in checkpoint and 'ema_schedule' not in (checkpoint.get('meta') or {}):
        return (f'no EMA weights ({name}: checkpoint without ema_state_dict)',
                f'{name} asks for EMA weights, but checkpoint {source} holds no '
                'ema_state_dict (written by a run without an EMA): the weights tested are its '
                'state_dict, the raw model, not an EMA of it')
    meta = checkpoint.get('meta') or {}
    recorded = meta.get('ema_schedule') or (
        dict(hook=name, **hook.schedule()) if isinstance(hook, ScheduledEMAHook) else None)
    if not isinstance(meta.get('iter'), int) or not recorded:
        return '', ''  # mmengine's own EMAHook: no schedule to compare with
    schedule = dict(recorded)
    hook_name = schedule.pop('hook')
    mark = untrained_ema_note(hook_name, meta['iter'], **schedule)
    if not mark:
        return '', ''
    _, text = short_run_note(hook_name, meta['iter'], **schedule)
    return mark, f'checkpoint {source}: {text}'

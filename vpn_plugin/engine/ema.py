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
"""
from __future__ import annotations

import logging

import torch
from mmengine.logging import print_log


@torch.no_grad()
def copy_frozen_and_buffers(ema: torch.nn.Module, model: torch.nn.Module) -> None:
    """Copy ``model``'s frozen parameters (``requires_grad`` False: trained by a pre-stage,
    never averaged) and persistent buffers (what a checkpoint stores; a non-persistent one such
    as KEPP's ``train_endpoints`` is the model's alone) into ``ema`` (its copy)."""
    averages = dict(ema.named_parameters())
    parameters = dict(model.named_parameters())
    for name, current in parameters.items():
        if not current.requires_grad:
            averages[name].copy_(current)
    buffers = dict(ema.named_buffers())
    for name, current in model.state_dict().items():
        if name not in parameters:
            buffers[name].copy_(current)


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
        return True, (f'{hook}: {steps} training steps, fewer than the {first_copy} after '
                      f'which the EMA first takes the model: {weights} are the initial weights, '
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

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

import torch


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

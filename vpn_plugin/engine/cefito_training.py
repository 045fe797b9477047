"""CEFITO's EMA in the mmengine Runner (configs/_base_/schedules/cefito.py).

``CEFITOEMAHook`` (HOOKS): mmengine's ``EMAHook`` (the EMA weights are validated, tested and
checkpointed) with the official ``EMA.update`` schedule: after optimiser step s (1-based), when
s % update_every == 0, the EMA copy becomes the model (s < start_step) or
``decay * ema + (1 - decay) * model`` (buffers copied). Frozen parameters (the task
classifier, trained by ``TaskClassifierHook`` after the EMA copy was made) are copied, never
averaged with their untrained state, and are copied once before the first step
(``engine.ema.sync_pre_stages``): a run shorter than ``update_every`` steps writes
checkpoints with the trained classifier and PKG.
"""
from __future__ import annotations

from typing import Annotated
from vpn_plugin.config_types import Count, NonNegativeInt, Range, checked_arguments
import torch
from mmengine.hooks import EMAHook

from mmaction.registry import HOOKS

from .ema import ScheduledEMAHook, copy_frozen_and_buffers, sync_pre_stages


@torch.no_grad()
def ema_update(ema: torch.nn.Module, model: torch.nn.Module, step: int, decay: float,
               start_step: int, update_every: int) -> None:
    """The official update of ``ema`` toward ``model`` after step ``step`` (module doc)."""
    if step % update_every:
        return
    if step < start_step:
        ema.load_state_dict(model.state_dict())
        return
    for average, current in zip(ema.parameters(), model.parameters()):
        if current.requires_grad:
            average.mul_(decay).add_(current.detach(), alpha=1.0 - decay)
    copy_frozen_and_buffers(ema, model)  # the task classifier, trained before the EMA's copy


@HOOKS.register_module()
class CEFITOEMAHook(ScheduledEMAHook, EMAHook):
    """Official CEFITO EMA (module docstring): ``decay``, ``start_step``, ``update_every``."""

    @checked_arguments(prefix='CEFITOEMAHook: ')
    def __init__(self, decay: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = 0.995,
                 start_step: NonNegativeInt = 400, update_every: Count = 10):
        super().__init__(momentum=1 - decay, interval=1, update_buffers=False)
        self.decay, self.start_step, self.update_every = decay, start_step, update_every

    def schedule(self) -> dict:
        every = self.update_every  # ema_update: the first multiple >= start_step averages
        return dict(first_copy=every, every=every,
                    averages_from=-(-self.start_step // every) * every)

    def resumed_ema_count_note(self) -> str:
        every = self.update_every
        return (f'its schedule follows the training step (a copy of the model every {every} '
                f'steps before step {self.start_step}, an average every {every} steps from '
                'it), so it goes on from there')

    def before_train(self, runner) -> None:
        super().before_train(runner)
        sync_pre_stages(self)
        self.log_short_run(runner)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        ema_update(self.ema_model.module, self.src_model, runner.iter + 1, self.decay,
                   self.start_step, self.update_every)

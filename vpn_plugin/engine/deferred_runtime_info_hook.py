"""A training step with no host read: the losses reach the message hub when they are read.

mmengine's ``RuntimeInfoHook`` puts every iteration's ``log_vars`` (the losses) into the
message hub with ``.item()``. On a GPU each such read makes the host wait until the device
has finished the step, so the host cannot queue the next steps ahead of the device. This hook
(``runtime_info`` in ``configs/_base_/default_runtime.py``) keeps each iteration's values as
one small tensor on their device and copies all pending ones in ONE transfer just before
they are read: every ``LoggerHook.interval`` batches and at an epoch's end (when the logger
logs), before a checkpoint is written, before validation and after training. The message
hub then holds exactly the values, in the same order, that mmengine's hook puts there, so
logs, ``scalars.json`` and checkpoints are unchanged. A hook of your own that reads
``train/loss*`` from the message hub in every iteration sees them only at those points: use
mmengine's ``RuntimeInfoHook`` then.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from mmengine.hooks import LoggerHook, RuntimeInfoHook
from mmengine.utils import apply_to

from mmaction.registry import HOOKS


def _stackable(values) -> bool:
    """One-element tensors of one dtype on one device (what models' ``parse_losses`` gives)."""
    return bool(values) and all(isinstance(v, torch.Tensor) and v.numel() == 1 for v in values) \
        and len({(v.device, v.dtype) for v in values}) == 1


@HOOKS.register_module()
class DeferredRuntimeInfoHook(RuntimeInfoHook):
    """``RuntimeInfoHook`` whose training ``log_vars`` are read back only when needed
    (module docstring)."""

    def __init__(self):
        super().__init__()
        self._pending: List[Tuple[List[str], torch.Tensor]] = []  # (keys, values (K,))
        self._interval: Optional[int] = None

    def before_train(self, runner) -> None:
        super().before_train(runner)
        loggers = [hook for hook in runner.hooks if isinstance(hook, LoggerHook)]
        self._interval = loggers[0].interval if loggers else None

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs: Optional[dict] = None) -> None:
        if outputs is not None:
            values = list(outputs.values())
            if _stackable(values):
                stacked = torch.stack([v.detach().reshape(()) for v in values])
                self._pending.append((list(outputs), stacked))
            else:
                self.flush(runner)
                super().after_train_iter(runner, batch_idx, data_batch, outputs)
        logs_now = self._interval is not None and self.every_n_inner_iters(batch_idx,
                                                                            self._interval)
        if logs_now or self.end_of_epoch(runner.train_dataloader, batch_idx):
            self.flush(runner)

    def flush(self, runner) -> bool:
        """Copy the pending values to the message hub (one device-to-host transfer); whether
        there were any."""
        if not self._pending:
            return False
        pending, self._pending = self._pending, []
        host = torch.cat([values for _, values in pending]).tolist()  # one read-back
        position = 0
        for keys, _ in pending:
            for key in keys:
                runner.message_hub.update_scalar(f'train/{key}', host[position])
                position += 1
        return True

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        # the Runner took the message hub's state before calling this hook: retake it
        if self.flush(runner):
            checkpoint['message_hub'] = apply_to(runner.message_hub.state_dict(),
                                                 lambda x: hasattr(x, 'cpu'), lambda x: x.cpu())

    def before_val(self, runner) -> None:
        self.flush(runner)
        super().before_val(runner)

    def after_train(self, runner) -> None:
        self.flush(runner)
        super().after_train(runner)

"""A hook that stalls a training after an epoch's checkpoint, so that tests/test_resume.py
can kill -9 it at a known point (imported by the subprocess through custom_imports)."""
import time
from pathlib import Path

from mmengine.hooks import Hook

from mmaction.registry import HOOKS


@HOOKS.register_module()
class PauseAfterEpochHook(Hook):
    """After epoch ``epoch`` (its checkpoint written: priority below CheckpointHook), touch
    ``marker`` and sleep until killed."""

    priority = 'LOWEST'

    def __init__(self, epoch: int, marker: str):
        self.epoch, self.marker = epoch, Path(marker)

    def after_train_epoch(self, runner):
        if runner.epoch + 1 == self.epoch:
            self.marker.write_text(str(self.epoch))
            time.sleep(600)

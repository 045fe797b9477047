"""Hooks that stall a training after an epoch's checkpoint (tests/test_resume.py, imported by
the subprocess through custom_imports; tests/test_slurm_cluster.py, by the Slurm job) or a test
(tests/test_protocol_jobs.py), so that the test can kill -9 or requeue it at a known point; and
one that fails a test (tests/test_protocol_units.py)."""
import os
import time
from pathlib import Path

from mmengine.hooks import Hook

from mmaction.registry import HOOKS


@HOOKS.register_module()
class PauseAfterEpochHook(Hook):
    """After epoch ``epoch`` (its checkpoint written, after its validation: when the next
    epoch begins, priority below CheckpointHook), touch ``marker`` and sleep until killed."""

    priority = 'LOWEST'

    def __init__(self, epoch: int, marker: str):
        self.epoch, self.marker = epoch, Path(marker)

    def before_train_epoch(self, runner):
        if runner.epoch == self.epoch:
            self.marker.write_text(str(self.epoch))
            time.sleep(600)


@HOOKS.register_module()
class PauseBeforeTestHook(Hook):
    """While the file ``request`` exists, a test of seed ``seed`` writes its process id into
    the folder ``markers`` and sleeps until killed."""

    def __init__(self, request: str, markers: str, seed: int):
        self.request, self.markers, self.seed = Path(request), Path(markers), seed

    def before_test(self, runner):
        if self.request.exists() and runner.seed == self.seed:
            (self.markers / str(os.getpid())).write_text('paused')
            time.sleep(600)


@HOOKS.register_module()
class PauseAfterEpochOnRequestHook(Hook):
    """After epoch ``epoch`` of seed ``seed`` (its checkpoint written, after its validation:
    when the next epoch begins), while the file ``request`` exists: write the process id into
    ``marker`` and wait (a Slurm test requeues the task meanwhile; its requeued copy resumes
    after that epoch and, the request gone, goes on). Every epoch of that seed that begins
    appends its index to ``marker``'s sibling ``<marker>.epochs`` (a resumed run does not
    begin epoch 0 again)."""

    priority = 'LOWEST'

    def __init__(self, epoch: int, seed: int, request: str, marker: str):
        self.epoch, self.seed = epoch, seed
        self.request, self.marker = Path(request), Path(marker)

    def before_train_epoch(self, runner):
        if runner.seed != self.seed:
            return
        with open(f'{self.marker}.epochs', 'a') as begun:
            begun.write(f'{runner.epoch}\n')
        if runner.epoch != self.epoch:
            return
        if self.request.exists():
            self.marker.write_text(str(os.getpid()))
        deadline = time.time() + 600
        while self.request.exists() and time.time() < deadline:
            time.sleep(0.2)


@HOOKS.register_module()
class FailForSeedHook(Hook):
    """A test of seed ``seed`` (None: of every seed) fails (tests/test_protocol_units.py: one
    failing unit; tests/test_slurm_cluster.py: a run that fails in its job)."""

    def __init__(self, seed: int | None):
        self.seed = seed

    def before_test(self, runner):
        if self.seed is None or runner.seed == self.seed:
            raise ValueError(f'planned failure of seed {runner.seed}')

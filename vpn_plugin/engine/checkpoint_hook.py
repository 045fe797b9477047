"""``CheckpointHook`` whose work dir stays resumable whatever instant the process dies at.

mmengine 0.10.7's ``CheckpointHook`` deletes the checkpoint that ``max_keep_ckpts`` drops (and
the previous best one) *before* it writes the next, and writes ``last_checkpoint`` in place.
A job killed in between (Slurm's KillWait after a requeue's SIGTERM, an out-of-memory kill)
left ``last_checkpoint`` naming the deleted ``epoch_14.pth`` beside a
``.epoch_15.pth.<pid>.partial``, and every later attempt failed ("checkpoint ... epoch_14.pth
does not exist"). :class:`KillSafeCheckpointHook` is registered in MMAction2's ``HOOKS`` under
the name ``CheckpointHook``, so every config of the ``mmaction`` scope (``default_scope``, all
of vpn_plugin's) gets it from ``type='CheckpointHook'``, with the same options. It saves in
this order:

1. the new checkpoint, written to a temporary name and renamed into place
   (``PlanningRunner.save_checkpoint``: ``engine.checkpoint.save_atomically``);
2. ``last_checkpoint``, replaced atomically (``engine.checkpoint.write_last_checkpoint``);
3. only then the deletions: what rotation drops, the previous best checkpoint, and leftovers
   of an earlier kill (an ``epoch_N.pth`` that ``max_keep_ckpts`` no longer keeps, a second
   ``best_<key>_*.pth``), so the work dir ends as an uninterrupted run's.

An epoch's checkpoint is written after that epoch's validation when one follows (after the
best checkpoint, a plateau scheduler's step, an EMA swap back): a process killed during the
validation resumes before it and validates again. mmengine writes it before the validation,
so a kill in between resumes after an epoch whose validation never ran (a best checkpoint
missed, the tested model not the uninterrupted run's).

The resuming side: ``PlanningRunner`` removes a dead process's partial files and
``engine.checkpoint.latest_checkpoint_in`` falls back to the newest complete checkpoint when
``last_checkpoint`` names a missing file (work dirs of earlier versions).
"""
from __future__ import annotations

import bisect
import contextlib
import os
import re
from pathlib import Path

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook

from mmaction.registry import HOOKS

from .checkpoint import newest_checkpoint_in, write_last_checkpoint


class _DeferredRemovals:
    """A file backend whose ``remove`` / ``rmtree`` only note the path (``paths``); every
    other call goes to ``backend``."""

    def __init__(self, backend, paths: list):
        self._backend, self.paths = backend, paths

    def remove(self, path) -> None:
        self.paths.append(str(path))

    def rmtree(self, path) -> None:
        self.paths.append(str(path))

    def __getattr__(self, name):
        return getattr(self._backend, name)


@HOOKS.register_module(name='CheckpointHook')
class KillSafeCheckpointHook(CheckpointHook):
    """mmengine's ``CheckpointHook`` (same options) with kill-safe saving (module docstring)."""

    _pending = None   # (step, meta) of an epoch checkpoint waiting for the epoch's validation
    _removals = None  # paths to delete once the files being written are in place
    _saved = False    # whether a checkpoint was written since _removals_last began

    # ------------------------------------------------------------- when to save
    def _save_checkpoint(self, runner) -> None:
        """Called by mmengine when a checkpoint is due: held back until the epoch's validation
        when one follows."""
        if self.by_epoch and validates_after_epoch(runner):
            step = runner.epoch + 1
            self._pending = (step, dict(epoch=step, iter=runner.iter))
            return
        with self._removals_last(runner):
            super()._save_checkpoint(runner)

    def after_val_epoch(self, runner, metrics) -> None:
        with self._removals_last(runner):
            super().after_val_epoch(runner, metrics)  # the best checkpoint
            self._save_pending(runner)

    def before_train_epoch(self, runner) -> None:
        """A checkpoint held back for a validation that did not come (none is safer than none
        at all: the previous epoch's state is still the model's)."""
        with self._removals_last(runner):
            self._save_pending(runner)

    def after_train(self, runner) -> None:
        """The held-back checkpoint, if any; and the leftovers of a run killed after its last
        save (a resumed run with no epoch left to train saves nothing)."""
        with self._removals_last(runner, tidy=True):
            self._save_pending(runner)
        super().after_train(runner)

    def _save_pending(self, runner) -> None:
        if self._pending is not None:
            step, meta = self._pending
            runner.logger.info(f'Saving checkpoint at {step} epochs (after its validation)')
            self._save_checkpoint_with_step(runner, step, dict(meta))

    # ------------------------------------------------------------- how to save
    def _save_checkpoint_with_step(self, runner, step, meta) -> None:
        """mmengine's rotation in a kill-safe order: the new checkpoint, then
        ``last_checkpoint``, then (at the end of :meth:`_removals_last`) the deletions."""
        with self._removals_last(runner):
            if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids
                                                and self.keep_ckpt_ids[-1] == step):
                while len(self.keep_ckpt_ids) >= self.max_keep_ckpts:
                    self._removals.append(self.file_backend.join_path(
                        self.out_dir, self.filename_tmpl.format(self.keep_ckpt_ids.popleft())))
                self.keep_ckpt_ids.append(step)
                runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))
            filename = self.filename_tmpl.format(step)
            self.last_ckpt = self.file_backend.join_path(self.out_dir, filename)
            runner.message_hub.update_info('last_ckpt', self.last_ckpt)
            runner.save_checkpoint(self.out_dir, filename, self.file_client_args,
                                   save_optimizer=self.save_optimizer,
                                   save_param_scheduler=self.save_param_scheduler, meta=meta,
                                   by_epoch=self.by_epoch, backend_args=self.backend_args,
                                   **self.args)
            self._saved = True
            if self._pending is not None and self._pending[0] == step:
                self._pending = None
            if is_main_process():
                write_last_checkpoint(runner.work_dir, self.last_ckpt)

    @contextlib.contextmanager
    def _removals_last(self, runner, tidy: bool = False):
        """Inside: deletions (mmengine's of the previous best, rotation's) are only noted;
        after a block that raised nothing, the main process deletes them and (after a save,
        or with ``tidy``) the leftovers of an earlier kill (:meth:`_leftovers`), sparing
        every file still in use."""
        if self._removals is not None:  # nested: the outermost block deletes
            yield
            return
        backend, self._removals, self._saved = self.file_backend, [], False
        self.file_backend = _DeferredRemovals(backend, self._removals)
        try:
            yield
        finally:
            self.file_backend = backend
            removals, self._removals = self._removals, None
        if not is_main_process() or not (removals or self._saved or tidy):
            return
        in_use = {os.path.abspath(p) for p in self._in_use()}
        for path in dict.fromkeys(removals + self._leftovers()):
            if os.path.abspath(path) in in_use:
                continue
            if backend.isfile(path):
                backend.remove(path)
            elif backend.isdir(path):  # checkpoints saved by deepspeed are folders
                backend.rmtree(path)

    def _in_use(self) -> list:
        """The checkpoints this hook keeps: the last one, the kept ones and the best ones."""
        paths = [self.last_ckpt] if self.last_ckpt else []
        if self.max_keep_ckpts > 0:
            paths += [self.file_backend.join_path(self.out_dir, self.filename_tmpl.format(s))
                      for s in self.keep_ckpt_ids]
        return [str(p) for p in paths + list(self._best_paths().values()) if p]

    def _best_paths(self) -> dict:
        """Key indicator -> the current best checkpoint's path (None before the first)."""
        if not self.save_best:
            return {}
        if len(self.key_indicators) == 1:
            return {self.key_indicators[0]: getattr(self, 'best_ckpt_path', None)}
        return dict(getattr(self, 'best_ckpt_path_dict', {}))

    def _leftovers(self) -> list:
        """Checkpoints in a local ``out_dir`` that an uninterrupted run would have deleted
        (left by a kill between a save and its deletions, or by an older version): an
        ``epoch_N.pth`` (``filename_tmpl``) that ``max_keep_ckpts`` does not keep, a
        ``best_<key>_*.pth`` other than the key's current best."""
        if not os.path.isdir(str(self.out_dir)):
            return []
        pattern = re.escape(self.filename_tmpl).replace(r'\{\}', r'(\d+)')
        wanted = []  # (regular expression of a name, the path kept of it or None)
        if self.max_keep_ckpts > 0 and self.keep_ckpt_ids:
            kept = {self.filename_tmpl.format(s) for s in self.keep_ckpt_ids}
            wanted.append((re.compile(pattern + '$'), kept))
        for key, best in self._best_paths().items():
            if best:
                prefix = re.escape(f'best_{key}_'.replace('/', '_'))
                wanted.append((re.compile(prefix + pattern + '$'), {os.path.basename(best)}))
        found = []
        for name in sorted(os.listdir(self.out_dir)):
            for expression, kept in wanted:
                if expression.match(name) and name not in kept:
                    found.append(os.path.join(self.out_dir, name))
        return found


def validates_after_epoch(runner) -> bool:
    """Whether mmengine's ``EpochBasedTrainLoop`` validates after the epoch that ends now
    (asked in ``after_train_epoch``, before the loop counts the epoch; the loop's own rule,
    dynamic intervals included)."""
    from mmengine.runner import EpochBasedTrainLoop
    loop = runner.train_loop
    if not isinstance(loop, EpochBasedTrainLoop) or runner.val_loop is None:
        return False
    epoch = runner.epoch + 1
    interval = loop.dynamic_intervals[bisect.bisect(loop.dynamic_milestones, epoch + 1) - 1]
    return epoch >= loop.val_begin and (epoch % interval == 0 or epoch == loop.max_epochs)


# ------------------------------------------------------------- which checkpoints resume a run
RESUME_POINT_KEY = 'resume_point'  # meta: saved with the optimizer's schedule (an epoch save)
BEST_PATTERN = 'best_*.pth'  # mmengine's best checkpoints: weights only, not a resume point


def is_resume_point(checkpoint: dict, filename) -> bool:
    """``checkpoint`` (loaded from ``filename``) can continue a run: not one of mmengine's
    best checkpoints, which it saves without the optimizer and learning-rate schedule state
    (recorded in ``meta['resume_point']`` by ``PlanningRunner.save_checkpoint``; a checkpoint
    saved before that record is judged by its ``best_`` file name)."""
    recorded = (checkpoint.get('meta') or {}).get(RESUME_POINT_KEY)
    if recorded is not None:
        return bool(recorded)
    return not os.path.basename(str(filename)).startswith('best_')


def check_resume_point(checkpoint: dict, filename) -> None:
    """Refuse to resume from a best checkpoint (:func:`is_resume_point`): mmengine would go on
    silently with a fresh optimizer and schedule, which is not the run continued."""
    if not is_resume_point(checkpoint, filename):
        raise ValueError(
            f'--resume {filename}: a best checkpoint (the weights of the best validation), '
            'saved without the optimizer and learning-rate schedule state, so it cannot '
            'continue the run (the optimizer and schedule would restart unseen). Resume from '
            'an epoch_N.pth of the run; to train on from these weights as a new run, give '
            f'--cfg-options load_from={filename} without --resume (and a new --work-dir)')


def best_checkpoints(work_dir) -> list:
    """The names of the best checkpoints directly in ``work_dir``."""
    folder = Path(work_dir)
    return sorted(p.name for p in folder.glob(BEST_PATTERN) if p.is_file()) \
        if folder.is_dir() else []


def no_resume_point_note(work_dir) -> str:
    """For a work dir with no epoch checkpoint: '; it holds only best_x.pth, ...' naming the
    best checkpoints that ``--resume`` cannot take and what to do, or ''."""
    best = best_checkpoints(work_dir)
    if not best:
        return ''
    return (f'; it holds only {", ".join(best)}: the best validation weights, saved without '
            'optimizer and schedule state, which cannot continue the run (no epoch checkpoint '
            'was saved: the run stopped before its first, or that save failed, e.g. on a full '
            'disk, as the run\'s log says). Start the run again with --overwrite (which deletes '
            'them), or train on from those weights as a new run with --cfg-options '
            'load_from=<that file> and another --work-dir')


def save_failure_hint(work_dir) -> str:
    """What to do after a failed checkpoint save in ``work_dir`` (the end of
    ``engine.checkpoint.save_atomically``'s message): continue with ``--resume`` from the
    newest epoch checkpoint when there is one; else (only a best checkpoint, or nothing)
    start again, since ``--resume`` would find nothing to continue from."""
    newest = newest_checkpoint_in(work_dir)
    if newest:
        return ('Free disk space or give a writable --work-dir, then continue with --resume '
                f'(from {os.path.basename(newest)}, the newest epoch checkpoint)')
    best = best_checkpoints(work_dir)
    kept = (f' ({", ".join(best)} is a best checkpoint, weights only: --resume cannot continue '
            'from it)' if best else '')
    return ('The work dir holds no epoch checkpoint of this run yet, so --resume has nothing to '
            f'continue from{kept}: free disk space or give a writable --work-dir, then start '
            'the run again' + (' (--overwrite in this work dir: it deletes that file)'
                               if best else ''))

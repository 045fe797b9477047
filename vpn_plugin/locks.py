"""Exclusive file locks for what concurrent processes share: results files, work dirs and the
LLM reply cache.

:func:`exclusive_lock` holds an ``flock`` on a lock file (created if absent, never deleted:
deleting a lock file races with a process about to lock it) for the duration of a ``with``
block. ``wait=True`` blocks until the lock is free; ``wait=False`` raises :class:`LockBusyError`
naming the process that holds it. The lock is re-entrant within one thread (a protocol run
holds its work dir's lock while ``PlanningRunner.train`` takes it again) and released when the
process dies, even by ``kill -9``.

Users: ``results.append_result`` / ``replace_result`` (``<results>.lock`` beside the file: one
writer at a time, so no row is lost or doubled), the protocol runner (one process per work dir;
another process skips the unit and comes back to it), ``PlanningRunner.train`` (refuses a work
dir another process trains in) and ``baselines.llm.backends.ResponseCache`` (one request per
cache key across processes). On systems without ``fcntl`` (Windows) the locks do nothing.
"""
from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no locking
    fcntl = None

_held = threading.local()  # .paths: {lock path: depth} held by this thread


class LockBusyError(BlockingIOError):
    """Another process holds the lock (``wait=False``)."""


def lock_path_of(target) -> Path:
    """The lock file guarding ``target`` (a results file or a work dir): a hidden sibling
    ``.<name>.lock``, so it never shows inside a work dir or among the results. Keyed on the
    real path: a symlinked work dir and its target are one lock."""
    target = Path(os.path.realpath(target))
    return target.parent / f'.{target.name}.lock'


@contextlib.contextmanager
def exclusive_lock(path, *, wait: bool = True, what: str = ''):
    """Hold an exclusive lock on the lock file ``path`` (module docstring); ``what`` names
    the guarded thing in :class:`LockBusyError`'s message."""
    path = Path(os.path.realpath(path))  # one key per file: 'a/../b' and 'b' are one lock
    depths = _held.__dict__.setdefault('paths', {})
    if depths.get(path):
        depths[path] += 1
        try:
            yield
        finally:
            depths[path] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():  # open() would fail with a bare "[Errno 21] Is a directory"
        raise IsADirectoryError(f'lock file {path}{f" of {what}" if what else ""} is a folder; '
                                'expected a lock file (remove the folder; no process holds it)')
    with open(path, 'a+') as handle:
        if fcntl is not None:
            _acquire(handle, path, wait, what)
        handle.seek(0)
        handle.truncate()
        handle.write(f'{os.getpid()}\n')
        handle.flush()
        depths[path] = 1
        try:
            yield
        finally:
            del depths[path]
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _acquire(handle, path: Path, wait: bool, what: str) -> None:
    if wait:
        fcntl.flock(handle, fcntl.LOCK_EX)
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or 'unknown'
        raise LockBusyError(f'{what or path} is in use by another process (pid {holder}, lock '
                            f'file {path}); wait for it to finish, or use another output '
                            'folder') from None

"""Exclusive file locks for what concurrent processes share: results files, work dirs and the
LLM reply cache.

:func:`exclusive_lock` holds an ``flock`` on a lock file (created if absent) for the duration
of a ``with`` block. A lock file is deleted only by the process that holds it, and only one it
made: when its block ends normally (a finished run leaves no ``.<name>.lock`` beside its
outputs) and, with the folders made for it, when its block raised (``discard_if_refused``: a
refused run leaves nothing); a lock file that was there before stays. A process that locked a
file deleted meanwhile opens the path again (one lock per path, never two). ``wait=True``
blocks until the lock is free; ``wait=False`` raises :class:`LockBusyError`
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
def exclusive_lock(path, *, wait: bool = True, what: str = '', discard_if_refused: bool = False):
    """Hold an exclusive lock on the lock file ``path`` (module docstring); ``what`` names
    the guarded thing in :class:`LockBusyError`'s message. ``discard_if_refused``: when the
    block raises, the lock file and the folders made for it are removed again if this call
    made them (what was there before stays)."""
    path = Path(os.path.realpath(path))  # one key per file: 'a/../b' and 'b' are one lock
    depths = _held.__dict__.setdefault('paths', {})
    if depths.get(path):
        depths[path] += 1
        try:
            yield
        finally:
            depths[path] -= 1
        return
    if path.is_dir():  # open() would fail with a bare "[Errno 21] Is a directory"
        raise IsADirectoryError(f'lock file {path}{f" of {what}" if what else ""} is a folder; '
                                'expected a lock file (remove the folder; no process holds it)')
    made_folders = missing_folders(path.parent)
    handle, made = _open_locked(path, wait, what)
    with handle:
        handle.seek(0)
        handle.truncate()
        handle.write(f'{os.getpid()}\n')
        handle.flush()
        depths[path] = 1
        try:
            yield
        except BaseException:
            if discard_if_refused and made:  # still held: no other process locks it meanwhile
                _discard(path, made_folders)
            raise
        else:
            if made:  # still held: a process waiting on it opens the path again (_is_at)
                with contextlib.suppress(OSError):
                    path.unlink()
        finally:
            del depths[path]
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _open_locked(path: Path, wait: bool, what: str) -> tuple:
    """(handle, made): the lock file ``path`` opened and locked, ``made`` when this call
    created it. A file its holder deleted (``discard_if_refused``) between this call's opening
    and its locking is no lock any more: the path is opened again."""
    for _ in range(1000):  # each turn another process deleted the file: a few at most
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            handle, made = open(path, 'x+'), True
        except FileExistsError:
            try:
                handle, made = open(path, 'r+'), False
            except FileNotFoundError:  # deleted by its holder meanwhile
                continue
        except FileNotFoundError:  # its folder, made for a refused run, removed meanwhile
            continue
        try:
            if fcntl is not None:
                _acquire(handle, path, wait, what)
        except BaseException:
            handle.close()
            raise
        if fcntl is None or _is_at(handle, path):
            return handle, made
        handle.close()
    raise OSError(f'lock file {path}{f" of {what}" if what else ""} was deleted at each of 1000 '
                  'attempts to lock it; expected a lock file that stays while it is locked')


def _is_at(handle, path: Path) -> bool:
    """Whether the open file ``handle`` is still the file at ``path``."""
    try:
        at, held = os.stat(path), os.fstat(handle.fileno())
    except FileNotFoundError:
        return False
    return (at.st_dev, at.st_ino) == (held.st_dev, held.st_ino)


def missing_folders(folder) -> list:
    """``folder`` and its parents that do not exist, deepest first: what making it makes
    (and what a refused run removes again, when empty)."""
    folder = Path(os.path.abspath(folder))
    return [path for path in (folder, *folder.parents) if not path.exists()]


def _discard(path: Path, made_folders: list) -> None:
    """Remove the lock file ``path`` and, when empty, the folders made for it (deepest first)."""
    with contextlib.suppress(OSError):
        path.unlink()
    remove_made_folders(made_folders)


def remove_made_folders(made_folders) -> None:
    """Remove the folders :func:`missing_folders` listed (deepest first), each only while it
    is empty: the first that is not (something else is in it now) ends the removal."""
    for folder in made_folders:
        try:
            os.rmdir(folder)
        except OSError:
            break


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

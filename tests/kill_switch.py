"""Kill a process at a chosen file-system event (tests/test_kill_safe_checkpoints.py).

:func:`install` counts the events that change what a work dir holds: before and after every
``os.replace`` (atomic writes: checkpoints, ``last_checkpoint``, markers, rewritten results),
``os.remove`` / ``os.unlink`` (rotation's deletions), and halfway through every file that
mmengine's ``LocalBackend.put`` writes (inside a checkpoint's save, half of its bytes on disk).
At event ``kill_at`` (1-based; 0: never; or the first event whose description, e.g.
``'unlink /x/epoch_1.pth after'``, ``kill_at`` returns True for) the process SIGKILLs itself,
as Slurm does after a
requeue's KillWait: nothing below Python runs after it, no ``finally``, no flush. Between two
events the files of a work dir do not change (logs aside), so killing at every event kills
at every distinct state a kill can leave.
"""
import os
import signal


class Events:
    """The running count of events; ``kill_at``: the event that kills (module docstring)."""

    def __init__(self, kill_at):
        self.count, self.kill_at, self.restore = 0, kill_at, []

    def __call__(self, what: str) -> None:
        self.count += 1
        if (self.count == self.kill_at if isinstance(self.kill_at, int)
                else self.kill_at(what)):
            os.kill(os.getpid(), signal.SIGKILL)

    def uninstall(self) -> None:
        """Undo :func:`install` (a counting run in the test process itself)."""
        for owner, name, original in reversed(self.restore):
            setattr(owner, name, original)
        self.restore.clear()


def install(kill_at) -> Events:
    """Count (and kill at) the events of this process from now on; returns the counter (its
    ``uninstall`` ends the counting)."""
    from mmengine.fileio.backends.local_backend import LocalBackend
    events = Events(kill_at)

    def around(function):
        def counted(*args, **kwargs):
            what = f'{function.__name__} {args[-1] if args else ""}'
            events(what + ' before')
            result = function(*args, **kwargs)
            events(what + ' after')
            return result
        return counted

    def put(self, obj, filepath):
        os.makedirs(os.path.dirname(os.path.abspath(filepath)), exist_ok=True)
        with open(filepath, 'wb') as handle:
            handle.write(obj[:len(obj) // 2])
            handle.flush()
            events(f'put {filepath} half')  # inside the save: half of the file written
            handle.write(obj[len(obj) // 2:])

    patches = [(os, name, around(getattr(os, name))) for name in ('replace', 'remove', 'unlink')]
    patches.append((LocalBackend, 'put', put))
    for owner, name, patched in patches:
        events.restore.append((owner, name, getattr(owner, name)))
        setattr(owner, name, patched)
    return events

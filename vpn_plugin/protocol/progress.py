"""Progress lines of a protocol run on stderr, shared by the runner and the ``--jobs`` pool."""
from __future__ import annotations

import sys
import time


class Progress:
    """How far a protocol run is and when it ends. ETA: the units left x the measured seconds
    per unit (wall time since the start / units finished; with ``--jobs N`` that is the pool's
    rate, N at once); with ``unit_seconds`` (the dry run's estimate of each unit, in order)
    the estimated seconds left x the measured pace (wall time / estimated seconds of the
    finished units), so that a smoke run of SCHEMA (8 s) followed by CEFITO (44 s) is not
    priced at SCHEMA's pace. Before the first unit finishes: the dry-run estimate ``estimate``
    (seconds of all the units in one process, divided by the jobs, less the time spent), else
    none. ``clock``: seconds (a fake one in tests)."""

    def __init__(self, total: int, *, jobs: int = 1, estimate: float | None = None,
                 unit_seconds=None, clock=time.monotonic):
        self.total, self.jobs, self.estimate, self.clock = total, jobs, estimate, clock
        self.unit_seconds = list(unit_seconds) if unit_seconds else None
        if self.unit_seconds is not None and len(self.unit_seconds) != total:
            raise ValueError(f'Progress: {len(self.unit_seconds)} unit estimates for {total} '
                             'units')
        self.finished = 0
        self.finished_estimate = 0.0
        self.started = clock()

    def done(self, index: int | None = None) -> None:
        """One more unit finished: the ``index``-th of the list (default: the next in order)."""
        if self.unit_seconds is not None:
            self.finished_estimate += self.unit_seconds[self.finished if index is None
                                                        else index]
        self.finished += 1

    def eta_seconds(self, now: float) -> float | None:
        elapsed = now - self.started
        if self.finished and self.finished_estimate > 0:
            left = max(sum(self.unit_seconds) - self.finished_estimate, 0.0)
            return elapsed / self.finished_estimate * left
        if self.finished:
            return elapsed / self.finished * (self.total - self.finished)
        if self.estimate is not None:
            return max(self.estimate / self.jobs - elapsed, 0.0)
        return None

    def text(self) -> str:
        """`` (3/8 done, elapsed Xs, eta Ys)``; before the first: `` (eta ~Ys, dry-run
        estimate)`` or ''."""
        now = self.clock()
        eta = self.eta_seconds(now)
        if self.finished:
            return (f' ({self.finished}/{self.total} done, elapsed {now - self.started:.0f}s, '
                    f'eta {eta:.0f}s)')
        return '' if eta is None else f' (eta ~{eta:.0f}s, dry-run estimate)'


def unit_name(unit) -> str:
    """A training unit as the progress lines name it: its rows' methods, as ``--methods``
    spells them, its horizon and seed."""
    methods = ', '.join(dict.fromkeys(t.method for t in unit.tests)) or unit.slug
    return f'{methods} T={unit.horizon} seed={unit.seed}'


def log(message: str) -> None:
    """One ``[run_protocol HH:MM:SS] message`` line on stderr, flushed."""
    print(f'[run_protocol {time.strftime("%H:%M:%S")}] {message}', file=sys.stderr, flush=True)

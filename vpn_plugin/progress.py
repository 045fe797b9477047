"""Progress lines with a true ETA for the long loops outside mmengine's train loop: the
pre-stages (a task classifier, KEPP's step model and its predictions), feature extraction,
a CEFITO batch's search (silent while short: ``quiet``).

:class:`StepProgress` counts work units (steps, windows, chunks) toward a known total and emits
``'<what>: 40/2000 steps (2%), 0:01:10 elapsed, ETA 0:56:10, <extra>'``: at the first unit (an
early ETA; with ``quiet``, the first unit after that many seconds), then at most every
``interval`` seconds, and when the total is reached. ``total`` may be an estimate that is
refined on the way (feature extraction: the videos' durations). ETA = the units left x the
measured seconds per unit since the start. ``emit`` receives each line (a
logger's ``print_log``, a ``print`` to stderr); ``clock`` gives seconds (a fake one in tests).
"""
from __future__ import annotations

import math
import time
from typing import Callable


def format_clock(seconds: float) -> str:
    """``'H:MM:SS'`` of a duration; ``'?'`` when unknown (inf / NaN)."""
    if not math.isfinite(seconds):
        return '?'
    seconds = int(round(seconds))
    return f'{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}'


class StepProgress:
    """Progress of ``total`` units of ``unit`` (module docstring)."""

    def __init__(self, what: str, total: int, emit: Callable[[str], None], *,
                 unit: str = 'steps', interval: float = 30.0, clock=time.monotonic,
                 quiet: float = 0.0):
        """``quiet``: no line before that many seconds (a loop that is mostly short, such as
        one batch's search, stays silent unless it is long)."""
        self.what, self.total, self.emit, self.unit = what, max(int(total), 0), emit, unit
        self.interval, self.clock, self.quiet = interval, clock, quiet
        self.done, self.ended, self.shown = 0, False, False
        self.started = self.last = clock()

    def eta_seconds(self) -> float:
        """Seconds left at the measured rate (inf before the first unit)."""
        if not self.done:
            return math.inf
        return (self.clock() - self.started) / self.done * max(self.total - self.done, 0)

    def rate(self) -> float:
        """Units per second so far."""
        return self.done / max(self.clock() - self.started, 1e-9)

    def line(self, extra: str = '') -> str:
        elapsed = self.clock() - self.started
        share = f' ({100 * self.done / self.total:.0f}%)' if self.total else ''
        return (f'{self.what}: {self.done}/{self.total} {self.unit}{share}, '
                f'{format_clock(elapsed)} elapsed, ETA {format_clock(self.eta_seconds())}'
                + (f', {extra}' if extra else ''))

    def update(self, count: int = 1, extra: str = '') -> None:
        """``count`` more units done; emits a line when due (module docstring). ``extra``: a
        string, or a callable giving one (only computed when a line is emitted)."""
        self.done += count
        now = self.clock()
        last = self.done >= self.total and not self.ended
        self.ended = self.ended or last
        if now - self.started < self.quiet:
            return
        if not self.shown or last or now - self.last >= self.interval:
            self.last, self.shown = now, True
            self.emit(self.line(extra() if callable(extra) else extra))

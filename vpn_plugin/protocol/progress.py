"""Progress lines of a protocol run on stderr, shared by the runner and the ``--jobs`` pool."""
from __future__ import annotations

import sys
import time


def eta(started: float, finished: int, total: int) -> str:
    """`` (elapsed Xs, eta Ys)`` after ``finished`` of ``total`` units started at ``started``
    (``time.time()``); empty before the first one finished."""
    if finished == 0:
        return ''
    elapsed = time.time() - started
    return f' (elapsed {elapsed:.0f}s, eta {elapsed / finished * (total - finished):.0f}s)'


def log(message: str) -> None:
    """One ``[run_protocol HH:MM:SS] message`` line on stderr, flushed."""
    print(f'[run_protocol {time.strftime("%H:%M:%S")}] {message}', file=sys.stderr, flush=True)

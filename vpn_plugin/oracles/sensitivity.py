"""Sensitivity lines of the oracle checker: where a tolerance was widened from measured
conditioning, can the check still see a real error there?

After a check (``compare.check_fixture``), ``print_sensitivity`` prints the widest tolerance
any row was judged at, then one line per module of the fixture's weight files
(``*state_dict.npz``): one weight of the module moved by ``DELTA`` (the README's +0.05
demonstrations) in a copy of the fixture (the other files linked, nothing written to the
fixture), the same check rerun at the tolerances the clean check measured
(``compare.MEASURED.replaying``: nothing re-measured, so the widened tolerances are the ones a
real run would use), and how many rows fail, how many of the widened ones, and the largest
difference / tolerance among the widened rows (the row named). A module whose weight fails no
widened row says so: the error is then seen only by the rows at their base tolerance.

Modules: the parameter names grouped by their first component (with its index when the next
component is a number: ``downs.0``, ``blocks.2``), below any component that holds most of the
file's parameters (``model.`` of a U-Net, ``predictor.`` of CEFITO). The moved weight is the
module's first ``*weight`` array (else its first float array), at its middle entry.
"""
from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import compare
from .compare import MEASURED, REPORTED, Row, ratio

DELTA = 0.05


def parameter_names(arrays: Dict[str, np.ndarray]) -> List[str]:
    """The float arrays of a state dict that are parameters (``weight``/``bias``/``token``
    ends, or any float array of a file without such names), in file order."""
    floats = [k for k, v in arrays.items() if v.dtype.kind == 'f' and v.size]
    named = [k for k in floats if k.rsplit('.', 1)[-1] in ('weight', 'bias')
             or k.endswith('token')]
    return named or floats


def module_of(parts: Sequence[str]) -> Tuple[str, ...]:
    """The module of a name below its wrappers: first component (+ index)."""
    if len(parts) > 2 and parts[1].isdigit():
        return tuple(parts[:2])
    return tuple(parts[:1]) if len(parts) > 1 else tuple(parts)


def modules(names: Sequence[str]) -> Dict[str, str]:
    """{module name: its first weight's name} (module docstring), in file order."""
    prefix: Tuple[str, ...] = ()
    while True:  # descend into a wrapper: most parameters sit below one named child
        inside = [tuple(n.split('.'))[len(prefix):] for n in names
                  if tuple(n.split('.'))[:len(prefix)] == prefix]
        heads = Counter(p[0] for p in inside if len(p) > 2 and not p[1].isdigit())
        if not heads or heads.most_common(1)[0][1] <= len(names) / 2:
            break
        prefix += (heads.most_common(1)[0][0],)
    found: Dict[str, List[str]] = OrderedDict()
    for name in names:
        parts = tuple(name.split('.'))
        base = prefix if parts[:len(prefix)] == prefix else ()
        found.setdefault('.'.join(base + module_of(parts[len(base):])), []).append(name)
    return {key: next((n for n in members if n.endswith('weight')), members[0])
            for key, members in found.items()}


def candidate_entries(shape: Tuple[int, ...]) -> List[Tuple[int, ...]]:
    """Entries to move, in order: the middle of every dimension (a conv's centre tap), the
    middle of the flattened array, the last and the first entry (the first one that moves
    anything is used: an entry the fixture's computation never reads, e.g. a conv tap that
    only sees padding, cannot be wrong)."""
    if not shape:
        return [()]
    size = int(np.prod(shape))
    found = [tuple(n // 2 for n in shape)]
    for flat in (size // 2, size - 1, 0):
        entry = tuple(int(i) for i in np.unravel_index(flat, shape))
        if entry not in found:
            found.append(entry)
    return found


def moved_copy(fixture: Path, file: str, key: str, index, delta: float, folder: Path) -> Path:
    """A copy of ``fixture`` in ``folder`` (every entry linked) whose ``file`` has
    ``delta`` added to ``key[index]``."""
    copy = folder / fixture.name
    copy.mkdir()
    for entry in fixture.iterdir():
        if entry.name != file:
            (copy / entry.name).symlink_to(entry.resolve())
    arrays = compare.read_npz(fixture / file)
    arrays[key] = arrays[key].copy()
    arrays[key][index] += delta
    np.savez(copy / file, **arrays)
    return copy


@contextlib.contextmanager
def replaying():
    """Rerun checks quietly at the measured tolerances (``compare.MEASURED``): stdout and
    mmengine's INFO lines (MMLogger keeps its own level cache) held back."""
    from mmengine.logging import MMLogger
    logger = MMLogger.get_current_instance()
    level = logger.level
    MEASURED.replaying = True
    logger.setLevel(logging.WARNING)  # clears every MMLogger's cache
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)
        MEASURED.replaying = False


def widest_row() -> Optional[Tuple[str, float, float]]:
    """(label, widest tolerance, base) of the row judged at the largest tolerance / base."""
    if not MEASURED.widened:
        return None
    label, (widest, base) = max(MEASURED.widened.items(),
                                key=lambda item: ratio(item[1][0], item[1][1]))
    return label, widest, base


def entries_covered(label: str) -> str:
    """', on N of its M entries (...)' of a per-entry row (``MEASURED.entries``): a widening
    judges only the entries whose measured uncertainty raised it, the rest of the row stays
    near its base; with the count over every per-entry row of the check. '' for another row."""
    if label not in MEASURED.entries:
        return ''
    widened, total = MEASURED.entries[label]
    every = [sum(found) for found in zip(*MEASURED.entries.values())]
    return (f', on {widened:,} of its {total:,} entries (the others judged at most twice the '
            f'base; over the check\'s per-entry rows {every[0]:,} of {every[1]:,} entries '
            'past twice their base)')


def moved_line(where: str, rows: List[Row], widened: Dict[str, tuple], widest: str) -> str:
    """The sensitivity line of one module from the rows of its rerun."""
    failed = [row for row in rows if not row[4]]
    judged = [row for row in rows if row[0] in widened and row[3] != REPORTED]
    seen = [row for row in judged if not row[4]]
    if not judged:
        return f'sensitivity: {where}: {len(failed)} of {len(rows)} rows fail; no widened row ran'
    best = max(judged, key=lambda row: ratio(row[2], row[3]))
    at_widest = next((row for row in judged if row[0] == widest), None)
    tail = '' if at_widest is None else \
        f'; at the widest ({widest}): {ratio(at_widest[2], at_widest[3]):.2g}x'
    return (f'sensitivity: {where}: {len(failed)} of {len(rows)} rows fail, {len(seen)} of the '
            f'{len(judged)} widened; largest among the widened: {best[0]} {best[2]:.2e} = '
            f'{ratio(best[2], best[3]):.3g}x its tolerance {best[3]:.1e}{tail}')


def rerun(fixture: Path, file: str, key: str, index) -> List[Row]:
    """The check of a copy of ``fixture`` with ``key[index]`` of ``file`` moved by ``DELTA``,
    at the measured tolerances (an exception propagates: a refusal)."""
    with tempfile.TemporaryDirectory() as folder, replaying():
        rows, _, _ = compare.check_fixture(moved_copy(fixture, file, key, index, DELTA,
                                                      Path(folder)))
    return rows


def module_line(fixture: Path, file: str, module: str, key: str, shape, clean: Dict[str, Row],
                widened: Dict[str, tuple], widest: str) -> str:
    """The line of one module: its weight ``key`` moved at the first entry of
    ``candidate_entries`` that changes any row (entries that change nothing are named)."""
    unused = []
    for index in candidate_entries(shape):
        where = f'{file}:{module} (+{DELTA:g} on {key}{list(index)}'
        where += f'; {", ".join(unused)} moved nothing)' if unused else ')'
        try:
            rows = rerun(fixture, file, key, index)
        except Exception as error:  # noqa: BLE001  (a refusal is a detection too)
            return f'sensitivity: {where}: the check stops: {error}'
        if any(row[0] not in clean or row[1] != clean[row[0]][1] for row in rows):
            return moved_line(where, rows, widened, widest)
        unused.append(str(list(index)))
    return (f'sensitivity: {file}:{module} (+{DELTA:g} on {key} at {", ".join(unused)}): '
            'no row moved (entries this fixture\'s computation does not read)')


def print_sensitivity(fixture, rows: List[Row]) -> None:
    """The widest tolerance of the check that gave ``rows`` and one line per module (module
    docstring)."""
    fixture = Path(fixture).resolve()
    found = widest_row()
    if found is None:
        print('sensitivity: no tolerance was widened (every row at its base tolerance): '
              'nothing to show')
        return
    widest, tolerance, base = found
    print(f'sensitivity: widest tolerance {tolerance:.2g} ({ratio(tolerance, base):.3g}x its '
          f'base {base:.0e}): {widest}{entries_covered(widest)}')
    widened, clean = dict(MEASURED.widened), {row[0]: row for row in rows}
    for path in sorted(fixture.glob('*state_dict.npz')):
        arrays = compare.read_npz(path)
        for module, key in modules(parameter_names(arrays)).items():
            print(module_line(fixture, path.name, module, key, arrays[key].shape, clean,
                              widened, widest))

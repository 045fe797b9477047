"""Procedural Knowledge Graph (PKG): action-transition probabilities counted on training data.

A PKG is an ``(N, N)`` float64 matrix ``P[from, to]``: each row with at least one observed
transition sums to 1; a row of an action that was never followed by another stays all-zero
(no outgoing edge), never NaN.

Counting modes of the literature (``build_pkg(count_mode=...)``):

* ``'video'``: every consecutive pair of a video's step sequence is counted once.
* ``'window'`` (SCHEMA / PDPP / ViterbiPlanNet code): the graph is counted on the training
  *windows* of ``horizon`` consecutive steps, so a pair inside a long video is counted once per
  sliding window that contains it (inner pairs weigh more than pairs near the ends of a video,
  and videos shorter than ``horizon`` contribute nothing, as no window of that length fits).
  With ``horizon=None`` each given sequence is taken to be one window already.

The perturbations studied in the paper (edge dropout, weight noise, a fraction of the training
videos, label noise) are seeded with a ``numpy.random.Generator``.
"""
from __future__ import annotations

import os
import typing
from typing import Annotated, Iterable, List, Literal, Optional, Sequence

import numpy as np
import torch

from ..config_types import (Count, Fraction, NonNegative, Probability, Range, Seed,
                            checked_arguments, refuse_bool_ids)
from .viterbi import ROW_SUM_TOLERANCE as DECODER_ROW_TOLERANCE

CountMode = Literal['window', 'video']
COUNT_MODES = typing.get_args(CountMode)
PairHorizon = Annotated[int, Range(2)]  # a window of T >= 2 steps holds a transition
# a floor of probabilities in (0, 1) (the authors' 1e-10)
ClampProbability = Annotated[float, Range(0, 1, low_open=True, high_open=True)]
ROW_SUM_TOLERANCE = 1e-6


# ----------------------------------------------------------------------------- validation
def _as_sequences(sequences: Iterable[Sequence[int]], num_actions: int) -> List[np.ndarray]:
    """Integer arrays of the sequences; raises on ids outside ``0..num_actions-1``."""
    if sequences is None or isinstance(sequences, (str, bytes, dict)) \
            or not hasattr(sequences, '__iter__'):
        raise TypeError(f'sequences is a {type(sequences).__name__}; expected an iterable of '
                        'action-id sequences (one list per video or window)')
    result = []
    for index, sequence in enumerate(sequences):
        array = _integer_ids(sequence, f'sequence {index}')
        bad = (array < 0) | (array >= num_actions)
        if bad.any():
            raise ValueError(f'sequence {index} has action id {int(array[bad][0])}; expected '
                             f'0..{num_actions - 1} (num_actions={num_actions})')
        result.append(array)
    return result


def _integer_ids(sequence, name: str) -> np.ndarray:
    """(L,) int64 ids of one sequence; refuses other dtypes (1.7 is not an id) and shapes."""
    if isinstance(sequence, (str, bytes)) or not hasattr(sequence, '__iter__'):
        raise TypeError(f'{name} is a {type(sequence).__name__} ({sequence!r:.60}); expected a '
                        'list of action ids')
    if getattr(getattr(sequence, 'device', None), 'type', None) == 'meta':
        raise ValueError(f'{name} is a tensor on the meta device, which holds no values; '
                         'expected action ids with data (cpu or cuda)')
    values = list(sequence)
    refuse_bool_ids(values, name)
    array = np.asarray(values)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f'{name} holds {array.dtype} values {array.tolist()}; '
                        'expected integer action ids')
    if array.ndim > 1:
        raise ValueError(f'{name} has shape {array.shape}; expected a flat list of action ids '
                         '(one sequence per video or window)')
    return array.astype(np.int64).reshape(-1)


def check_clamp(name: str, clamp: Optional[float], num_actions: int) -> None:
    """Refuse a probability floor that turns rows into no distribution: flooring N
    probabilities at ``clamp`` adds up to ``N * clamp`` to a row, which must stay within the
    decoders' row-sum tolerance (the authors' 1e-10 adds 1e-7 at COIN's N=778; 0.5 would make
    every edge alike)."""
    if clamp is not None and clamp * num_actions > DECODER_ROW_TOLERANCE:
        raise ValueError(f'{name}={clamp:g} with N={num_actions} actions adds up to '
                         f'{clamp * num_actions:.3g} to a row of probabilities; expected a floor '
                         f'<= {DECODER_ROW_TOLERANCE / num_actions:.3g} (rows must still sum to '
                         f'1 within {DECODER_ROW_TOLERANCE:g}; the authors clamp at 1e-10)')


def check_pkg(pkg, name: str = 'pkg') -> np.ndarray:
    """``pkg`` as a float64 (N, N) array after checking it is a valid PKG.

    Valid: square, finite, non-negative, every row sums to 1 or is all-zero, within
    :func:`pkg_row_tolerance` of the dtype ``pkg`` is given in (a float16 PKG's rows miss 1 by
    its own rounding).
    """
    if isinstance(pkg, torch.Tensor) and pkg.device.type == 'meta':
        raise ValueError(f'{name} is on the meta device, which holds no values; expected a '
                         'PKG with data (N, N)')
    given = np.asarray(pkg.detach().cpu() if isinstance(pkg, torch.Tensor) else pkg)
    if np.iscomplexobj(given) or given.dtype.kind in 'USO':  # '0.5' would be parsed
        raise TypeError(f'{name} has dtype {given.dtype}; expected real probabilities')
    array = np.asarray(given, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise ValueError(f'{name} has shape {array.shape}; expected a square (N, N) matrix')
    if not np.isfinite(array).all():
        raise ValueError(f'{name} holds NaN or infinite values; expected probabilities')
    if (array < 0).any():
        row, col = np.argwhere(array < 0)[0]
        raise ValueError(f'{name}[{row}, {col}] = {array[row, col]} is negative; expected '
                         'probabilities >= 0')
    sums = array.sum(1)
    bad = (np.abs(sums - 1) > pkg_row_tolerance(given.dtype, (array > 0).sum(1))) & (sums != 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f'{name} row {row} sums to {sums[row]}; expected each row to sum to 1 '
                         '(or be all-zero for an action with no outgoing edge)')
    return array


def pkg_row_tolerance(dtype, entries, floor: float = ROW_SUM_TOLERANCE) -> np.ndarray:
    """How far from 1 a PKG row (any distribution) of ``entries`` non-zero probabilities stored
    in ``dtype`` may sum: ``floor``, or the dtype's rounding of each entry where that is coarser
    (float16 rounds each by up to 2^-11 relative); ``dtype`` a numpy or a torch dtype."""
    if isinstance(dtype, torch.dtype):  # bfloat16 has no numpy dtype
        eps = float(torch.finfo(dtype).eps) if dtype.is_floating_point else 0.0
    else:
        eps = float(np.finfo(dtype).eps) if np.dtype(dtype).kind == 'f' else 0.0
    return np.maximum(floor, eps * np.asarray(entries, np.float64))


def _normalise_rows(counts: np.ndarray) -> np.ndarray:
    """Row-stochastic matrix of non-negative ``counts``; all-zero rows stay zero."""
    sums = counts.sum(1, keepdims=True)
    return np.divide(counts, sums, out=np.zeros_like(counts, dtype=np.float64), where=sums > 0)


# ----------------------------------------------------------------------------- building
# build_pkg holds three (N, N) float64 matrices at once (counts, smoothed counts, the PKG)
PKG_MATRICES_HELD = 3


def physical_memory_bytes() -> Optional[int]:
    """The machine's physical memory in bytes; None where the OS does not say."""
    try:
        return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
    except (AttributeError, ValueError, OSError):
        return None


def check_pkg_fits_memory(name: str, num_actions: int, memory: Optional[int] = None,
                          matrices: int = PKG_MATRICES_HELD) -> None:
    """Refuse an action count whose (N, N) matrices cannot fit this machine's memory (the
    cap follows from the memory, not from a taxonomy size: numpy's own refusal names neither
    the argument nor the cap)."""
    memory = physical_memory_bytes() if memory is None else memory
    needed = matrices * 8 * num_actions ** 2
    if memory is None or needed <= memory:
        return
    cap = int((memory / (matrices * 8)) ** 0.5)
    held = f'{matrices} (N, N) float64 matrices' if matrices > 1 else 'an (N, N) float64 matrix'
    raise ValueError(f'{name}={num_actions}: a PKG over {num_actions} actions holds '
                     f'{held} while it is counted, '
                     f'{_bytes_text(needed)}, more than this machine\'s {_bytes_text(memory)} '
                     f'of memory; expected num_actions <= {cap} (the taxonomy\'s action count)')


def _bytes_text(size: float) -> str:
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'):
        if size < 1024:
            return f'{size:.4g} {unit}'
        size /= 1024
    return f'{size:.4g} EiB'


def pair_weights(length: int, horizon: Optional[int]) -> np.ndarray:
    """(length - 1,) number of sliding windows of ``horizon`` steps containing each pair.

    Pair ``i`` joins steps ``i`` and ``i + 1``; it lies in windows starting at
    ``max(0, i + 2 - horizon) .. min(i, length - horizon)``.
    """
    if length < 2:
        return np.zeros(0)
    if horizon is None or length == horizon:
        return np.ones(length - 1)
    if length < horizon:
        return np.zeros(length - 1)
    pairs = np.arange(length - 1)
    first = np.maximum(0, pairs + 2 - horizon)
    last = np.minimum(pairs, length - horizon)
    return np.maximum(last - first + 1, 0).astype(np.float64)


@checked_arguments
def transition_counts(sequences: Iterable[Sequence[int]], num_actions: Count, *,
                      count_mode: CountMode = 'window', horizon: Optional[PairHorizon] = None
                      ) -> np.ndarray:
    """(N, N) float64 weighted counts of consecutive pairs (see module docstring)."""
    check_pkg_fits_memory('transition_counts() argument num_actions', num_actions, matrices=1)
    counts = np.zeros((num_actions, num_actions))
    for array in _as_sequences(sequences, num_actions):
        weights = pair_weights(len(array), horizon if count_mode == 'window' else None)
        np.add.at(counts, (array[:-1], array[1:]), weights)
    return counts


@checked_arguments
def build_pkg(sequences: Iterable[Sequence[int]], num_actions: Count, *,
              smoothing: NonNegative = 0.0, count_mode: CountMode = 'window',
              horizon: Optional[PairHorizon] = None) -> np.ndarray:
    """(N, N) float64 row-stochastic PKG ``P[from, to]`` counted on action-id sequences.

    ``smoothing`` (additive / Laplace) is added to every entry of the rows that have at least
    one observed transition; unobserved rows stay all-zero (no outgoing edge).
    """
    check_pkg_fits_memory('build_pkg() argument num_actions', num_actions)
    counts = transition_counts(sequences, num_actions, count_mode=count_mode, horizon=horizon)
    observed = counts.sum(1, keepdims=True) > 0
    counts = counts + smoothing * observed
    return _normalise_rows(counts)


@checked_arguments
def pkg_log_transitions(pkg, clamp: Optional[ClampProbability] = None,
                        dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(N, N) log transition probabilities of a PKG for the DVL / Viterbi.

    Zero probabilities become ``-inf`` (forbidden edges), or ``log(clamp)`` when ``clamp`` is
    given (the authors clamp at 1e-10, which keeps every edge marginally possible).
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f'pkg_log_transitions dtype={dtype!r}; expected a floating-point '
                        'torch.dtype such as torch.float32 (log probabilities hold -inf)')
    array = check_pkg(pkg)
    check_clamp('pkg_log_transitions() argument clamp', clamp, len(array))
    if clamp is not None:
        array = np.maximum(array, clamp)
    with np.errstate(divide='ignore'):
        return torch.from_numpy(np.log(array)).to(dtype)


def pkg_coverage(sequences: Iterable[Sequence[int]], pkg) -> float:
    """Percent of ``sequences`` all of whose consecutive transitions are PKG edges (P > 0).

    A sequence of fewer than two steps has no transition and counts as covered.
    """
    edges = check_pkg(pkg) > 0
    arrays = _as_sequences(sequences, len(edges))
    if not arrays:
        raise ValueError('pkg_coverage got no sequences; expected at least one')
    covered = [bool(edges[a[:-1], a[1:]].all()) for a in arrays]
    return 100.0 * float(np.mean(covered))


@checked_arguments
def union_pkg(*sources, num_actions: Optional[Count] = None, count_mode: CountMode = 'video',
              horizon: Optional[PairHorizon] = None, smoothing: NonNegative = 0.0
              ) -> np.ndarray:
    """Dataset-independent PKG (N, N) from several PKGs and/or sequence collections.

    Each source is either an (N, N) PKG or an iterable of action-id sequences (counted with
    :func:`build_pkg` and the given options, ``num_actions`` required then). Edges are the
    union of the sources' edges; each row is the mean of the rows of the sources that observed
    that action, so every dataset weighs the same whatever its size (to pool raw counts
    instead, concatenate the sequences and call :func:`build_pkg`).
    """
    if not sources:
        raise ValueError('union_pkg got no sources; expected PKGs or sequence collections')
    pkgs = [_source_pkg(s, i, num_actions, count_mode, horizon, smoothing)
            for i, s in enumerate(sources)]
    shapes = {p.shape for p in pkgs}
    if len(shapes) != 1:
        raise ValueError(f'union_pkg sources have shapes {sorted(shapes)}; expected one (N, N) '
                         'action space')
    stacked = np.stack(pkgs)  # (S, N, N)
    observed = stacked.sum(2) > 0  # (S, N)
    total = stacked.sum(0)
    count = observed.sum(0)[:, None]
    return np.divide(total, count, out=np.zeros_like(total), where=count > 0)


def _source_pkg(source, index, num_actions, count_mode, horizon, smoothing) -> np.ndarray:
    if isinstance(source, (np.ndarray, torch.Tensor)) and np.ndim(source) == 2:
        if np.issubdtype(np.asarray(source).dtype, np.floating):
            pkg = check_pkg(source, name=f'union_pkg source {index}')
            if num_actions is not None and len(pkg) != num_actions:  # was ignored unsaid
                raise ValueError(f'union_pkg source {index} is a PKG of {len(pkg)} actions but '
                                 f'num_actions={num_actions}; expected PKGs of the one action '
                                 'space num_actions names')
            return pkg
        if source.shape[0] == source.shape[1]:  # a 0/1 adjacency or count matrix, or windows?
            raise TypeError(f'union_pkg source {index} is a square {tuple(source.shape)} '
                            f'{np.asarray(source).dtype} array, which reads as a PKG and as '
                            f'{source.shape[0]} sequences alike; expected a PKG as a float '
                            'array, or the sequences as a list of lists')
    if num_actions is None:
        raise ValueError(f'union_pkg source {index} (a {type(source).__name__}) is read as a '
                         'sequence collection; pass num_actions to count it, or give a PKG as a '
                         'float (N, N) numpy array or torch tensor')
    try:
        return build_pkg(source, num_actions, smoothing=smoothing, count_mode=count_mode,
                         horizon=horizon)
    except TypeError as error:  # e.g. a PKG given as nested lists of probabilities
        raise TypeError(f'union_pkg source {index}, read as a sequence collection: {error} (a '
                        'PKG must be a float numpy array or torch tensor (N, N))') from None


# ----------------------------------------------------------------------------- perturbations
def _seeded_rng(name: str, seed: int) -> np.random.Generator:
    """The generator of a perturbation's ``seed`` (its kind checked by the decorator)."""
    return np.random.default_rng(seed)


@checked_arguments
def edge_dropout(pkg, fraction: Probability, seed: Seed = 0) -> np.ndarray:
    """PKG with ``round(fraction * edges)`` random edges removed, rows renormalised.

    A row that loses all its edges becomes all-zero (no outgoing edge).
    """
    array = check_pkg(pkg).copy()
    rows, cols = np.nonzero(array)
    drop = _seeded_rng('edge_dropout', seed).choice(len(rows), int(round(fraction * len(rows))),
                                                replace=False)
    array[rows[drop], cols[drop]] = 0.0
    return _normalise_rows(array)


@checked_arguments
def weight_noise(pkg, sigma: NonNegative, seed: Seed = 0) -> np.ndarray:
    """PKG with N(0, sigma^2) noise added to the existing edge weights, clipped at 0 and rows
    renormalised. Only existing edges are perturbed (no new edge appears); an edge whose noisy
    weight falls to 0 is removed, and a row that loses all edges becomes all-zero."""
    array = check_pkg(pkg)
    noise = _seeded_rng('weight_noise', seed).normal(0.0, sigma, size=array.shape)
    noisy = np.where(array > 0, np.maximum(array + noise, 0.0), 0.0)
    return _normalise_rows(noisy)


@checked_arguments
def subsample_sequences(sequences: Iterable[Sequence[int]], fraction: Fraction,
                        seed: Seed = 0) -> List[List[int]]:
    """A random ``fraction`` of the sequences (at least one), original order kept."""
    sequences = [_integer_ids(s, f'sequence {i}').tolist() for i, s in enumerate(sequences)]
    if not sequences:
        return []
    keep = max(1, int(round(fraction * len(sequences))))
    rng = _seeded_rng('subsample_sequences', seed)
    chosen = np.sort(rng.choice(len(sequences), keep, replace=False))
    return [sequences[i] for i in chosen]


@checked_arguments
def label_noise(sequences: Iterable[Sequence[int]], fraction: Probability,
                task_actions: Iterable[Sequence[int]], seed: Seed = 0, *,
                tasks: Optional[Iterable[int]] = None) -> List[List[int]]:
    """Sequences with ``round(fraction * labels)`` step labels replaced by a random *other*
    action of the sequence's task. ``tasks`` gives each sequence's task index into
    ``task_actions``; when None, the task is inferred as the one whose action set holds most
    of the sequence's labels (lowest task index on ties). Labels of single-action tasks
    cannot change."""
    sequences = [_integer_ids(s, f'sequence {i}').tolist() for i, s in enumerate(sequences)]
    task_sets = [set(_integer_ids(actions, f'task_actions {i}').tolist())
                 for i, actions in enumerate(task_actions)]
    positions = [(i, t) for i, s in enumerate(sequences) for t in range(len(s))]
    rng = _seeded_rng('label_noise', seed)
    chosen = rng.choice(len(positions), int(round(fraction * len(positions))), replace=False)
    if tasks is None:
        tasks = [_sequence_task(s, task_sets, i) if s else -1 for i, s in enumerate(sequences)]
    else:
        tasks = _check_tasks(tasks, len(sequences), len(task_sets))
        _check_labels_in_tasks(sequences, tasks, task_sets)
    for index in np.sort(chosen):
        i, t = positions[index]
        candidates = sorted(task_sets[tasks[i]] - {sequences[i][t]})
        if candidates:
            sequences[i][t] = int(candidates[rng.integers(len(candidates))])
    return sequences


def _check_tasks(tasks: Sequence[int], num_sequences: int, num_tasks: int) -> List[int]:
    tasks = _integer_ids(tasks, 'label_noise tasks').tolist()
    if len(tasks) != num_sequences:
        raise ValueError(f'label_noise got {len(tasks)} tasks for {num_sequences} sequences; '
                         'expected one task index per sequence')
    bad = [task for task in tasks if not 0 <= task < num_tasks]
    if bad:
        raise ValueError(f'label_noise task index {bad[0]}; expected 0..{num_tasks - 1} '
                         '(indices into task_actions)')
    return tasks


def _check_labels_in_tasks(sequences: List[List[int]], tasks: List[int],
                           task_sets: List[set]) -> None:
    """A given task must hold its sequence's labels: noise draws "another action of the
    task", which means nothing for a step the task does not have."""
    for i, (sequence, task) in enumerate(zip(sequences, tasks)):
        foreign = [(t, a) for t, a in enumerate(sequence) if a not in task_sets[task]]
        if foreign:
            t, action = foreign[0]
            raise ValueError(f'label_noise sequence {i} step {t}: action {action} is not among '
                             f'task {task}\'s actions {sorted(task_sets[task])} (tasks[{i}]={task}); '
                             'expected every label of a sequence in its given task')


def _sequence_task(sequence: List[int], task_sets: List[set], index: int) -> int:
    hits = [sum(a in actions for a in sequence) for actions in task_sets]
    if not hits or max(hits) == 0:
        raise ValueError(f'label_noise: sequence {index} {sequence} has no action of any task '
                         'in task_actions; expected the taxonomy of the sequences')
    return int(np.argmax(hits))

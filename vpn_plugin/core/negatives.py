"""CEFITO's negative action sequences: mixed hard (same task) / easy (other task) draws and,
optionally, permutations of the ground truth.

Per sample, until ``count`` distinct sequences other than the ground truth are collected (kept
in order of first draw), with ``rng`` a ``random.Random``-like object:

* plain (``permutation_ratio`` 0): ``if other_tasks and random() >= hard_ratio``: pool =
  A(choice(other_tasks)) (easy) else A(task) (hard); candidate = T x ``choice(pool)``;
* order-aware (``permutation_ratio`` p > 0): ``u = random()``; ``u < p`` (ground truth with 2+
  distinct actions, branch not switched off) -> ``shuffle`` of the ground truth; else the plain
  draw with a second ``random()``. After more than 200 consecutive draws that add nothing the
  permutation branch is off for the rest of the sample.

``other_tasks`` keeps the order of ``task_to_actions``. The official code draws every sample
from Python's global ``random`` stream (so an evaluation pass in between changes later
training negatives); :func:`sample_negatives` takes one generator per sample instead
(``rngs``), or the global stream (``rngs=random``) to reproduce the official draws.
"""
from __future__ import annotations

import random
from typing import Callable, Dict, List, Sequence, Tuple, Union

from ..config_types import Probability, check_value

STALL_LIMIT = 200
SEED_STRIDE = 1_000_003


def sample_rng(seed: int, step: int, index: int) -> random.Random:
    """The generator of one training sample: seeded by (seed, training step, window index),
    so a sample's negatives depend on neither the batch nor an evaluation pass."""
    return random.Random((seed * SEED_STRIDE + step) * SEED_STRIDE + index)


def distinct_sequences(pools: Sequence[Sequence[int]], horizon: int,
                       cap: int | None = None) -> int:
    """How many sequences of ``horizon`` actions draws from ``pools`` make: each candidate takes
    all its actions from ONE pool, so the union of the pools' ``pool ** horizon`` sequences
    (two pools of 2 actions give 8 pairs, not the 16 of their 4 actions); counted up to
    ``cap`` (None: all) by listing them, a pool of ``cap`` or more sequences returning ``cap``."""
    distinct = sorted({tuple(sorted(set(pool))) for pool in pools})
    if cap is not None and any(len(pool) ** horizon >= cap for pool in distinct):
        return cap
    seen: set = set()
    for pool in distinct:
        for sequence in _sequences(pool, horizon):
            seen.add(sequence)
            if cap is not None and len(seen) >= cap:
                return cap
    return len(seen)


def check_pool(target: Tuple[int, ...], task: int, task_to_actions: Dict[int, tuple],
               count: int, hard_ratio: float, permutation_ratio: float = 0.0) -> None:
    """Refuse a draw that could never finish (fewer distinct sequences than asked for): the
    pools drawn from (the task's own unless ``hard_ratio`` is 0 and there are other tasks;
    the other tasks' unless it is 1 or there are none) and, with ``permutation_ratio``, the
    ground truth's permutations."""
    from itertools import permutations
    check_value('draw_negatives() argument hard_ratio', hard_ratio, Probability)
    others = [actions for other, actions in task_to_actions.items() if other != task]
    pools = ([task_to_actions[task]] if hard_ratio > 0 or not others else []) + \
        (others if hard_ratio < 1 else [])
    reachable = distinct_sequences(pools, len(target), cap=count + 2)
    if reachable < count + 2:  # few enough to list: which of them the loop can collect
        listed = {seq for pool in pools for seq in _sequences(pool, len(target))}
        if permutation_ratio > 0 and len(set(target)) >= 2:
            listed |= set(permutations(target))
        available = len(listed - {tuple(target)})
        if available < count:
            raise ValueError(f'cannot draw {count} distinct negatives for the ground truth '
                             f'{list(target)} of task {task}: its pool offers {available} other '
                             'sequences; lower model.num_negatives or model.hard_negative_ratio')


def _sequences(pool, horizon: int):
    from itertools import product
    return product(sorted(set(pool)), repeat=horizon)


def draw_negatives(target: Sequence[int], task: int, task_to_actions: Dict[int, tuple],
                   count: int, hard_ratio: float, permutation_ratio: float, rng) -> List[tuple]:
    """``count`` distinct negatives (T-tuples) of one ground truth (module docstring)."""
    target, horizon = tuple(target), len(target)
    # a NaN or 1.5 ratio would read as "always" (random() >= nan is False) without a word
    check_value('draw_negatives() argument permutation_ratio', permutation_ratio, Probability)
    same_task = task_to_actions[task]
    other_tasks = [t for t in task_to_actions if t != task]
    check_pool(target, task, task_to_actions, count, hard_ratio, permutation_ratio)

    def plain() -> tuple:
        if other_tasks and rng.random() >= hard_ratio:
            pool = task_to_actions[rng.choice(other_tasks)]
        else:
            pool = same_task
        return tuple(rng.choice(pool) for _ in range(horizon))

    seen: Dict[tuple, None] = {}
    can_permute = len(set(target)) >= 2
    stall, exhausted = 0, False
    while len(seen) < count:
        before = len(seen)
        if permutation_ratio > 0:
            u = rng.random()
            if not exhausted and can_permute and u < permutation_ratio:
                shuffled = list(target)
                rng.shuffle(shuffled)
                candidate = tuple(shuffled)
            else:
                candidate = plain()
        else:
            candidate = plain()
        if candidate != target:
            seen[candidate] = None
        if permutation_ratio > 0:
            stall = stall + 1 if len(seen) == before else 0
            exhausted = exhausted or stall > STALL_LIMIT
    return list(seen)


RngSource = Union[Callable[[int], object], object]


def sample_negatives(actions: Sequence[Sequence[int]], tasks: Sequence[int],
                     task_to_actions: Dict[int, tuple], count: int, hard_ratio: float,
                     permutation_ratio: float, rngs: RngSource) -> List[List[tuple]]:
    """Negatives of a batch: actions (B, T), tasks (B,) -> (B, count) T-tuples.

    ``rngs``: a function sample position -> generator (one stream per sample), or one
    generator shared by the batch in order (the ``random`` module: the official draws)."""
    per_sample = callable(rngs) and not hasattr(rngs, 'random')
    return [draw_negatives(target, int(task), task_to_actions, count, hard_ratio,
                           permutation_ratio, rngs(i) if per_sample else rngs)
            for i, (target, task) in enumerate(zip(actions, tasks))]


def global_stream():
    """Python's global ``random`` stream (the official sampler's)."""
    return random

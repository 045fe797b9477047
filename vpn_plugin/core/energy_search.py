"""CEFITO's task-constrained search: score every sequence of A(c)^T, keep the lowest energies.

Enumeration (official ``decode_candidates``): candidate i of A(c)^T is the base-|A(c)| digits
of i, first action most significant, mapped through A(c) in taxonomy order
(= ``itertools.product(A(c), repeat=T)``).

Two scorers give the energy table (G, |A(c)|^T) of a group of G samples sharing c, in
enumeration order:

* :func:`chunked_energies`: full (2T+1)-token sequences, ``chunk_size`` (sample, candidate) rows
  per predictor call (official ``task_constrained_search``);
* :func:`prefix_tree_energies`: level by level over the prefix tree. The predictor is causal,
  so a prefix's hidden states do not depend on what follows: each prefix's keys/values are
  computed once per block and every child adds two tokens (its action, the state mask) on top.
  Same energies within float rounding, about (2T+1)/2 times fewer token evaluations.

Actions with identical text embeddings (same-name actions in COIN) give exactly tied
sequences; both scorers score one representative (the first in A(c)) and copy its energy, so
the ties are exact by construction.

Top-k (:func:`select_top_k`): ``tie_break='sequence'`` (default) orders by (energy, enumeration
index), so ties always give the same plan; ``'topk'`` reproduces the official ``torch.topk``
per chunk of ``max(1, chunk_size // G)`` candidates then over the chunk winners, whose order
among exactly tied energies is undefined and changes with the chunk size. When fewer than
``top_k`` candidates exist, the worst plan and energy are repeated (official).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

import torch

from .energy_field import energy, grow_cache
from .viterbi import values_checkable

TIE_BREAKS = ('sequence', 'topk')


def decode_candidates(indices: torch.Tensor, actions: torch.Tensor, horizon: int
                      ) -> torch.Tensor:
    """indices (M,) in [0, |A|^T), actions (|A|,) -> sequences (M, T) (module docstring)."""
    base = actions.numel()
    digits = []
    for _ in range(horizon):
        digits.append(indices % base)
        indices = indices // base
    return actions[torch.stack(digits[::-1], 1)]


def representatives(actions: torch.Tensor, embeddings: torch.Tensor
                    ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Actions (|A|,) whose embedding rows (N, D) are identical are one input to the model:
    (unique actions (U,) in A order (first of each), position of each action's
    representative in it (|A|,))."""
    rows = embeddings[actions]
    keep, where = [], []
    for i in range(len(actions)):
        match = next((j for j, k in enumerate(keep) if torch.equal(rows[k], rows[i])), None)
        if match is None:
            keep.append(i)
            match = len(keep) - 1
        where.append(match)
    return actions[keep], torch.tensor(where, dtype=torch.long, device=actions.device)


def expand_table(table: torch.Tensor, where: torch.Tensor, horizon: int) -> torch.Tensor:
    """Energies (G, U^T) over the representatives -> (G, |A|^T) over A(c)^T."""
    size = where.numel()
    unique = int(where.max()) + 1 if size else 0
    index = torch.zeros(size ** horizon, dtype=torch.long, device=table.device)
    all_indices = torch.arange(size ** horizon, device=table.device)
    for digit in decode_candidates(all_indices, where, horizon).unbind(1):
        index = index * unique + digit
    return table[:, index]


def chunked_energies(energy_fn: Callable, start: torch.Tensor, goal: torch.Tensor,
                     actions: torch.Tensor, horizon: int, chunk_size: int = 50_000,
                     calls: list = None, scored: Callable[[int], None] = None) -> torch.Tensor:
    """Full-sequence scoring (official): start, goal (G, E) normalised, actions A(c) (|A|,);
    ``energy_fn(start (R, E), sequences (R, T), goal (R, E)) -> (R,)``. Returns (G, |A|^T).
    ``calls`` (a list) receives the rows of each ``energy_fn`` call, ``scored`` (a progress
    count) the same after each call."""
    group = start.shape[0]
    total = actions.numel() ** horizon
    per_chunk = max(1, chunk_size // group)
    tables = []
    for begin in range(0, total, per_chunk):
        indices = torch.arange(begin, min(begin + per_chunk, total), device=start.device)
        chunk = decode_candidates(indices, actions, horizon)
        scores = energy_fn(start.repeat_interleave(len(chunk), 0), chunk.repeat(group, 1),
                           goal.repeat_interleave(len(chunk), 0))
        if calls is not None:
            calls.append(len(chunk) * group)
        if scored is not None:
            scored(len(chunk) * group)
        tables.append(scores.view(group, len(chunk)))
    return torch.cat(tables, 1)


def prefix_tree_energies(field, start: torch.Tensor, goal: torch.Tensor,
                         actions: torch.Tensor, horizon: int, chunk_size: int = 50_000
                         ) -> torch.Tensor:
    """Prefix-tree scoring: ``field`` an ``EnergyField``; start, goal (G, E) normalised;
    actions (|A|,). Returns energies (G, |A|^T) in enumeration order.

    Depth first over blocks of prefixes, at most ``chunk_size`` children per predictor call,
    so memory stays bounded for any T."""
    tokens = field.action_tokens(actions[None])[0]                          # (|A|, H)
    _, cache = field.root(start)
    return _extend(field, cache, goal, tokens, 1, horizon, chunk_size)


def _extend(field, cache, goal, tokens, step: int, horizon: int, chunk_size: int):
    """Energies (P, |A|^(T-step+1)) of the subtrees below P cached prefixes at ``step``;
    goal (P, E) of each prefix's sample."""
    fan_out = tokens.shape[0]
    parents = goal.shape[0]
    per_call = max(1, chunk_size // fan_out)
    tables = []
    for begin in range(0, parents, per_call):
        part = slice(begin, min(begin + per_call, parents))
        past = [(k[part], v[part]) for k, v in cache]
        count = past[0][0].shape[0]
        latent, new = field.extend(past, tokens, step)
        child_goal = goal[part].repeat_interleave(fan_out, 0)
        if step == horizon:
            values = energy(field.goal_head(latent), child_goal)
        else:
            values = _extend(field, grow_cache(past, new, fan_out), child_goal, tokens,
                             step + 1, horizon, chunk_size)
        tables.append(values.reshape(count, -1))
    return torch.cat(tables, 0)


def select_top_k(table: torch.Tensor, top_k: int, tie_break: str = 'sequence',
                 chunk_size: int = 50_000) -> Tuple[torch.Tensor, torch.Tensor]:
    """Energies (G, M) in enumeration order -> (indices (G, top_k), energies (G, top_k)),
    increasing energy (module docstring for ``tie_break`` and the repeated worst plan)."""
    if tie_break not in TIE_BREAKS:
        raise ValueError(f'tie_break={tie_break!r}; expected one of {TIE_BREAKS}')
    if values_checkable(table) and bool(torch.isnan(table).any()):  # sorted last, unseen
        row, column = (int(i) for i in torch.isnan(table).nonzero()[0])
        raise ValueError(f'select_top_k: the energy of candidate {column} of row {row} is NaN '
                         f'({int(torch.isnan(table).sum())} of {table.numel()}); expected '
                         'finite energies (a NaN comes from the energy field: its weights or '
                         'its inputs)')
    group, total = table.shape
    if not total:  # no candidate sequence: an expand error naming sizes only
        raise ValueError(f'select_top_k: the energy table {tuple(table.shape)} holds no '
                         'candidate sequence; expected (G, M) energies with M >= 1')
    k = min(top_k, total)
    if tie_break == 'sequence':
        order = torch.sort(table, dim=1, stable=True).indices[:, :k]
        energies = table.gather(1, order)
    else:
        per_chunk = max(1, chunk_size // group)
        best_energy, best_index = [], []
        for begin in range(0, total, per_chunk):
            chunk = table[:, begin:begin + per_chunk]
            values, where = chunk.topk(min(k, chunk.shape[1]), 1, largest=False)
            best_energy.append(values)
            best_index.append(where + begin)
        energies, position = torch.cat(best_energy, 1).topk(k, 1, largest=False)
        order = torch.cat(best_index, 1).gather(1, position)
    if k < top_k:
        order = torch.cat([order, order[:, -1:].expand(group, top_k - k)], 1)
        energies = torch.cat([energies, energies[:, -1:].expand(group, top_k - k)], 1)
    return order, energies


def group_by_task(tasks: torch.Tensor) -> List[Tuple[int, torch.Tensor]]:
    """[(task, member positions)] in ascending task id (official order)."""
    return [(int(t), (tasks == t).nonzero(as_tuple=True)[0]) for t in tasks.unique()]


def search_cost(sizes: Sequence[int], horizon: int) -> Dict[str, float]:
    """Sequences to score for samples whose A(c) sizes are ``sizes``: ``sequences`` (full
    sequences of 2T+1 tokens) and ``tree_tokens`` (token evaluations of the prefix tree,
    2 per node below the root, 1 per root)."""
    sequences = sum(n ** horizon for n in sizes)
    tree = sum(1 + 2 * sum(n ** t for t in range(1, horizon + 1)) for n in sizes)
    return dict(sequences=float(sequences), full_tokens=float(sequences * (2 * horizon + 1)),
                tree_tokens=float(tree))


def energy_table(field, start, goal, actions, horizon: int, scorer: str = 'tree',
                 chunk_size: int = 50_000, calls: list = None,
                 scored: Callable[[int], None] = None) -> torch.Tensor:
    """(G, |A|^T) energies of a group (module docstring), same-embedding actions scored
    once. ``scorer`` 'tree' (prefix tree) or 'chunked' (full sequences, official).
    ``scored`` (a progress count) receives the (sample, sequence) pairs as they are scored:
    the chunked scorer's after each chunk, the tree's once; G x |A|^T in all."""
    scored = scored or (lambda count: None)
    unique, where = representatives(actions, field.predictor.action_embeddings)
    if scorer == 'tree':
        table = prefix_tree_energies(field, start, goal, unique, horizon, chunk_size)
        scored(table.numel())
    elif scorer == 'chunked':
        table = chunked_energies(field.energies, start, goal, unique, horizon, chunk_size,
                                 calls, scored)
    else:
        raise ValueError(f'scorer={scorer!r}; expected one of (\'tree\', \'chunked\')')
    scored(start.shape[0] * actions.numel() ** horizon - table.numel())  # tied copies
    if unique.numel() == actions.numel():
        return table
    return expand_table(table, where, horizon)

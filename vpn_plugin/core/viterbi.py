"""Exact max-product Viterbi decoding of a linear chain, batched, in log space.

Also holds the input checks shared with the Differentiable Viterbi Layer (:mod:`.dvl`).
Shapes, dtypes and types are always checked. Values (NaN, +inf, row sums) are checked where
reading them costs nothing: on CPU tensors outside ``torch.compile`` tracing. On an
accelerator the check would make the host wait for the device on every call, so it is left
to the producers of the inputs (``pkg_log_transitions`` checks every PKG it converts).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from ..config_types import Count, checked_arguments

ROW_SUM_TOLERANCE = 1e-3


class NonFiniteValues(ValueError):
    """A decoder input holds NaN or +inf (a planner names what produced it)."""


def values_checkable(tensor: torch.Tensor) -> bool:
    """Whether value checks may read ``tensor`` back to Python (module docstring)."""
    return tensor.device.type == 'cpu' and not torch.compiler.is_compiling()


def _require_tensor(tensor, name: str) -> torch.Tensor:
    """``tensor`` if it is a torch.Tensor holding values (not on the meta device)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f'{name} is a {type(tensor).__name__}; expected a torch.Tensor')
    if tensor.device.type == 'meta':
        raise ValueError(f'{name} is on the meta device, which holds no values; expected a '
                         'tensor with data (cpu or cuda)')
    return tensor


def row_sum_tolerance(dtype: torch.dtype, num_actions: int) -> float:
    """How far from 1 a row of (log) probabilities stored in ``dtype`` may sum: 1e-3, or the
    rounding of the dtype where it is coarser (bfloat16 rounds each log value by up to 2^-8
    relative, so a row of N values can miss 1 by up to log(N) * 2^-8)."""
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    return max(ROW_SUM_TOLERANCE, eps * max(1.0, math.log(max(num_actions, 1))))


def _require_float(tensor, name: str) -> torch.Tensor:
    _require_tensor(tensor, name)
    if not tensor.is_floating_point():
        raise TypeError(f'{name} has dtype {tensor.dtype}; expected a floating-point tensor')
    if not values_checkable(tensor):
        return tensor
    if torch.isnan(tensor).any() or (tensor == math.inf).any():
        raise NonFiniteValues(f'{name} holds NaN or +inf values; expected finite log values '
                         '(-inf allowed for impossible states / forbidden edges)')
    return tensor


def check_chain_inputs(log_emissions: torch.Tensor, log_transitions: torch.Tensor,
                       log_prior: Optional[torch.Tensor]
                       ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Checked ``(log_emissions (B, T, N), log_transitions (N, N), log_prior (N,))``.

    Transitions and prior are moved to the emissions' device and dtype; a missing prior
    becomes uniform ``-log N``. The transitions must be log probabilities whose rows sum to 1
    (or are all ``-inf``: an action with no outgoing edge).
    """
    _require_float(log_emissions, 'log_emissions')
    if log_emissions.dim() != 3 or 0 in log_emissions.shape:
        raise ValueError(f'log_emissions has shape {tuple(log_emissions.shape)}; expected a '
                         'non-empty (B, T, N)')
    _check_sums_fit(log_emissions)
    num_actions = log_emissions.shape[-1]
    _require_float(log_transitions, 'log_transitions')
    if tuple(log_transitions.shape) != (num_actions, num_actions):
        raise ValueError(f'log_transitions has shape {tuple(log_transitions.shape)}; expected '
                         f'({num_actions}, {num_actions}) to match log_emissions (B, T, N)')
    check_rows_normalised(log_transitions)
    like = dict(device=log_emissions.device, dtype=log_emissions.dtype)
    if log_prior is None:
        log_prior = torch.full((num_actions,), -math.log(num_actions), **like)
    else:
        _require_float(log_prior, 'log_prior')
        if tuple(log_prior.shape) != (num_actions,):
            raise ValueError(f'log_prior has shape {tuple(log_prior.shape)}; expected '
                             f'({num_actions},)')
        check_distribution(log_prior, 'log_prior', log=True)
    return log_emissions, log_transitions.to(**like), log_prior.to(**like)


def _check_sums_fit(log_emissions: torch.Tensor) -> None:
    """Refuse log emissions (B, T, N) so large that a path's sum of T of them overflows the
    dtype (a score of -inf would read as "no feasible path", +inf as NaN marginals)."""
    if not values_checkable(log_emissions):
        return
    finite = log_emissions.detach()[torch.isfinite(log_emissions.detach())]
    if not finite.numel():
        return
    largest = float(finite.abs().max())
    bound = torch.finfo(log_emissions.dtype).max / (2 * (log_emissions.shape[1] + 1))
    if largest > bound:
        raise ValueError(f'log_emissions holds a value of magnitude {largest:.3g}; expected log '
                         f'scores below {bound:.3g} in magnitude, so that sums over the '
                         f'{log_emissions.shape[1]} steps fit {log_emissions.dtype} (log '
                         'probabilities, not raw scores scaled up)')


def check_distribution(prior: torch.Tensor, name: str, log: bool = False) -> None:
    """Refuse a prior (N,) whose probabilities (``log``: log probabilities) do not sum to 1:
    all zeros (every chain infeasible) or a vector of scores (0 everywhere in log space: N
    times the mass) would decode, but the likelihoods and log partitions would not be those
    of a distribution."""
    if not values_checkable(prior):
        return
    values = prior.detach().double()
    total = float((values.exp() if log else values).sum())
    if not abs(total - 1) <= row_sum_tolerance(prior.dtype, len(prior)):
        raise ValueError(f'{name} has probabilities summing to {total:.6g}; expected '
                         f'{"log " if log else ""}probabilities of a distribution over the N '
                         'actions (summing to 1), or None for the uniform prior')


def check_rows_normalised(log_transitions: torch.Tensor) -> None:
    """Refuse ``log_transitions`` (N, N) whose rows are not log probabilities summing to 1
    (or all ``-inf``: no outgoing edge)."""
    if not values_checkable(log_transitions):
        return
    sums = log_transitions.detach().double().exp().sum(1)
    tolerance = row_sum_tolerance(log_transitions.dtype, len(sums))
    bad = ((sums - 1).abs() > tolerance) & (sums != 0)
    if bad.any():
        row = int(bad.nonzero()[0])
        raise ValueError(f'log_transitions row {row} has probabilities summing to '
                         f'{float(sums[row]):.6g}; expected log probabilities whose rows sum '
                         'to 1 (or all -inf for no outgoing edge), e.g. from '
                         'pkg_log_transitions')


@torch.no_grad()
def viterbi_decode(log_emissions: torch.Tensor, log_transitions: torch.Tensor,
                   log_prior: Optional[torch.Tensor] = None
                   ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Most likely paths ``(B, T)`` long and their scores ``(B,)``.

    Score of a path x: ``log_prior[x_1] + sum_t log_emissions[t, x_t]
    + sum_t log_transitions[x_{t-1}, x_t]`` (uniform ``-log N`` prior when None).
    Ties go to the lowest action id (predecessor and final state). When no path is feasible
    (every path crosses a forbidden edge or a ``-inf`` emission or prior) the score is
    ``-inf`` and the path is the lowest-id one of those all-``-inf`` ties: all zeros (the
    backpointers of an infeasible trellis point anywhere).
    """
    emissions, transitions, prior = check_chain_inputs(log_emissions, log_transitions,
                                                       log_prior)
    batch, horizon, _ = emissions.shape
    best_predecessors = _predecessor_step(transitions)
    delta = prior + emissions[:, 0]  # (B, N)
    backpointers = []
    for t in range(1, horizon):
        best, argbest = best_predecessors(delta)  # (B, N_to)
        backpointers.append(argbest)
        delta = emissions[:, t] + best
    scores, last = delta.max(-1)
    path = [last]
    for argbest in reversed(backpointers):
        path.append(argbest.gather(1, path[-1].unsqueeze(1)).squeeze(1))
    paths = torch.stack(path[::-1], 1)
    infeasible = scores == -math.inf  # (B,)
    return paths.masked_fill(infeasible.unsqueeze(1), 0), scores


SPARSE_FRACTION = 0.1  # edge lists below this share of finite transitions (e.g. COIN's PKG)


def _predecessor_step(transitions: torch.Tensor):
    """``step(delta (B, N)) -> (best (B, N_to), argbest (B, N_to))``: the best predecessor
    score ``max_from delta[from] + transitions[from, to]`` and its id, ties to the lowest id
    (``-inf`` everywhere: id 0). Dense (B, N, N) maximum, or, for a graph with few edges (a
    PKG: N=778 on COIN has ~0.5% of the N^2), the same values and ids over its edge list."""
    num_actions = transitions.shape[0]
    finite = torch.isfinite(transitions)
    if finite.sum() >= SPARSE_FRACTION * num_actions ** 2:
        to_from = transitions.t()  # (N_to, N_from)
        return lambda delta: (delta.unsqueeze(1) + to_from).max(-1)
    source, target = finite.nonzero(as_tuple=True)  # (E,) edges from -> to
    weights = transitions[source, target]

    def step(delta):
        scores = delta[:, source] + weights  # (B, E), the dense sums of the edges
        index = target.expand_as(scores)
        best = torch.full_like(delta, -math.inf).scatter_reduce(1, index, scores, 'amax')
        ties = torch.where(scores == best.gather(1, index), source, num_actions)
        argbest = torch.full(delta.shape, num_actions, dtype=torch.long, device=delta.device)
        argbest = argbest.scatter_reduce(1, index, ties.expand_as(scores), 'amin')
        return best, torch.where(best == -math.inf, 0, argbest)
    return step


@checked_arguments
@torch.no_grad()
def viterbi_decode_probs(emissions: torch.Tensor, transitions: torch.Tensor,
                         prior: Optional[torch.Tensor] = None, chunk_elements: Count = 2 ** 23
                         ) -> Tuple[torch.Tensor, torch.Tensor]:
    """SCHEMA's Viterbi (its ``models/utils.py``): paths ``(B, T)`` long and likelihoods ``(B,)``.

    Probability space with a float32 trellis, as the official code computes it:
    ``trellis[0] = prior * e[0]`` (float32; uniform prior ``1/N`` when None),
    ``trellis[t, j] = float32(e[t, j] * max_i trellis[t-1, i] * A[i, j])`` with the products in
    float64 (numpy promotes float32 x float64), ties to the first index; the likelihood is
    ``max(trellis[-1])``. Unlike the log-space :func:`viterbi_decode`, long or peaked chains
    underflow to 0 and then tie (the official behaviour this reproduces). ``emissions`` (B, T, N)
    probabilities, ``transitions`` (N, N) [from, to] probabilities (an all-zero row: no
    outgoing edge; the official code would divide 0 by 0 there). Batches are processed in
    chunks of at most ``chunk_elements`` float64 products (B_chunk * N * N).
    """
    _check_probabilities(emissions, transitions, prior)
    batch, horizon, num_actions = emissions.shape
    emissions = emissions.float()
    transitions = transitions.to(emissions.device, torch.float64)
    if prior is None:
        prior = torch.ones(num_actions, dtype=torch.float32, device=emissions.device) / num_actions
    step = max(1, chunk_elements // (num_actions * num_actions))
    paths, likelihoods = zip(*(_viterbi_probs_chunk(emissions[i:i + step], transitions,
                                                    prior.float())
                               for i in range(0, batch, step)))
    return torch.cat(paths), torch.cat(likelihoods)


def _check_probabilities(emissions, transitions, prior) -> None:
    """Refuse what :func:`viterbi_decode_probs` would decode into a meaningless path: other
    shapes than (B >= 1, T >= 1, N), (N, N), (N,); on the CPU, NaN / infinite / negative
    values (log values given for probabilities) and transition rows not summing to 1 or 0."""
    for name, values in (('emissions', emissions), ('transitions', transitions),
                         ('prior', prior)):
        if values is not None:
            _require_tensor(values, name)
    if emissions.dim() != 3 or 0 in emissions.shape \
            or tuple(transitions.shape) != (emissions.shape[-1],) * 2:
        raise ValueError(f'emissions {tuple(emissions.shape)} and transitions '
                         f'{tuple(transitions.shape)}: expected a non-empty (B, T, N) and (N, N)')
    if prior is not None and tuple(prior.shape) != (emissions.shape[-1],):
        raise ValueError(f'prior has shape {tuple(prior.shape)}; expected '
                         f'({emissions.shape[-1]},) to match emissions (B, T, N)')
    for name, values in (('emissions', emissions), ('transitions', transitions),
                         ('prior', prior)):
        if values is None or not values_checkable(values):
            continue
        values = values.detach().double()
        if not torch.isfinite(values).all() or (values < 0).any():
            bad = values[~torch.isfinite(values) | (values < 0)][0]
            raise ValueError(f'{name} holds the value {float(bad)}; expected probabilities '
                             '(finite, >= 0; log values belong to viterbi_decode)')
    if prior is not None:
        check_distribution(prior, 'prior')
    if values_checkable(transitions):
        sums = transitions.detach().double().sum(1)
        tolerance = row_sum_tolerance(transitions.dtype, len(sums))
        bad = ((sums - 1).abs() > tolerance) & (sums != 0)
        if bad.any():
            row = int(bad.nonzero()[0])
            raise ValueError(f'transitions row {row} sums to {float(sums[row]):.6g}; expected '
                             'probabilities whose rows sum to 1 (or all 0 for no outgoing edge)')


def _viterbi_probs_chunk(emissions, transitions, prior):
    trellis = prior * emissions[:, 0]  # (B, N) float32
    backpointers = []
    for t in range(1, emissions.shape[1]):
        best, argbest = (trellis.double().unsqueeze(2) * transitions).max(1)  # over "from"
        backpointers.append(argbest)
        trellis = (emissions[:, t].double() * best).float()
    likelihood, last = trellis.max(-1)
    path = [last]
    for argbest in reversed(backpointers):
        path.append(argbest.gather(1, path[-1].unsqueeze(1)).squeeze(1))
    return torch.stack(path[::-1], 1), likelihood

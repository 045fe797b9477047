"""Beam search over the PKG for the most probable path between a first and a last action.

Plain torch; no mmaction/mmengine import.
"""
import torch

from ..config_types import Count, checked_arguments
from .viterbi import check_rows_normalised


def reachable_in(log_transitions: torch.Tensor, target: int, max_steps: int) -> torch.Tensor:
    """Boolean (max_steps + 1, N): row k marks the actions reaching ``target`` in exactly k
    steps."""
    edges = torch.isfinite(log_transitions).float()
    rows = [torch.zeros(edges.shape[0], dtype=torch.bool, device=edges.device)]
    rows[0][target] = True
    for _ in range(max_steps):
        rows.append((edges @ rows[-1].float()) > 0)
    return torch.stack(rows)


def _beam_search_one(log_transitions, first: int, last: int, horizon: int, beam_width: int):
    """Best path (T,) and its log probability for one (first, last) pair."""
    num_actions = log_transitions.shape[0]
    can_reach = reachable_in(log_transitions, last, horizon - 1)
    paths = torch.tensor([[first]], dtype=torch.long, device=log_transitions.device)
    scores = torch.zeros(1, dtype=log_transitions.dtype, device=log_transitions.device)
    for step in range(1, horizon - 1):
        candidates = scores[:, None] + log_transitions[paths[:, -1]]  # (beam, N)
        remaining = horizon - 1 - step
        # prune prefixes that can no longer end at `last` (unless none can: keep the best anyway)
        if can_reach[remaining].any():
            candidates = candidates.masked_fill(~can_reach[remaining][None], float('-inf'))
        flat = candidates.flatten()
        keep = min(beam_width, flat.numel())
        top_scores, top_index = flat.topk(keep)
        beam_index = torch.div(top_index, num_actions, rounding_mode='floor')
        paths = torch.cat([paths[beam_index], (top_index % num_actions)[:, None]], 1)
        scores = top_scores
    final = scores + log_transitions[paths[:, -1], last]
    best = int(final.argmax())
    path = torch.cat([paths[best], paths.new_tensor([last])])
    return path, final[best]


@checked_arguments
def pkg_beam_search(log_transitions: torch.Tensor, first: torch.Tensor, last: torch.Tensor,
                    horizon: Count, beam_width: Count = 10):
    """Most probable PKG paths of length T from ``first`` to ``last`` (beam search).

    The score of a path a_1..a_T is sum_t log A[a_t, a_{t+1}]. Prefixes from which ``last``
    cannot be reached in the remaining steps are pruned first, so a path through PKG edges
    is found whenever one exists; otherwise the best-scoring path (score -inf) is returned.
    With ``beam_width >= N ** (T - 2)`` the search is exhaustive (exact).

    Args:
        log_transitions: (N, N) log transition probabilities [from, to], -inf for no edge.
        first: (B,) long first actions.
        last: (B,) long last actions.
        horizon: T >= 1 (T = 1 returns ``first``, score -inf where ``last`` differs).
        beam_width: number of prefixes kept per step.
    Returns:
        paths (B, T) long and scores (B,) (log probability of each path).
    """
    _check_log_transitions(log_transitions)
    first, last = _action_ids(first, 'first'), _action_ids(last, 'last')
    if first.shape != last.shape:
        raise ValueError(f'first {tuple(first.shape)} and last {tuple(last.shape)} differ in shape')
    num_actions = log_transitions.shape[0]
    for name, ids in (('first', first), ('last', last)):
        if len(ids) and (ids.min() < 0 or ids.max() >= num_actions):
            raise ValueError(f'{name} actions must be in [0, {num_actions}), got {ids.tolist()}')
    if horizon == 1:  # a one-step path is its first action: feasible iff it is the last one
        scores = torch.zeros(len(first), dtype=log_transitions.dtype, device=first.device)
        return first[:, None].clone(), scores.masked_fill(first != last, float('-inf'))
    paths, scores = [], []
    for a, b in zip(first.tolist(), last.tolist()):
        path, score = _beam_search_one(log_transitions, a, b, horizon, beam_width)
        paths.append(path)
        scores.append(score)
    if not paths:
        return torch.zeros(0, horizon, dtype=torch.long), log_transitions.new_zeros(0)
    return torch.stack(paths), torch.stack(scores)


def _check_log_transitions(log_transitions) -> None:
    """(N, N) floating-point tensor without NaN or +inf (-inf: no edge), whose rows are log
    probabilities (a matrix of probabilities was summed as log scores without a word)."""
    if not isinstance(log_transitions, torch.Tensor) or not log_transitions.is_floating_point():
        raise TypeError(f'log_transitions is a {type(log_transitions).__name__} of dtype '
                        f'{getattr(log_transitions, "dtype", None)}; expected a floating-point '
                        'torch.Tensor (N, N)')
    if log_transitions.dim() != 2 or log_transitions.shape[0] != log_transitions.shape[1]:
        raise ValueError(f'log_transitions must be (N, N), got {tuple(log_transitions.shape)}')
    if log_transitions.device.type != 'meta' and bool(
            (torch.isnan(log_transitions) | (log_transitions == float('inf'))).any()):
        raise ValueError('log_transitions holds NaN or +inf values; expected log probabilities '
                         '(-inf for no edge)')
    check_rows_normalised(log_transitions)


def _action_ids(ids, name: str) -> torch.Tensor:
    """(B,) long action ids; floats (1.7) and booleans are no ids."""
    ids = torch.as_tensor(ids)
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f'{name} actions have dtype {ids.dtype}; expected integer action ids')
    return ids.long().flatten()

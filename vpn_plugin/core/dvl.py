"""Differentiable Viterbi Layer (DVL): a smoothed Viterbi over a linear chain, in log space.

With emissions theta (B, T, N), log transitions L (N, N) ``[from, to]``, log prior p (N,) and
temperature gamma:

* alpha_1 = p + theta_1;
  alpha_t(j) = theta_t(j) + gamma * logsumexp_i((alpha_{t-1}(i) + L(i, j)) / gamma)
* soft backpointers Q_t(j, i) = softmax_i((alpha_{t-1}(i) + L(i, j)) / gamma)
* soft plan u_T = softmax(alpha_T / gamma), u_{t-1} = u_t Q_t;
  log Z = gamma * logsumexp(alpha_T / gamma)

Dividing everything by gamma gives an ordinary chain (theta/gamma, L/gamma, p/gamma), whose
forward variables a_t = alpha_t / gamma are computed below; u are its posterior marginals. At
gamma = 1 they are the exact marginals (= d log Z / d theta); as gamma -> 0 the one-hot
Viterbi path.

Forbidden edges (L = -inf) and unreachable states are exact zeros of Q and u; a sample with no
feasible path at all gets u = 0 and log Z = -inf, with zero gradients. Nothing is NaN, forward
or backward.

Memory and speed: a custom autograd function keeps only a (B, T, N), u (B, T, N) and the
normalisers, and applies each Q_t when needed without keeping it (recomputed in backward).
Two exact ways to apply Q_t, chosen by ``impl``:

* ``'dense'`` (``_DenseStep``) builds Q_t (B, N, N) in log space, one step at a time. Its
  control flow depends on shapes only: it never reads a value back to the host (no device
  synchronisation; it traces under ``torch.compile(fullgraph=True)``). The device path.
* ``'levels'`` (``_LevelStep``) never builds it: Q_t(j, i) = exp(a(i) - s_k) * E(i, j) *
  exp(s_k + c_j - lse_j) with E = exp(L' - c) (column-shifted transitions), split into K
  "levels" of states whose a(i) lies within WIDTH of a shift s_k, so every factor is a normal
  float; each level is a matrix product. Choosing the levels reads values back (their number,
  whether the transitions fit), which costs nothing on a CPU and stalls a GPU. Used when every
  finite transition is within EDGE_RANGE of its column's best and the states span at most
  MAX_LEVELS levels; otherwise the dense step (same result; the first such fallback of a
  process is logged with its reason). The CPU path: ~10x faster there than the dense one.
* ``'auto'`` (default): levels on the CPU, dense on any other device.
"""
from __future__ import annotations

import logging
import math
import typing
from typing import Literal, Optional, Tuple

import torch

from ..config_types import Count, Positive, checked_arguments
from .pkg import ClampProbability, check_clamp
from .viterbi import check_chain_inputs, values_checkable

# per dtype: (WIDTH, EDGE_RANGE) in nats; WIDTH + EDGE_RANGE keeps products normal floats
LEVEL_LIMITS = {torch.float32: (40.0, 30.0), torch.float64: (300.0, 300.0),
                torch.float16: (4.0, 4.0), torch.bfloat16: (40.0, 30.0)}
MAX_LEVELS = 6
Implementation = Literal['auto', 'levels', 'dense']
IMPLEMENTATIONS = typing.get_args(Implementation)
_LOGGER = logging.getLogger(__name__)
_fallback_logged = False  # the first dense fallback of the process is logged, with its reason


def _log_fallback_once(reason: str) -> None:
    global _fallback_logged
    if not _fallback_logged:
        _fallback_logged = True
        _LOGGER.warning('differentiable_viterbi falls back to the dense evaluation of Q_t '
                        '(same values, more time and memory than the level one): %s', reason)


def _finite_or_zero(values: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(values), values, torch.zeros_like(values))


def _exp_flushed_(values: torch.Tensor) -> torch.Tensor:
    """exp of ``values`` in place; on the CPU, results below e^2 x the dtype's smallest normal
    set to 0.

    CPU exp is 10-80x slower where its result underflows (-inf, a ``log(p + 1e-30)`` floor
    far below the best edge), so such entries are clamped to a normal result first and then
    flushed; each entry changes by less than e^2 x tiny (float32: 1e-37). float16, whose
    normal range ends at 6e-5, is not flushed; nor are other devices' tensors (no such
    slowdown there, and two passes over (B, N, N) saved).
    """
    if values.dtype == torch.float16 or values.device.type != 'cpu':
        return values.exp_()
    normal_floor = math.log(torch.finfo(values.dtype).tiny) + 1.0
    flushed = torch.exp_(values.clamp_(min=normal_floor))
    return torch.nn.functional.threshold_(flushed, math.exp(normal_floor + 1.0), 0.0)


class _DenseStep:
    """Q_t (B, N_to, N_from) = exp(a_prev(i) + L'(i, j) - lse(j)), built in log space."""

    def __init__(self, a_prev, to_from, lse):
        scores = a_prev.unsqueeze(1) + to_from
        self.q = _exp_flushed_(scores.sub_(_finite_or_zero(lse).unsqueeze(-1)))

    @staticmethod
    def log_normaliser(a_prev, to_from):
        """(B, N_to) logsumexp_i (a_prev(i) + L'(i, j)), as torch.logsumexp with flushed exp."""
        scores = a_prev.unsqueeze(1) + to_from
        top = _finite_or_zero(scores.amax(-1, keepdim=True))
        return (_exp_flushed_(scores.sub_(top)).sum(-1).log_() + top.squeeze(-1))

    def left(self, v):
        """(B, N_from) sum_j v(j) Q(j, i) of v (B, N_to)."""
        return torch.bmm(v.unsqueeze(1), self.q).squeeze(1)

    def right(self, x):
        """(B, N_to) sum_i Q(j, i) x(i) of x (B, N_from)."""
        return torch.bmm(self.q, x.unsqueeze(-1)).squeeze(-1)

    def edge_grad(self, y, u, x):
        """(N_from, N_to) sum_b Q(j, i) (y(j) + u(j) x(i))."""
        weights = self.q * (y.unsqueeze(-1) + u.unsqueeze(-1) * x.unsqueeze(1))
        return weights.sum(0).t()


class _Levels:
    """Column-shifted transitions E = exp(L' - c) (N, N) and the level split of states."""

    def __init__(self, transitions, gamma: float = 1.0):
        """``transitions``: the scaled chain's (``L / gamma``, gamma the temperature)."""
        width, edge_range = LEVEL_LIMITS.get(transitions.dtype, (None, None))
        self.width, self.limit = width, (width or 0) + (edge_range or 0) + 1.0
        column_max = transitions.max(0).values
        self.shift = _finite_or_zero(column_max)  # c (N_to,)
        self.edges = torch.exp(transitions - self.shift)  # E (N_from, N_to)
        spread = self.shift - torch.where(torch.isfinite(transitions), transitions, self.shift)
        self.usable = width is not None and bool(spread.max() <= edge_range)
        if width is None:
            _log_fallback_once(f'no level limits for dtype {transitions.dtype}')
        elif not self.usable:
            reach = float(spread.max())  # of L / gamma: the given transitions reach gamma x it
            scaled = ('' if gamma == 1 else f' ({reach:.1f} after dividing by the temperature '
                      f'{gamma:g})')
            cause = ('a log(p + eps) floor' if gamma == 1 else
                     'a log(p + eps) floor, or the small temperature')
            _log_fallback_once(
                f'finite transitions reach {reach * gamma:.1f} nats below their column\'s '
                f'best{scaled} (level limit {edge_range:g} for {transitions.dtype}), e.g. '
                f'{cause}; forbidden edges as -inf keep the level evaluation')

    def split(self, a_prev):
        """Level weights [(w_k (B, N), s_k (B, 1))], or None when too many levels."""
        top = _finite_or_zero(a_prev.max(-1, keepdim=True).values)
        depth = torch.floor((top - a_prev) / self.width)  # inf for impossible states
        finite = torch.isfinite(depth)
        count = int(depth[finite].max()) + 1 if finite.any() else 1
        if count > MAX_LEVELS:
            _log_fallback_once(f'forward variables span {count} levels of {self.width:g} nats '
                               f'(more than MAX_LEVELS={MAX_LEVELS})')
            return None
        levels = []
        for k in range(count):
            shift = top - k * self.width
            inside = depth == k
            levels.append((torch.where(inside, torch.exp(a_prev - shift),
                                       torch.zeros_like(a_prev)), shift))
        return levels


class _LevelStep:
    """Q_t applied through per-level matrix products (see module docstring)."""

    def __init__(self, levels: _Levels, split, lse):
        self.edges, self.split = levels.edges, split
        finite = torch.isfinite(lse)
        # an exponent above WIDTH + EDGE_RANGE means level k has no edge into j (its terms
        # are all exactly 0), so clamping it only avoids inf * 0 and changes no value
        self.scales = [torch.where(finite, torch.exp(torch.clamp(
            shift + levels.shift - _finite_or_zero(lse), max=levels.limit)),
            torch.zeros_like(lse)) for _, shift in split]  # rho_k (B, N_to)

    @staticmethod
    def log_normaliser(levels: _Levels, split):
        terms = [shift + levels.shift + torch.log(weights @ levels.edges)
                 for weights, shift in split]
        return torch.logsumexp(torch.stack(terms), 0)

    def left(self, v):
        return sum(w * ((v * rho) @ self.edges.t()) for (w, _), rho in zip(self.split, self.scales))

    def right(self, x):
        return sum(rho * ((w * x) @ self.edges) for (w, _), rho in zip(self.split, self.scales))

    def edge_grad(self, y, u, x):
        total = sum(w.t() @ (rho * y) + (w * x).t() @ (rho * u)
                    for (w, _), rho in zip(self.split, self.scales))
        return self.edges * total


class _Chain:
    """Forward variables of the scaled chain and the Q_t operators built from them."""

    def __init__(self, transitions, impl: str, gamma: float = 1.0):
        self.to_from = transitions.t().contiguous()  # dense steps reduce over its last dim
        self.levels = _Levels(transitions, gamma) if impl == 'levels' else None
        if self.levels is not None and not self.levels.usable:
            self.levels = None

    def _split(self, a_prev):
        return None if self.levels is None else self.levels.split(a_prev)

    def log_normaliser(self, a_prev):
        split = self._split(a_prev)
        if split is None:
            return _DenseStep.log_normaliser(a_prev, self.to_from)
        return _LevelStep.log_normaliser(self.levels, split)

    def step(self, a_prev, lse):
        split = self._split(a_prev)
        if split is None:
            return _DenseStep(a_prev, self.to_from, lse)
        return _LevelStep(self.levels, split, lse)


class _ViterbiChain(torch.autograd.Function):
    """Marginals and log partition of the scaled chain, with a recomputing backward."""

    @staticmethod
    def forward(ctx, emissions, transitions, prior, gamma, impl):
        chain = _Chain(transitions, impl, gamma)
        alpha, log_norms = [prior + emissions[:, 0]], [torch.zeros_like(emissions[:, 0])]
        for t in range(1, emissions.shape[1]):
            log_norms.append(chain.log_normaliser(alpha[-1]))
            alpha.append(emissions[:, t] + log_norms[-1])
        alpha, log_norms = torch.stack(alpha, 1), torch.stack(log_norms, 1)  # (B, T, N)
        log_partition = torch.logsumexp(alpha[:, -1], -1)
        soft = [torch.exp(alpha[:, -1] - _finite_or_zero(log_partition).unsqueeze(-1))]
        for t in range(emissions.shape[1] - 1, 0, -1):
            soft.append(chain.step(alpha[:, t - 1], log_norms[:, t]).left(soft[-1]))
        soft_plan = torch.stack(soft[::-1], 1)
        ctx.gamma, ctx.impl = gamma, impl
        ctx.save_for_backward(alpha, log_norms, soft_plan, transitions)
        return soft_plan, gamma * log_partition

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_soft, grad_log_partition):
        alpha, log_norms, soft, transitions = ctx.saved_tensors
        chain, horizon = _Chain(transitions, ctx.impl, ctx.gamma), alpha.shape[1]
        grad_soft = torch.zeros_like(soft) if grad_soft is None else grad_soft
        if grad_log_partition is None:
            grad_log_partition = torch.zeros_like(alpha[:, 0, 0])
        # total gradient g_t of u_t through u_{t-1} = u_t Q_t (ascending in t)
        total = [grad_soft[:, 0]]
        for t in range(1, horizon):
            step = chain.step(alpha[:, t - 1], log_norms[:, t])
            total.append(grad_soft[:, t] + step.right(total[-1]))
        last = soft[:, -1]
        inner = (last * total[-1]).sum(-1, keepdim=True)
        grad_a = last * (total[-1] - inner) + ctx.gamma * grad_log_partition.unsqueeze(-1) * last
        grad_emissions = [grad_a]
        grad_transitions = torch.zeros_like(transitions) if ctx.needs_input_grad[1] else None
        for t in range(horizon - 1, 0, -1):  # chain of a_t, descending in t
            step = chain.step(alpha[:, t - 1], log_norms[:, t])
            residual = grad_a - soft[:, t] * (total[t] - grad_soft[:, t])  # a'_t - u_t c_t
            if grad_transitions is not None:
                grad_transitions += step.edge_grad(residual, soft[:, t], total[t - 1])
            grad_a = step.left(residual) + total[t - 1] * soft[:, t - 1]
            grad_emissions.append(grad_a)
        grad_emissions = torch.stack(grad_emissions[::-1], 1)
        grad_prior = grad_emissions[:, 0].sum(0) if ctx.needs_input_grad[2] else None
        return grad_emissions, grad_transitions, grad_prior, None, None


def resolve_impl(impl: str, device: torch.device) -> str:
    """``'levels'`` or ``'dense'`` for ``impl`` in IMPLEMENTATIONS on ``device`` ('auto':
    levels on the CPU, dense elsewhere)."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f'impl={impl!r} is unknown; expected one of {IMPLEMENTATIONS}')
    if impl == 'auto':
        return 'levels' if device.type == 'cpu' else 'dense'
    return impl


def _check_temperature_fits(emissions, transitions, prior, temperature: float) -> None:
    """Refuse a temperature at which the chain divided by it leaves the dtype's range: a tiny
    one turns finite log values into -inf (a feasible chain read as infeasible: u = 0,
    log Z = -inf), a huge one overflows log Z = gamma * logsumexp(...) to +inf."""
    if not values_checkable(emissions):
        return
    horizon, num_actions = emissions.shape[1], emissions.shape[2]
    largest = 0.0
    for values in (emissions, transitions, prior):
        finite = values.detach()[torch.isfinite(values.detach())]
        if finite.numel():
            largest = max(largest, float(finite.abs().max()))
    limit = torch.finfo(emissions.dtype).max / (2 * (horizon + 1))
    lowest = largest / limit
    highest = limit / max(1.0, math.log(num_actions))
    if not lowest <= temperature <= highest:
        raise ValueError(f'differentiable_viterbi() argument temperature={temperature:g}: the '
                         f'chain (log values up to {largest:.3g} in magnitude, T={horizon}, '
                         f'N={num_actions}) divided by it leaves the range of '
                         f'{emissions.dtype} (a feasible chain would read as infeasible, or '
                         f'log Z overflow); expected a temperature in [{lowest:.3g}, '
                         f'{highest:.3g}]')


@torch.no_grad()
def check_soft_plan_sums(soft_plan: torch.Tensor, log_partition: torch.Tensor,
                         log_emissions: torch.Tensor) -> None:
    """Refuse a soft plan (B, T, N) whose rows of a feasible sample (finite log partition (B,))
    do not sum to 1: log emissions of a large common magnitude (raw scores around 1e6 in
    float32) cancel in alpha + beta - log Z beyond the dtype's precision, and the marginals
    came back off by 0.1 (entries of 16 at 1e8) without a word. Tolerance 1e-2, or the
    dtype's rounding where it is coarser (half precision)."""
    if not values_checkable(soft_plan):
        return
    feasible = torch.isfinite(log_partition)
    if not bool(feasible.any()):
        return
    deviation = (soft_plan.detach()[feasible].double().sum(-1) - 1).abs()  # (B', T)
    num_actions = soft_plan.shape[-1]
    tolerance = max(1e-2, 8 * torch.finfo(soft_plan.dtype).eps * max(1.0, math.log(num_actions)))
    if float(deviation.max()) <= tolerance:
        return
    sample, step = (int(i) for i in (deviation == deviation.max()).nonzero()[0])
    sample = int(feasible.nonzero()[sample])
    row = float(soft_plan[sample, step].double().sum())
    finite = log_emissions.detach()[torch.isfinite(log_emissions.detach())]
    raise ValueError(
        f'differentiable_viterbi: the soft plan of sample {sample} sums to {row:.4g} at step '
        f'{step} (expected 1): its log emissions (up to {float(finite.abs().max()):.3g} in '
        f'magnitude, log partition {float(log_partition[sample]):.3g}) exceed the precision of '
        f'{soft_plan.dtype}; expected log probabilities or scores of moderate scale (e.g. the '
        'log_softmax of the logits), or float64 emissions')


def _clamp_log(values: torch.Tensor, clamp_probs: Optional[float]) -> torch.Tensor:
    return values if clamp_probs is None else values.clamp(min=math.log(clamp_probs))


@checked_arguments
def differentiable_viterbi(log_emissions: torch.Tensor, log_transitions: torch.Tensor,
                           log_prior: Optional[torch.Tensor] = None,
                           temperature: Positive = 1.0, *,
                           clamp_probs: Optional[ClampProbability] = None,
                           num_layers: Count = 1, impl: Implementation = 'auto') -> Tuple[torch.Tensor, torch.Tensor]:
    """Soft plan ``(B, T, N)`` and log partition ``(B,)`` of the chain (module docstring).

    Args:
        log_emissions: (B, T, N) log emission scores theta.
        log_transitions: (N, N) log transition probabilities ``[from, to]``; -inf = forbidden
            edge. Rows must sum to 1 in probability space (or be all -inf).
        log_prior: (N,) log initial distribution; uniform ``-log N`` when None.
        temperature: gamma > 0 (1 = exact marginals; -> 0 = hard Viterbi path).
        clamp_probs: e.g. 1e-10 reproduces the authors' code: every probability (emission,
            transition, prior) is clamped from below at ``clamp_probs`` (log values at
            ``log(clamp_probs)``), so no edge is strictly forbidden.
        num_layers: k stacked DVLs. Layer l + 1 receives ``log`` of layer l's soft plan as
            its log emissions (floored at ``clamp_probs``, or at the dtype's smallest normal
            number so that impossible steps stay effectively forbidden) with the same
            transitions and prior; the returned log partition is that of the last layer.
        impl: how Q_t is applied (module docstring): ``'auto'`` (levels on the CPU, dense
            elsewhere), ``'levels'`` (matrix products, dense where they cannot apply) or
            ``'dense'`` (log space, no value read back to the host). Same values.
    """
    emissions, transitions, prior = check_chain_inputs(log_emissions, log_transitions,
                                                       log_prior)
    impl = resolve_impl(impl, emissions.device)
    gamma = float(temperature)
    check_clamp('differentiable_viterbi() argument clamp_probs', clamp_probs,
                emissions.shape[-1])
    _check_temperature_fits(_clamp_log(emissions, clamp_probs),
                            _clamp_log(transitions, clamp_probs),
                            _clamp_log(prior, clamp_probs), gamma)
    transitions = _clamp_log(transitions, clamp_probs) / gamma
    prior = _clamp_log(prior, clamp_probs) / gamma
    floor = clamp_probs or torch.finfo(emissions.dtype).tiny

    def layer(log_emissions):
        return _ViterbiChain.apply(_clamp_log(log_emissions, clamp_probs) / gamma, transitions,
                                   prior, gamma, impl)
    soft_plan, log_partition = layer(emissions)
    check_soft_plan_sums(soft_plan, log_partition, emissions)
    for _ in range(num_layers - 1):
        soft_plan, log_partition = layer(torch.log(soft_plan.clamp(min=floor)))
    return soft_plan, log_partition

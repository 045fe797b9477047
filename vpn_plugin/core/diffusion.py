"""PDPP's projected diffusion over plans, in plain torch (the official MCG-NJU/PDPP math).

A plan of T steps is a tensor x (B, T, C) with C = K + N + D per step:
``[condition block (K) | action one-hot (N) | observation (D)]``; observations only at steps 0
(start) and T-1 (goal). PDPP's condition block is the task one-hot (the same at every step);
KEPP's plan model writes its PKG and LLM blocks there (K = 2N, per step) and its step model has
none (K = 0) and zeroes every dim of the middle steps. The network predicts x0 from a noised
x_t; the conditions are projected back in after every step (:func:`project_conditions`).
Samplers: 10-step DDIM (:func:`ddim_sample`) and the full DDPM chain (:func:`ddpm_sample`).
Shapes: B batch, T horizon, K condition dims, N actions, D observation dim, n diffusion steps.
"""
from __future__ import annotations

import math
from typing import Annotated, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

from ..config_types import Count, NonNegativeInt, Range, checked_arguments

SCHEDULE_BUFFERS = (
    'betas', 'alphas_cumprod', 'alphas_cumprod_prev', 'sqrt_alphas_cumprod',
    'sqrt_one_minus_alphas_cumprod', 'log_one_minus_alphas_cumprod', 'sqrt_recip_alphas_cumprod',
    'sqrt_recipm1_alphas_cumprod', 'posterior_variance', 'posterior_log_variance_clipped',
    'posterior_mean_coef1', 'posterior_mean_coef2')
DDIM_STEPS = 10  # the official sampler's fixed number of jumps
# the most diffusion steps a model takes (official 50-1000): 10**9 allocated ~10 float64
# schedules of 7.5 GiB each (the process was killed for memory, no option named)
MAX_DIFFUSION_STEPS = 100_000
DiffusionSteps = Annotated[int, Range(1, MAX_DIFFUSION_STEPS)]


@checked_arguments
def cosine_beta_schedule(num_steps: DiffusionSteps, s: float = 0.008) -> torch.Tensor:
    """Betas (n,) float32 of the cosine schedule, computed in float64 and clipped to
    [0, 0.999] before the cast (as the official ``helpers.cosine_beta_schedule``)."""
    x = np.linspace(0, num_steps + 1, num_steps + 1)
    alphas_cumprod = np.cos(((x / (num_steps + 1)) + s) / (1 + s) * np.pi * 0.5) ** 2
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
    betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
    return torch.tensor(np.clip(betas, 0, 0.999), dtype=torch.float32)


@checked_arguments
def diffusion_schedule(num_steps: DiffusionSteps) -> Dict[str, torch.Tensor]:
    """The official ``GaussianDiffusion`` buffers, each (n,) float32, keyed by
    :data:`SCHEDULE_BUFFERS` (products and roots in float32 torch, as there)."""
    betas = cosine_beta_schedule(num_steps)
    alphas = 1. - betas
    cumprod = torch.cumprod(alphas, 0)
    prev = torch.cat([torch.ones(1), cumprod[:-1]])
    posterior_variance = betas * (1. - prev) / (1. - cumprod)
    return dict(
        betas=betas, alphas_cumprod=cumprod, alphas_cumprod_prev=prev,
        sqrt_alphas_cumprod=cumprod.sqrt(), sqrt_one_minus_alphas_cumprod=(1. - cumprod).sqrt(),
        log_one_minus_alphas_cumprod=(1. - cumprod).log(),
        sqrt_recip_alphas_cumprod=(1. / cumprod).sqrt(),
        sqrt_recipm1_alphas_cumprod=(1. / cumprod - 1).sqrt(),
        posterior_variance=posterior_variance,
        posterior_log_variance_clipped=posterior_variance.clamp(min=1e-20).log(),
        posterior_mean_coef1=betas * _numpy_sqrt(prev) / (1. - cumprod),
        posterior_mean_coef2=(1. - prev) * _numpy_sqrt(alphas) / (1. - cumprod))


def _numpy_sqrt(values: torch.Tensor) -> torch.Tensor:
    """``np.sqrt`` of a float32 tensor, as the official posterior coefficients take it (it
    can differ from ``torch.sqrt`` in the last bit, which the DDPM chain amplifies)."""
    if values.device.type == 'meta':  # a model built on the meta device (nothing is run)
        return values.sqrt()
    return torch.from_numpy(np.sqrt(values.cpu().numpy())).to(values.device)


@checked_arguments
def ddim_timesteps(num_steps: DiffusionSteps, ddim_steps: Count = DDIM_STEPS) -> np.ndarray:
    """The official ``ddim_timestep_seq`` ('uniform'): ``range(0, n, n // ddim_steps)``; the
    sampler jumps through its first ``ddim_steps`` entries, last to first (``ddim_steps=0``
    was a ZeroDivisionError naming nothing)."""
    if num_steps < ddim_steps:
        raise ValueError(f'n_timesteps={num_steps} is below the {ddim_steps} DDIM steps; '
                         f'expected n_timesteps >= {ddim_steps}')
    return np.arange(0, num_steps, num_steps // ddim_steps)


def _at(buffer: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``buffer[t]`` (n,)[(B,)] shaped (B, 1, 1) to broadcast over (B, T, C)."""
    return buffer.gather(-1, t).view(-1, 1, 1)


def q_sample(x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor,
             schedule: Dict[str, torch.Tensor]) -> torch.Tensor:
    """x_t (B, T, C) = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise, for t (B,) long."""
    return (_at(schedule['sqrt_alphas_cumprod'], t) * x0
            + _at(schedule['sqrt_one_minus_alphas_cumprod'], t) * noise)


def project_conditions(x: torch.Tensor, task_onehot: torch.Tensor, start: torch.Tensor,
                       goal: torch.Tensor, zero_middle: bool = False) -> torch.Tensor:
    """x (B, T, K+N+D) with the conditions written in (official ``condition_projection``):
    the first K dims = ``task_onehot`` (B, K) at every step, or per step when (B, T, K) (KEPP's
    PKG and LLM blocks, written over, not added), observation dims = ``start`` (B, D) at step
    0, ``goal`` (B, D) at step T-1, zero in between; action dims kept (a new tensor).
    ``zero_middle``: every dim of steps 1..T-2 is zero (KEPP's step model)."""
    num_tasks, dim = task_onehot.shape[-1], start.shape[-1]
    steps = x.shape[1]
    if x.dim() != 3 or steps < 2:  # T=1 was "negative dimension -1", naming nothing
        raise ValueError(f'project_conditions: x has shape {tuple(x.shape)}; expected (B, T, '
                         'K+N+D) with T >= 2 (the start observation at step 0, the goal at '
                         'step T-1)')
    middle = start.new_zeros(start.shape[0], steps - 2, dim)
    observations = torch.cat([start[:, None], middle, goal[:, None]], 1)
    block = task_onehot if task_onehot.dim() == 3 else task_onehot[:, None].expand(-1, steps, -1)
    x = torch.cat([block.to(x.dtype), x[..., num_tasks:x.shape[-1] - dim], observations], -1)
    if zero_middle:
        x = torch.cat([x[:, :1], x.new_zeros(x.shape[0], steps - 2, x.shape[-1]), x[:, -1:]], 1)
    return x


def plan_tensor(plan: torch.Tensor, task_onehot: torch.Tensor, start: torch.Tensor,
                goal: torch.Tensor, num_actions: int, middle_actions: bool = True
                ) -> torch.Tensor:
    """x0 (B, T, K+N+D) of a plan (B, T) long (official ``Trainer.train``), the condition
    block ``task_onehot`` (B, K) or (B, T, K) as in :func:`project_conditions`; with
    ``middle_actions=False`` the action dims of steps 1..T-2 are zero (the first/last step
    models of the ViterbiPlanNet authors and of KEPP)."""
    actions = torch.nn.functional.one_hot(plan, num_actions).to(start.dtype)
    if not middle_actions:
        actions[:, 1:-1] = 0
    x = torch.cat([actions.new_zeros(*plan.shape, task_onehot.shape[-1]), actions,
                   start.new_zeros(*plan.shape, start.shape[-1])], -1)
    return project_conditions(x, task_onehot, start, goal)


def weighted_mse(pred: torch.Tensor, target: torch.Tensor, num_tasks: int, num_actions: int,
                 endpoint_weight: float = 10., middle_weight: float = 1.) -> torch.Tensor:
    """Official ``Weighted_MSE``: the SUM over (B, T, C) of squared errors, the action dims
    (after the ``num_tasks`` condition dims) of the first and last steps times
    ``endpoint_weight`` (PDPP 10, KEPP's plan model 5, its step model 10), of the middle steps
    times ``middle_weight`` (0: the first/last step models). Scalar."""
    weights = torch.ones(pred.shape[1:], dtype=pred.dtype, device=pred.device)
    actions = slice(num_tasks, num_tasks + num_actions)
    weights[1:-1, actions] = middle_weight
    weights[0, actions] = endpoint_weight
    weights[-1, actions] = endpoint_weight
    return ((pred - target) ** 2 * weights).sum()


def ddim_sample(denoise: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                x_t: torch.Tensor, project: Callable[[torch.Tensor], torch.Tensor],
                schedule: Dict[str, torch.Tensor], timesteps: np.ndarray,
                ddim_steps: int = DDIM_STEPS, trace: bool = False
                ) -> Tuple[torch.Tensor, Optional[List[torch.Tensor]],
                           Optional[List[torch.Tensor]]]:
    """Deterministic DDIM (eta = 0) from x_T (B, T, C), official ``p_sample_loop(if_jump=True)``.

    ``denoise(x, t (B,)) -> x0`` is the network; ``project`` writes the conditions. For
    i = ddim_steps-1..0 with t = timesteps[i]: eps = (x / sqrt(abar_t) - x0) / sqrt(1/abar_t - 1),
    x = sqrt(abar_prev) x0 + sqrt(1 - abar_prev) eps (abar_prev = abar at timesteps[i-1], 1 for
    i = 0: the last step returns x0), then projected. Returns (x (B, T, C), states, x0s): with
    ``trace``, the 1 + ddim_steps projected states and the ddim_steps raw network outputs.
    """
    x = project(x_t)
    states, recons = ([x], []) if trace else (None, None)
    for i in reversed(range(ddim_steps)):
        x0, x = ddim_step(denoise, x, i, project, schedule, timesteps)
        if trace:
            states.append(x)
            recons.append(x0)
    return x, states, recons


def ddim_step(denoise: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], x: torch.Tensor,
              i: int, project: Callable[[torch.Tensor], torch.Tensor],
              schedule: Dict[str, torch.Tensor], timesteps: np.ndarray
              ) -> Tuple[torch.Tensor, torch.Tensor]:
    """One step of ``ddim_sample`` at DDIM index ``i`` (t = timesteps[i]) from the projected
    state x (B, T, C): (the network's x0 (B, T, C), the next projected state (B, T, C))."""
    t = torch.full((x.shape[0],), int(timesteps[i]), dtype=torch.long, device=x.device)
    x0 = denoise(x, t)
    eps = ((_at(schedule['sqrt_recip_alphas_cumprod'], t) * x - x0)
           / _at(schedule['sqrt_recipm1_alphas_cumprod'], t))
    prev = (_at(schedule['alphas_cumprod'], torch.full_like(t, int(timesteps[i - 1])))
            if i > 0 else _at(schedule['alphas_cumprod_prev'], torch.zeros_like(t)))
    return x0, project(x0 * prev.sqrt() + (1 - prev).sqrt() * eps)


@checked_arguments
def pdpp_lr_multiplier(step: NonNegativeInt, total_steps: Count) -> float:
    """Official ``get_lr_schedule_with_warmup`` factor at optimiser step ``step`` (0-based) of
    ``total_steps``: linear warm-up over total*20/120 steps (0 at step 0), then halved every
    total*30/120 steps."""
    warmup, decay = total_steps * 20 / 120, total_steps * 30 / 120
    if step <= warmup:
        return max(0., float(step) / float(max(1, warmup)))
    return max(0.5 ** ((step - warmup) // decay), 0.)


@checked_arguments
def sinusoidal_embedding(t: torch.Tensor, dim: Annotated[int, Range(4)]) -> torch.Tensor:
    """(B, dim) ``[sin(t w), cos(t w)]`` with w_i = exp(-i ln(10000) / (dim/2 - 1)) for t (B,)
    (dim 2 divided by zero, an odd dim gave dim - 1 columns)."""
    if dim % 2:
        raise ValueError(f'sinusoidal_embedding() argument dim={dim}; expected an even integer '
                         '>= 4 (half sine, half cosine columns)')
    half = dim // 2
    frequencies = torch.exp(torch.arange(half, device=t.device) * -(math.log(10000) / (half - 1)))
    angles = t[:, None] * frequencies[None, :]
    return torch.cat((angles.sin(), angles.cos()), -1)


def ddpm_sample(denoise: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                x_t: torch.Tensor, project: Callable[[torch.Tensor], torch.Tensor],
                schedule: Dict[str, torch.Tensor], noise: Callable[[int], torch.Tensor],
                trace: bool = False) -> Tuple[torch.Tensor, Optional[List[torch.Tensor]],
                                              Optional[List[torch.Tensor]]]:
    """Ancestral sampling over all n steps, official ``p_sample_loop(if_jump=False)`` (what
    PDPP's and KEPP's validation use).

    For k = 0..n-1 with t = n-1-k: x0 = denoise(x, t), mean = coef1_t x0 + coef2_t x (the
    posterior q(x_{t-1} | x_t, x0)), x = mean + exp(log_var_t / 2) noise(k) (no noise at t = 0),
    then projected. ``noise(k)`` (B, T, C) is the k-th draw (the official ``randn_like``).
    Returns (x, states, x0s) as :func:`ddim_sample`, with 1 + n states and n outputs.
    """
    x = project(x_t)
    states, recons = ([x], []) if trace else (None, None)
    for step in range(len(schedule['betas'])):
        x0, x = ddpm_step(denoise, x, step, project, schedule, noise(step))
        if trace:
            states.append(x)
            recons.append(x0)
    return x, states, recons


def ddpm_step(denoise, x: torch.Tensor, step: int, project, schedule: Dict[str, torch.Tensor],
              draw: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Step ``step`` (0 = the first, t = n-1) of :func:`ddpm_sample` from the state x
    (B, T, C) with its noise draw: (the network's x0, the next projected state)."""
    steps = len(schedule['betas'])
    t = torch.full((x.shape[0],), steps - 1 - step, dtype=torch.long, device=x.device)
    x0 = denoise(x, t)
    mean = _at(schedule['posterior_mean_coef1'], t) * x0 + \
        _at(schedule['posterior_mean_coef2'], t) * x
    if step < steps - 1:
        mean = mean + (0.5 * _at(schedule['posterior_log_variance_clipped'], t)).exp() * draw
    return x0, project(mean)

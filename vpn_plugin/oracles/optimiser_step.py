"""Optimiser-step rows of the oracle checker (``oracles.compare``'s rules for a recorded
training step: parameters after the optimiser, an EMA copy after its update).

A step's content is its update: ``after - before``. A row compares our update with the
recorded one (both from the fixture's ``before``, the official weights) at the scale of the
recorded update, not of the parameters, so that a wrong learning rate or EMA decay shows
even where the update is a 1e-6 part of the weights.

**The gradient's conditioning, measured.** AdamW's first step moves every entry by about
``lr * g / (|g| + eps)``: a sign. Where a gradient is 0 in exact arithmetic (the key third of
an attention ``qkv.bias``: softmax ignores a constant shift) the float32 gradient is round-off,
its sign depends on the summation order, and correct implementations differ there by up to
2 lr. Each entry's uncertainty is measured, as every other conditioning of the checker:
``CONDITIONING_FACTOR`` times its largest movement under the ``PERTURBATION`` of the step's
inputs, and at least ``GRADIENT_ROUND_OFF`` of the model's largest gradient (float32 round-off
of a sum of terms of that size). The update's range over ``g +- uncertainty``, computed with the
same optimiser settings (``update_spread``), is what a correct implementation may differ by at
that entry: about 0 where the gradient's sign is determined, up to 2 lr where it is not.
Each entry is judged at ``tolerance * scale + spread + STORED_ROUNDINGS`` float32 spacings
of the stored value: each side's parameter is a float32 result of two roundings at the
parameter's size (AdamW: the decayed weight, then the update subtracted; the EMA: the decayed
copy, then the new part added), which an update 1e-4 to 1e-6 of the weights does not dwarf.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Sequence

import numpy as np
import torch

from .compare import (CONDITIONING_FACTOR, PERTURBATION, Row, as_array, mark_widened, max_abs,
                      note, one_side_row, read_npz, relative, same_nonfinite)

GRADIENT_ROUND_OFF = 1e-6  # about 8 float32 rounding units of the model's largest gradient
STORED_ROUNDINGS = 2  # float32 roundings at the parameter's size in a stored value (docstring)

Tensors = Mapping[str, torch.Tensor]


def gradient_uncertainty(grads: Tensors, perturbed: Sequence[Tensors]) -> Dict[str, torch.Tensor]:
    """Per entry: ``CONDITIONING_FACTOR`` x its largest movement over the ``perturbed`` reruns
    (gradients of the step rerun on perturbed inputs), at least ``GRADIENT_ROUND_OFF`` x the
    model's largest |gradient|; NaN where a rerun is not finite (nothing can be judged)."""
    scale = max((max_abs(g) for g in grads.values()), default=0.0)
    uncertainty = {}
    for name, grad in grads.items():
        grad = grad.double()
        moved = torch.zeros_like(grad)
        for run in perturbed:
            moved = torch.maximum(moved, (run[name].double() - grad).abs())
        moved = torch.where(torch.isfinite(moved), moved, torch.full_like(moved, math.nan))
        uncertainty[name] = torch.clamp(CONDITIONING_FACTOR * moved,
                                        min=GRADIENT_ROUND_OFF * scale)
    return uncertainty


def update_spread(step: Callable[[Tensors, Tensors], Tensors], before: Tensors, grads: Tensors,
                  uncertainty: Tensors) -> Dict[str, torch.Tensor]:
    """Per entry: the range of the parameter after ``step(before, grads)`` (the optimiser with
    the fixture's settings from a fresh state; monotone in each gradient entry) over the
    gradient interval ``grads +- uncertainty``. NaN where the uncertainty is not finite."""
    low = step(before, {k: (g.double() - uncertainty[k]).to(g.dtype) for k, g in grads.items()})
    high = step(before, {k: (g.double() + uncertainty[k]).to(g.dtype) for k, g in grads.items()})
    return {k: torch.where(torch.isfinite(uncertainty[k]),
                           (high[k].double() - low[k].double()).abs(),
                           torch.full_like(uncertainty[k], math.nan))
            for k in grads}


def step_row(label: str, before, recorded_after, ours_after, spread, tolerance: float) -> Row:
    """One parameter's row: the update ``after - before``, ours against the recorded one,
    per entry within ``tolerance * scale + spread + 2 spacings`` (module docstring; scale: the
    recorded update's max abs). The row shows the entry with the largest difference /
    allowance: (label, max abs diff, its diff / scale, its allowance / scale, ok)."""
    before, recorded, ours = (as_array(v) for v in (before, recorded_after, ours_after))
    spread = as_array(spread)
    if not (before.shape == recorded.shape == ours.shape == spread.shape):
        return (f'{label} (shape)', math.inf, math.inf, tolerance, False)
    if not (same_nonfinite(recorded, ours) and np.isfinite(before).all()
            and np.isfinite(recorded).all() and np.isfinite(spread).all()):
        return (f'{label} (non-finite)', math.inf, math.inf, math.nan, False)
    update = recorded - before
    scale = max_abs(update)
    diff = np.abs(ours - recorded)
    spacing = np.spacing(np.maximum(np.abs(recorded), np.abs(ours)).astype(np.float32))
    allowed = tolerance * scale + spread + STORED_ROUNDINGS * spacing.astype(np.float64)
    if not diff.size:
        return (label, 0.0, 0.0, tolerance, True)
    worst = int(np.argmax(diff / allowed))
    rel, limit = relative(float(diff.flat[worst]), scale), relative(float(allowed.flat[worst]),
                                                                    scale)
    mark_widened(label, relative(float(allowed.max()), scale), tolerance,
                 entries=(int((spread > tolerance * scale).sum()), int(diff.size)))
    return (label, float(diff.max()), rel, limit, bool((diff <= allowed).all()))


def compare_steps(path: Path, prefix: str, before: Tensors, ours_after: Tensors,
                  spread: Tensors, tolerance: float, what: str) -> List[Row]:
    """Rows ``{file}:{prefix}{name}`` of every recorded ``{prefix}*`` array of ``path`` and
    every parameter of ``ours_after`` (one side only: a failing ``(missing)`` row), each a
    ``step_row`` (a parameter without a ``spread``, which got no gradient, is allowed none);
    one ``conditioning:`` line says where the gradient's uncertainty left the update
    undetermined (``what``: the step's perturbed inputs)."""
    recorded = {k[len(prefix):]: v for k, v in read_npz(path).items() if k.startswith(prefix)}
    label = f'{Path(path).name}:{prefix}'
    rows = []
    for name in sorted(set(recorded) | set(ours_after)):
        if name not in recorded or name not in ours_after or name not in before:
            rows.append(one_side_row(f'{label}{name}', name in recorded,
                                     name in ours_after and name in before, tolerance))
            continue
        rows.append(step_row(f'{label}{name}', before[name], recorded[name], ours_after[name],
                             spread.get(name, torch.zeros_like(before[name])), tolerance))
    note_spread(label, recorded, before, spread, tolerance, what)
    return rows


def note_spread(label: str, recorded: Mapping[str, np.ndarray], before: Tensors,
                spread: Tensors, tolerance: float, what: str) -> None:
    """The ``conditioning:`` line of ``compare_steps``: how many entries got more than the
    base allowance, in which arrays, and the largest spread relative to the update scale."""
    widened, total, worst, where = 0, 0, 0.0, {}
    for name, value in recorded.items():
        if name not in spread or name not in before:
            continue  # no gradient: no spread
        scale = max_abs(as_array(value) - as_array(before[name]))
        extra = as_array(spread[name])
        over = int((~(extra <= tolerance * scale)).sum())  # NaN counts as over
        widened, total = widened + over, total + extra.size
        if over:
            where[name] = over
            largest = float(extra.max()) if np.isfinite(extra).all() else math.inf
            worst = max(worst, relative(largest, scale))
    if not widened:
        return
    named = ', '.join(f'{n} {c}' for n, c in sorted(where.items(), key=lambda i: -i[1])[:4])
    note(f'conditioning: {label}*: {widened} of {total} entries have a gradient within its '
         f'uncertainty ({CONDITIONING_FACTOR:g} x its movement under a {PERTURBATION:.0e} '
         f'relative perturbation of {what}, at least {GRADIENT_ROUND_OFF:.0e} of the model\'s '
         f'largest gradient), where the update\'s sign or size is undetermined ({named}'
         f'{", ..." if len(where) > 4 else ""}); there the row allows the update\'s range over '
         f'that uncertainty, up to {worst:.2g} x the update scale; elsewhere {tolerance:.0e} '
         'of it (the update = after - before, compared at the recorded update\'s scale)')

"""Procedure-planning metrics, per sample first, so that averages never depend on batching.

All values are in percent. For predicted and ground-truth plans ``(M, T)`` of integer ids:

* ``success_rate``: the whole plan is right.
* ``mean_accuracy``: fraction of right steps (position-wise).
* ``miou_set``: IoU of the *sets* of actions of the two plans, per sample, then averaged.
* ``miou_legacy``: the formula of the SCHEMA / ViterbiPlanNet evaluation code, per sample
  ``sum_t(pred_t & gt_t) / sum_t(pred_t | gt_t)`` with ``&``/``|`` the *bitwise* AND/OR of the
  integer action ids, then averaged. It reproduces published numbers but is not a set IoU: it
  depends on the binary encoding of the label ids (relabelling the taxonomy changes it). A
  sample whose plans are both all-zero ids (0/0) counts as 100.
* ``first_accuracy`` / ``last_accuracy``: the first / last step is right.

A window without a usable plan (an LLM reply that is prose or out of the taxonomy, a failed
request, a beam search that finds no PKG path, ...) is a predicted plan filled with
:data:`NO_PLAN` (-1) at every step (:func:`no_plan`). It scores 0 on every metric, the legacy
bitwise mIoU included (whose formula would otherwise credit any id pattern), and adds no action
to ``miou_batch``'s predicted set. A plan with -1 at some steps only, or any other negative
id, is refused.

Named extras (``EXTRA_METRICS``), never part of the default set:

* ``miou_batch`` (:func:`miou_batch`): PDPP's mIoU, which MTID reports: ONE set IoU per
  evaluation batch (all action ids predicted in the batch vs all ground-truth ids in it),
  averaged over batches weighted by their size. It depends on the batch size and on the
  order of the samples (larger batches give higher values), so it is reported with its
  batch size and is not comparable with ``miou_set``.
"""
from __future__ import annotations

import numbers
from typing import Dict

import numpy as np
import torch

from ..config_types import Count, checked_arguments, refuse_bool_ids

METRIC_NAMES = ('success_rate', 'mean_accuracy', 'miou_set', 'miou_legacy',
                'first_accuracy', 'last_accuracy')
EXTRA_METRICS = ('miou_batch',)
INT64 = np.iinfo(np.int64)
NO_PLAN = -1  # the id of every step of a window without a plan (module docstring)


@checked_arguments
def no_plan(horizon: Count) -> list:
    """The plan (T,) a planner emits for a window it could not plan: [NO_PLAN] * T."""
    return [NO_PLAN] * horizon


def no_plan_rows(plans: np.ndarray) -> np.ndarray:
    """(M,) bool: the rows of plans (M, T) that are :func:`no_plan`."""
    return (np.asarray(plans) == NO_PLAN).all(1)


def as_plans(plans, name: str, allow_no_plan: bool = False) -> np.ndarray:
    """Checked int64 plans (M, T) from numpy / torch / lists; a single plan (T,) -> (1, T).
    ``allow_no_plan``: rows that are :func:`no_plan` are kept (predicted plans)."""
    if isinstance(plans, torch.Tensor):
        if plans.device.type == 'meta':
            raise ValueError(f'{name} is on the meta device, which holds no values; expected '
                             'plans (M, T) with data')
        plans = plans.detach().cpu().numpy()
    if isinstance(plans, (str, bytes)):  # numpy reads '123' as a 0-d array of text
        raise TypeError(f'{name} is a {type(plans).__name__} ({plans!r:.40}); expected plans '
                        '(M, T) of integer action ids (a numpy array, tensor or nested list)')
    refuse_bool_ids(plans, name)
    try:
        array = np.asarray(plans)
    except ValueError as error:  # ragged nested lists
        raise ValueError(f'{name} is not a rectangular (M, T) array of plans ({error}); '
                         'expected every plan to have the same length T') from None
    if array.ndim == 1 and array.size == 0:  # [] is no plan of length 0: it is no plans
        raise ValueError(f'{name} is empty; expected plans (M, T) with M >= 1 and T >= 1')
    if array.ndim == 1:
        array = array[None]
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(f'{name} has shape {array.shape}; expected plans (M, T) with T >= 1')
    if array.size and array.dtype == object and all(
            isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))
            for v in array.ravel()):  # Python ints (dtype=object, a pandas column's values)
        widest = max((int(v) for v in array.ravel()), key=abs)
        if not INT64.min <= widest <= INT64.max:
            raise ValueError(f'{name} holds action id {widest}, beyond int64; expected ids '
                             'that fit int64 (an index into the taxonomy)')
        array = array.astype(np.int64)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f'{name} has dtype {array.dtype}; expected integer action ids')
    if array.size and array.dtype == np.uint64 and int(array.max()) > np.iinfo(np.int64).max:
        raise ValueError(f'{name} holds action id {int(array.max())}; expected ids that fit '
                         'int64 (an index into the taxonomy)')
    negative = array < 0
    if allow_no_plan and array.size:
        negative &= ~no_plan_rows(array)[:, None]
    if negative.any():
        row = int(np.flatnonzero(negative.any(1))[0])
        hint = (f', or a whole plan of NO_PLAN ({NO_PLAN}) for a window without a plan'
                if allow_no_plan else '')
        raise ValueError(f'{name} holds negative action id {int(array[negative].min())} in plan '
                         f'{row} ({array[row].tolist()}); expected ids >= 0{hint}')
    return array.astype(np.int64)


def _set_iou(pred: np.ndarray, gt: np.ndarray) -> float:
    a, b = set(pred.tolist()), set(gt.tolist())
    return len(a & b) / len(a | b)


def _legacy_iou(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """(M,) bitwise-formula IoU of plans (M, T)."""
    intersection = np.bitwise_and(pred, gt).sum(1).astype(np.float64)
    union = np.bitwise_or(pred, gt).sum(1).astype(np.float64)
    return np.divide(intersection, union, out=np.ones_like(union), where=union > 0)


def per_sample_scores(pred, gt) -> Dict[str, np.ndarray]:
    """Dict of (M,) float64 per-sample scores in percent, keys ``METRIC_NAMES``.

    ``pred`` and ``gt`` are integer plans (M, T) (numpy or torch); the mean of each array is the
    corresponding :func:`planning_metrics` value. A ``pred`` row that is :func:`no_plan` scores
    0 on every metric.
    """
    pred, gt = as_plans(pred, 'pred', allow_no_plan=True), as_plans(gt, 'gt')
    if pred.shape != gt.shape:
        raise ValueError(f'pred has shape {pred.shape} but gt {gt.shape}; expected equal (M, T)')
    correct = pred == gt  # (M, T)
    scores = {
        'success_rate': correct.all(1),
        'mean_accuracy': correct.mean(1),
        'miou_set': np.array([_set_iou(p, g) for p, g in zip(pred, gt)]),
        'miou_legacy': _legacy_iou(pred, gt),
        'first_accuracy': correct[:, 0],
        'last_accuracy': correct[:, -1],
    }
    planned = ~no_plan_rows(pred)
    return {name: 100.0 * np.asarray(scores[name], dtype=np.float64) * planned
            for name in METRIC_NAMES}


def planning_metrics(pred, gt) -> Dict[str, float]:
    """Dict of metric name -> percent over the M plans (M, T); see the module docstring."""
    scores = per_sample_scores(pred, gt)
    if len(scores['success_rate']) == 0:
        raise ValueError('planning_metrics got no samples (M = 0); expected at least one plan')
    return {name: float(values.mean()) for name, values in scores.items()}


@checked_arguments
def miou_batch(pred, gt, batch_size: Count) -> float:
    """PDPP's batch-level mIoU in percent (their ``inference.py``, ``MIoU1``) of plans (M, T).

    The M samples, in the given order, are cut into consecutive batches of ``batch_size``
    (the last may be smaller); each batch scores |P & G| / |P | G| for the SETS P, G of all
    action ids it predicts / holds; batches are averaged weighted by their size (their
    ``AverageMeter``). ``batch_size=1`` is the per-sample set IoU (``miou_set``). A
    :func:`no_plan` row adds no action to its batch's P.
    """
    pred, gt = as_plans(pred, 'pred', allow_no_plan=True), as_plans(gt, 'gt')
    if pred.shape != gt.shape or len(pred) == 0:
        raise ValueError(f'pred {pred.shape} and gt {gt.shape}; expected equal (M, T), M > 0')
    total = 0.0
    for begin in range(0, len(pred), batch_size):
        batch = slice(begin, begin + batch_size)
        predicted = pred[batch].ravel()
        total += _set_iou(predicted[predicted != NO_PLAN], gt[batch].ravel()) * len(pred[batch])
    return 100.0 * total / len(pred)

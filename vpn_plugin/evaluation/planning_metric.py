"""``PlanningMetric``: the planning metrics of :mod:`vpn_plugin.core.metrics` as an mmengine metric.

Scores are computed per sample and averaged once over the whole (collected) dataset, so the
result does not depend on batch size, order or the number of processes.

Metric keys carry the prefix ``plan/`` (``plan/success_rate``, ...) so that loggers and
TensorBoard keep them apart from the training scalars; ``save_best`` names the prefixed key.

``out_file`` (optional) receives a JSON dump for the protocol tools::

    {"metrics": {name: percent},              # same as the returned dict (without prefix)
     "sample_idx": [int, ...],                # sorted dataset indices, one per sample
     "pred_plan": [[int] * T, ...], "gt_plan": [[int] * T, ...],
     "scores": {name: [percent per sample, ...]},   # aligned with sample_idx
     "no_plan": int}                          # windows without a plan (scored 0)

A window whose ``pred_plan`` is ``core.metrics.no_plan`` (every step ``NO_PLAN`` = -1: the
planner produced no usable plan) scores 0 on every metric; their number is logged.
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Literal, Optional, Sequence

from vpn_plugin.config_types import Count, Text, checked_arguments
import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmaction.registry import METRICS

from ..errors import write_text_atomically
from ..core.metrics import EXTRA_METRICS, miou_batch, no_plan_rows, per_sample_scores


def _plan_list(value, field: str, index: int) -> List[int]:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().tolist()
    array = np.asarray(value)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f'PlanningMetric: data sample {index} field {field!r} is {value!r}; '
                         'expected a (T,) integer plan')
    return array.tolist()


TIE_BREAK_SCALE = 1e-5  # see authors_selection_score


@METRICS.register_module()
class PlanningMetric(BaseMetric):
    """Success rate, mean accuracy, mIoU (set and legacy), first/last accuracy, in percent.

    Args:
        out_file: optional JSON path for the per-sample scores (see module docstring).
        authors_selection: also report ``authors_selection`` (:func:`authors_selection_score`),
            the key the authors' model-selection preset keeps the best checkpoint by.
        extra_metrics: named extras of ``core.metrics.EXTRA_METRICS`` to report as well:
            ``'miou_batch'`` (PDPP's batch-level mIoU over batches of ``miou_batch_size``
            consecutive samples in dataset order; reported with ``miou_batch_size``, since the
            value depends on it).
        collect_device, prefix: as in :class:`mmengine.evaluator.BaseMetric`
            (``prefix=None`` keeps :attr:`default_prefix`).
    """
    default_prefix = 'plan'

    @checked_arguments(prefix='PlanningMetric: ')
    def __init__(self, out_file: Optional[Text] = None, authors_selection: bool = False,
                 extra_metrics: Sequence[Literal[EXTRA_METRICS]] = (),
                 miou_batch_size: Optional[Count] = None,
                 collect_device: Literal['cpu', 'gpu'] = 'cpu',
                 prefix: Optional[Text] = None) -> None:
        _check_prefix(prefix)
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.out_file, self.authors_selection = _checked_out_file(out_file), authors_selection
        if 'miou_batch' in extra_metrics and miou_batch_size is None:
            raise ValueError("PlanningMetric: extra_metrics 'miou_batch' needs miou_batch_size "
                             '(its value depends on the evaluation batch size)')
        if miou_batch_size is not None and 'miou_batch' not in extra_metrics:  # was unread
            raise ValueError(f'PlanningMetric: miou_batch_size={miou_batch_size} without '
                             f"'miou_batch' in extra_metrics ({list(extra_metrics)}) computes "
                             "nothing; expected extra_metrics=['miou_batch'] with it, or no "
                             'miou_batch_size')
        self.extra_metrics, self.miou_batch_size = tuple(extra_metrics), miou_batch_size

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        """Stores (sample_idx, pred_plan, gt_plan) of each predicted data-sample dict."""
        for position, sample in enumerate(data_samples):
            if hasattr(sample, 'to_dict'):
                sample = sample.to_dict()
            missing = [k for k in ('pred_plan', 'gt_plan') if k not in sample]
            if missing:
                raise KeyError(f'PlanningMetric: data sample {position} lacks {missing}; '
                               f'it has {sorted(sample)}')
            index = sample.get('sample_idx', -1)
            index = int(index.item() if isinstance(index, torch.Tensor) else index)
            self.results.append(dict(
                sample_idx=index,
                pred_plan=_plan_list(sample['pred_plan'], 'pred_plan', position),
                gt_plan=_plan_list(sample['gt_plan'], 'gt_plan', position)))

    def compute_metrics(self, results: List[dict]) -> Dict[str, float]:
        """Mean of the per-sample scores over all collected results."""
        if not results:
            raise ValueError('PlanningMetric got no results to evaluate')
        if all(r['sample_idx'] >= 0 for r in results):  # dataset order, whatever the ranks'
            results = sorted(results, key=lambda r: (r['sample_idx'], r['gt_plan'],
                                                     r['pred_plan']))
        # samples without a sample_idx keep the order given: sorted by their plans, the
        # order-dependent miou_batch was computed over batches of another order
        horizons = {len(r['gt_plan']) for r in results} | {len(r['pred_plan']) for r in results}
        if len(horizons) != 1:
            raise ValueError(f'PlanningMetric got plans of lengths {sorted(horizons)}; expected '
                             'one horizon T per evaluation')
        pred = np.array([r['pred_plan'] for r in results], dtype=np.int64)
        gt = np.array([r['gt_plan'] for r in results], dtype=np.int64)
        scores = per_sample_scores(pred, gt)
        metrics = {name: float(values.mean()) for name, values in scores.items()}
        missing = int(no_plan_rows(pred).sum())
        if missing:
            from mmengine.logging import print_log
            print_log(f'PlanningMetric: {missing} of {len(pred)} windows have no plan (the '
                      'planner produced none): they score 0 on every metric', logger='current')
        if self.authors_selection:
            metrics['authors_selection'] = authors_selection_score(metrics)
        if 'miou_batch' in self.extra_metrics:
            metrics['miou_batch'] = miou_batch(pred, gt, self.miou_batch_size)
            metrics['miou_batch_size'] = float(self.miou_batch_size)
        if self.out_file:
            self._dump(results, pred, gt, scores, metrics, missing)
        return metrics

    def _dump(self, results, pred, gt, scores, metrics, missing: int) -> None:
        payload = dict(metrics=metrics, sample_idx=[r['sample_idx'] for r in results],
                       pred_plan=pred.tolist(), gt_plan=gt.tolist(),
                       scores={name: values.tolist() for name, values in scores.items()},
                       no_plan=missing)
        write_text_atomically(self.out_file, json.dumps(payload), 'per-sample scores')


def _check_prefix(prefix) -> None:
    """``prefix=1.5`` was taken as the key prefix '1.5/' (the kinds of the other options are
    the ``__init__`` annotations', checked by ``checked_arguments``)."""
    if prefix is not None and '/' in prefix:
        raise ValueError(f'PlanningMetric: prefix={prefix!r}; expected a name without "/" (the '
                         f'metric keys are <prefix>/success_rate, ...), or None for '
                         f'{PlanningMetric.default_prefix!r}')


def _checked_out_file(out_file: Optional[str]) -> Optional[str]:
    """``out_file`` may replace only an earlier per-sample dump (vpn_plugin/outputs.py):
    pointed at the checkpoint under test, a config or a window file, it is refused before
    anything runs, not found replaced after the test."""
    if out_file is None:
        return None
    if not isinstance(out_file, (str, os.PathLike)) or not str(out_file):
        # 0, '', [] or {} read as "no file" wrote no per-sample file without a word
        raise ValueError(f'PlanningMetric out_file={out_file!r}: expected a file name ending in '
                         '.json, or None for no per-sample file')
    from ..outputs import check_output
    return str(check_output(out_file, 'per_sample', 'PlanningMetric out_file',
                            exists_advice='give the evaluator another out_file'))


def authors_selection_score(metrics: Dict[str, float]) -> float:
    """The authors' checkpoint order as one number for ``save_best``: the success rate, ties
    broken by (mAcc + mIoU (legacy)) / 2 (their ``main.py``). The tie term is at most 1e-3,
    below one window's share of the SR (100 / windows) for test sets under 100,000 windows."""
    tie = (metrics['mean_accuracy'] + metrics['miou_legacy']) / 2
    return metrics['success_rate'] + TIE_BREAK_SCALE * tie

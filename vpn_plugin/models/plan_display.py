"""Predicted plans printed with action names next to the ground truth (predictions come
from ``vpn_plugin.apis.inference_planner``)."""
from typing import List

from ..core.metrics import NO_PLAN


def format_plan(sample, taxonomy, width: int = 32) -> List[str]:
    """Lines: task, then one row per step with predicted and true action names."""
    pred = [int(a) for a in sample.pred_plan]
    truth = [int(a) for a in sample.gt_plan]
    names = list(taxonomy.action_names)
    if all(p == NO_PLAN for p in pred):
        pred, names = [len(names)] * len(truth), names + ['(no plan)']
    task = taxonomy.task_names[int(sample.gt_task)]
    verdict = 'success' if pred == truth else f'{sum(p == t for p, t in zip(pred, truth))}/' \
                                              f'{len(truth)} steps right'
    lines = [f'sample {int(sample.sample_idx)} | task: {task} | {verdict}',
             f'  {"step":<5}{"predicted":<{width}}   {"ground truth"}']
    for step, (p, t) in enumerate(zip(pred, truth), 1):
        mark = '=' if p == t else 'x'
        lines.append(f'  {step:<5}{names[p][:width - 1]:<{width}} {mark} {names[t]}')
    return lines

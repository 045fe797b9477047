"""Predicted plans printed with action names: next to the ground truth for dataset samples
(predictions from ``vpn_plugin.apis.inference_planner``), or with where their task comes from
for a video of your own (``apis.video.format_video_plan``)."""
from typing import List, Optional

from ..core.metrics import NO_PLAN


def format_plan(sample, taxonomy, width: int = 32) -> List[str]:
    """Lines: the sample's true task (its annotation, not a prediction) and the planner's own
    task when it predicts one, then one row per step with predicted and true action names,
    and a warning when the plan leaves the true task."""
    pred = [int(a) for a in sample.pred_plan]
    truth = [int(a) for a in sample.gt_plan]
    names = list(taxonomy.action_names)
    if all(p == NO_PLAN for p in pred):
        pred, names = [len(names)] * len(truth), names + ['(no plan)']
    task = taxonomy.task_names[int(sample.gt_task)]
    verdict = 'success' if pred == truth else f'{sum(p == t for p, t in zip(pred, truth))}/' \
                                              f'{len(truth)} steps right'
    lines = [f'sample {int(sample.sample_idx)} | true task (annotation): {task} | {verdict}']
    if 'pred_task' in sample:
        lines.append(f'  the planner\'s task: {taxonomy.task_names[int(sample.pred_task)]} '
                     f'({task_origin(sample.metainfo, sample.get("pred_task_score"))})')
    lines.append(f'  {"step":<5}{"predicted":<{width}}   {"ground truth"}')
    for step, (p, t) in enumerate(zip(pred, truth), 1):
        mark = '=' if p == t else 'x'
        lines.append(f'  {step:<5}{names[p][:width - 1]:<{width}} {mark} {names[t]}')
    return lines + outside_task_lines(sample.pred_plan, taxonomy, int(sample.gt_task))


def task_lines(sample, taxonomy) -> List[str]:
    """The task of a plan without ground truth and where it comes from: the task given with
    the video (``given_task``), the planner's classifier (with its probability or score, and
    whether the plan depends on it) or the true task; or that there is none."""
    info = sample.metainfo
    predicted = None
    if 'pred_task' in sample:
        predicted = (f'{taxonomy.task_names[int(sample.pred_task)]} '
                     f'({task_origin(info, sample.get("pred_task_score"))})')
    if 'given_task' in sample:
        lines = [f'task: {taxonomy.task_names[int(sample.given_task)]} (given)']
        if predicted and info.get('task_source') == 'classifier':
            lines.append(f'the planner\'s own task: {predicted}')
        return lines
    if predicted:
        return [f'task: {predicted}']
    return ['task: none (this planner predicts no task; tools/plan.py --task NAME names the '
            'task the video shows and checks the plan against it)']


def task_origin(info: dict, score=None) -> str:
    """Where a predicted task comes from, as ``BasePlanner.task_metainfo`` records it."""
    source = info.get('task_source')
    if source == 'given':
        return 'given'
    if source == 'ground_truth':
        return 'ground truth'
    if source != 'classifier':
        return 'source not recorded'
    words = ('predicted by the task classifier' if info.get('task_score') == 'probability'
             else 'predicted by the task head')
    if score is not None:
        kind = 'probability' if info.get('task_score') == 'probability' else 'score'
        words += f', {kind} {float(score):.2f}'
    if info.get('plan_uses_task') is False:
        words += '; the plan does not depend on it'
    elif info.get('plan_uses_task'):
        words += '; the plan is conditioned on it'
    return words


def plan_task(sample) -> Optional[int]:
    """The task a plan is checked against: the given one, else the planner's."""
    for name in ('given_task', 'pred_task', 'gt_task'):
        if name in sample:
            return int(sample.get(name))
    return None


def steps_outside_task(plan, taxonomy, task: int) -> List[int]:
    """Steps (1-based) of ``plan`` (T,) whose actions are not actions of ``task`` (no-plan
    steps aside)."""
    actions = set(taxonomy.task_actions[task])
    return [step for step, action in enumerate((int(a) for a in plan), 1)
            if action != NO_PLAN and action not in actions]


def outside_task_lines(plan, taxonomy, task: Optional[int]) -> List[str]:
    """A warning naming the steps of ``plan`` outside ``task``'s actions (none: no lines)."""
    if task is None:
        return []
    outside = steps_outside_task(plan, taxonomy, task)
    if not outside:
        return []
    return [f'WARNING: step(s) {", ".join(map(str, outside))} of {len(plan)} are actions of '
            f'other tasks than {taxonomy.task_names[task]}: the plan and its task disagree']

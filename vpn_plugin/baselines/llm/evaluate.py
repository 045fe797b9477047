"""Running a prompted planner over a set of windows: queries, concurrency, counts, metrics."""
from __future__ import annotations

import json
import math
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import numpy as np

from ...config_types import Count, NonNegativeInt, PathLike, Positive, checked_arguments
from ...core.stats import stratified_sample  # noqa: F401  (the one window sampler)
from ...errors import write_text_atomically
from ...outputs import money_text
from .anchors import ORACLE
from .frames import VIDEO_SUFFIXES, find_video_source, read_clip_frames
from .planner import STATUSES, PlanOutcome, PromptPlanner
from .prompting import PlanningQuery


def build_queries(plans, tasks, *, anchors=ORACLE, indices=None,
                  action_task=None, keys=None) -> list[PlanningQuery]:
    """Queries for the windows ``indices`` (default: all) of ``plans`` (M, T) and ``tasks``
    (M,), e.g. from :func:`stratified_sample`; ``anchors``, ``action_task`` and ``keys`` (M,)
    (the windows' ``window_keys()``) as in :func:`make_query`."""
    plans, tasks = np.asarray(plans, dtype=np.int64), np.asarray(tasks, dtype=np.int64)
    if isinstance(anchors, str) and anchors != ORACLE:
        raise ValueError(f"anchors {anchors!r}: expected 'oracle' or (first, last) arrays")
    indices = range(len(plans)) if indices is None else [int(i) for i in indices]
    return [make_query(i, plans[i].tolist(), int(tasks[i]), anchors, action_task,
                       None if keys is None else int(keys[i])) for i in indices]


@checked_arguments
def make_query(index: NonNegativeInt, plan: list, task: NonNegativeInt, anchors=ORACLE,
               action_task=None, key: Optional[NonNegativeInt] = None) -> PlanningQuery:
    """The query of window ``index`` (ground-truth ``plan`` (T,) and ``task``); ``key``: the
    window's identity (``datasets.annotations.window_key``) its examples are drawn by.

    ``anchors`` = 'oracle' (ground-truth first and last actions), a ``(first (M,), last (M,))``
    pair from a step model indexed by window, or None (VLM mode: the planner identifies them
    from the clips). With step-model anchors and ``action_task`` (the taxonomy's task of each
    action), the prompt's task is the task of the predicted first action, not the ground truth.
    """
    first = last = None
    if isinstance(anchors, str):
        first, last = int(plan[0]), int(plan[-1])
    elif anchors is not None:
        if index >= len(anchors[0]):
            raise IndexError(f'step-model predictions hold {len(anchors[0])} windows; the test '
                             f'set has sample index {index}')
        first, last = int(anchors[0][index]), int(anchors[1][index])
        if action_task is not None:
            task = int(action_task[first])
    return PlanningQuery(index=int(index), task=int(task), horizon=len(plan),
                         gt_plan=[int(a) for a in plan], first=first, last=last,
                         key=None if key is None else int(key))


@checked_arguments
def attach_frames(queries, windows, video_root: PathLike, *, num_frames: Count = 4,
                  folder_fps: Positive = 1.0) -> None:
    """Fill start/goal frames from the first and last step segments of each window.

    ``windows[i]`` needs ``vid``, ``feature`` (file stem) and ``times`` ((start, end) per step);
    the video is ``<video_root>/<vid or stem>.<ext>`` or a frames folder of that name (the
    folder when both are there). Returns what was read (the row's ``settings.video_sources``):
    ``{'frames_folders': n, 'video_files': m}``, with ``frames_folders_beside_a_video`` (the
    folders that have a video file of their name beside them, read at ``folder_fps``: said).
    """
    sources = set()
    for query in queries:
        window = windows[query.index]
        source = _window_video(video_root, window)
        sources.add(source)
        (s0, e0), (s1, e1) = window.times[0], window.times[-1]
        query.start_frames = read_clip_frames(source, s0, e0, num_frames, folder_fps=folder_fps)
        query.goal_frames = read_clip_frames(source, s1, e1, num_frames, folder_fps=folder_fps)
    folders = sorted(source for source in sources if source.is_dir())
    beside = [folder for folder in folders if any(
        (folder.parent / f'{folder.name}{suffix}').is_file() for suffix in VIDEO_SUFFIXES)]
    record = {'frames_folders': len(folders), 'video_files': len(sources) - len(folders)}
    if beside:
        record['frames_folders_beside_a_video'] = len(beside)
        print(f'note: {len(beside)} frames folder(s) have a video file of their name beside '
              f'them (e.g. {beside[0]}/ and {beside[0].name}.<ext>): the folders were read, at '
              f'{folder_fps:g} frames per second (--frames-fps), not the video files',
              file=sys.stderr)
    return record


def _window_video(video_root, window):
    try:
        return find_video_source(video_root, window.vid)
    except FileNotFoundError as by_vid:
        try:
            return find_video_source(video_root, window.feature)
        except FileNotFoundError as by_stem:
            raise FileNotFoundError(f'{by_vid}; {by_stem}') from None


@checked_arguments
def run_planner(planner: PromptPlanner, queries, *, concurrency: Count = 4,
                progress: bool = True) -> list[PlanOutcome]:
    """Outcomes in query order; ``concurrency`` requests in flight; tqdm bar on stderr."""
    from tqdm import tqdm
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = pool.map(planner.plan, queries)
        bar = tqdm(results, total=len(queries), desc='planning', unit='window',
                   disable=not progress, file=sys.stderr)
        return list(bar)


def summarize(queries, outcomes: list[PlanOutcome], per_sample_file=None) -> dict:
    """Metrics (percent) through ``PlanningMetric``, as ``tools/test.py`` computes them,
    counts of reply statuses and of request failures by kind; ``per_sample_file`` receives
    PlanningMetric's per-sample dump."""
    from vpn_plugin.evaluation import PlanningMetric
    if not outcomes:
        raise ValueError('no windows were planned (empty test set or --limit 0)')
    metric = PlanningMetric(out_file=None if per_sample_file is None else str(per_sample_file))
    metric.process(None, [dict(pred_plan=o.plan, gt_plan=q.gt_plan, sample_idx=q.index)
                          for q, o in zip(queries, outcomes)])
    counts = {status: 0 for status in STATUSES}
    for outcome in outcomes:
        counts[outcome.status] += 1
    return {'metrics': metric.compute_metrics(metric.results), 'counts': counts,
            'failures': failure_counts(outcomes), 'num_windows': len(outcomes)}


def failure_counts(outcomes: list[PlanOutcome]) -> dict:
    """{failure kind: windows whose request failed after the retries}, e.g. {'connection': 30}."""
    return {kind: count for kind, count, _ in failure_causes(outcomes)}


def failure_causes(outcomes: list[PlanOutcome]) -> list:
    """``(kind, windows, first cause)`` of each kind of request failure, kinds sorted."""
    causes: dict = {}
    for outcome in outcomes:
        if outcome.status == 'request_failed':
            count, example = causes.get(outcome.failure, (0, outcome.detail))
            causes[outcome.failure] = (count + 1, example)
    return [(kind, count, example) for kind, (count, example) in sorted(causes.items())]


def token_summary(usage: dict) -> str:
    return (f"requests sent {usage['requests']} (retries {usage['retries']}, failed "
            f"{usage['failed']}), cache hits {usage['cache_hits']}; tokens paid: prompt "
            f"{usage['prompt_tokens']}, completion {usage['completion_tokens']}; from cache: "
            f"prompt {usage['cached_prompt_tokens']}, completion "
            f"{usage['cached_completion_tokens']}"
            + (f"; {usage['replies_without_usage']} replies reported no token usage or only "
               'part of it: a missing count is counted 0, their cost is unknown'
               if usage.get('replies_without_usage') else '')
            + (f"; {usage['cache_discarded']} cached replies were damaged, edited or not their "
               'request\'s (each named above): discarded and asked again'
               if usage.get('cache_discarded') else '')
            + (f"; {sum(usage['replies_from_other_models'].values())} replies name another "
               f"model than the one asked: {usage['replies_from_other_models']}"
               if usage.get('replies_from_other_models') else ''))


def usage_record(usage: dict, price_per_1k=None) -> dict:
    """The results row's ``usage``: the backend's counts and two totals kept apart,

    * ``total_tokens``: prompt + completion tokens of the answers the run USED (cached
      replies included: what the result consumes), and with ``price_per_1k`` ([prompt,
      completion] or one price for both, per 1000 tokens) ``cost_of_answers`` (left out, as
      ``cost_paid``, when some reply reported no token usage: its cost is unknown);
    * ``paid_tokens``: the tokens of the requests sent IN THIS RUN (0 for a rerun served from
      the cache), and with a price ``cost_paid``.
    """
    record = dict(usage)
    prompt = usage['prompt_tokens'] + usage['cached_prompt_tokens']
    completion = usage['completion_tokens'] + usage['cached_completion_tokens']
    record['total_tokens'] = prompt + completion
    record['paid_tokens'] = usage['prompt_tokens'] + usage['completion_tokens']
    if price_per_1k:
        prices = [float(p) for p in price_per_1k]
        prompt_price, completion_price = prices if len(prices) == 2 else prices * 2
        record['price_per_1k'] = [prompt_price, completion_price]

        def cost(prompt_tokens, completion_tokens):
            value = (prompt_tokens * prompt_price + completion_tokens * completion_price) / 1000
            if not math.isfinite(value):  # a row would record a cost of inf (JSON Infinity)
                raise ValueError(f'--price-per-1k {prices}: the cost of {prompt_tokens} prompt '
                                 f'and {completion_tokens} completion tokens overflows a float '
                                 '(inf); expected a price per 1000 tokens (e.g. 0.15); no '
                                 'row was written: rerun with the price, the replies are '
                                 'served from the cache (only cut-off replies are asked again)')
            return float(f'{value:.10g}')  # no float noise (0.30000000000000004)
        if usage.get('replies_without_usage'):  # their tokens counted 0: the cost is unknown
            return record  # (a cost of 0.00 would be written for paid requests)
        record['cost_of_answers'] = cost(prompt, completion)
        record['cost_paid'] = cost(usage['prompt_tokens'], usage['completion_tokens'])
    return record


def cost_summary(record: dict) -> str:
    """'cost paid in this run 0.00; cost of the answers used 11.56' of a priced
    :func:`usage_record` ('' unpriced)."""
    if 'price_per_1k' in record and 'cost_paid' not in record:
        return (f"cost unknown: {record['replies_without_usage']} replies reported no token "
                'usage or only part of it (no cost is recorded)')
    if 'cost_paid' not in record:
        return ''
    return (f"cost paid in this run {money_text(record['cost_paid'])}; cost of the answers "
            f"used {money_text(record['cost_of_answers'])} (at {record['price_per_1k']} per 1k "
            'prompt, completion tokens)')


@checked_arguments
def write_outcomes(path: PathLike, queries, outcomes: list[PlanOutcome], setting: dict) -> None:
    """Per-window JSON Lines: plan, ground truth, status; the first line is the setting."""
    lines = [json.dumps({'setting': setting})]
    for query, outcome in zip(queries, outcomes):
        lines.append(json.dumps({'index': query.index, 'task': query.task,
                                 'gt_plan': query.gt_plan, 'pred_plan': outcome.plan,
                                 'first': outcome.first, 'last': outcome.last,
                                 'status': outcome.status, 'detail': outcome.detail,
                                 'failure': outcome.failure}))
    write_text_atomically(path, ''.join(line + '\n' for line in lines), 'LLM outcomes')

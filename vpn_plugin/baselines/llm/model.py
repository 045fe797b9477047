"""``LLMPlanner`` in MMAction2's MODELS: the one LLM/VLM pipeline. ``tools/test.py`` evaluates
it with the same dataloader and ``PlanningMetric`` as ViterbiPlanNet; ``tools/llm_eval.py`` is
a command line over the same model (queries of chosen windows, VLM frames, results rows)."""
from __future__ import annotations

from collections import Counter
from typing import Dict, Literal, Optional

from vpn_plugin.config_types import Count, NonNegativeInt, Text, checked_arguments
import torch
from mmengine.logging import print_log

from mmaction.registry import MODELS

from ...models.base_planner import BasePlanner
from .anchors import ORACLE, load_anchor_predictions
from .backends import build_backend
from .evaluate import failure_causes, make_query, run_planner, token_summary
from .planner import STATUSES, PromptPlanner
from .prompting import EXAMPLE_DRAW, PROMPT_SETS, PromptBuilder
from .windows import annotation_windows


@MODELS.register_module()
class LLMPlanner(BasePlanner):
    """Completes each plan from its first and last actions with a chat model (LLM mode), or
    from the start/goal clips (``vlm=True``, through ``tools/llm_eval.py --vlm``).

    Args:
        backend: ``dict(type='openai', base_url=..., model=..., api_key_env=..., cache_dir=...)``
            or ``dict(type='transformers', model=...)`` (see ``backends.build_backend``).
        train_dataset: config of the training PlanningDataset (examples, PKG, taxonomy); only
            its annotations are read, no feature file.
        anchors: ``'oracle'`` (ground-truth first/last actions, an upper bound) or the path
            of a step-model predictions file (``tools/llm_eval.py --save-anchors``), indexed
            by the test sample index.
        with_pkg: put the PKG (edges with probabilities) in the prompt; the PKG is counted on
            the training windows by ``pkg`` (``BasePlanner``) when the model is built.
        num_examples, scope, seed, templates, prompt_set: see ``PromptBuilder``
            (``prompt_set='paper'``: the paper's printed prompts, prompts/paper/).
        concurrency: requests in flight per batch.
        allow_failures: score a request that failed after the retries as a wrong plan; by
            default such a batch raises ``RuntimeError`` naming the causes (no metrics).
        vlm: identify the first/last actions from the clips (needs the queries' frames).
    """

    follows_data_horizon = True

    @checked_arguments(prefix='model.')
    def __init__(self, backend: dict, train_dataset: dict, anchors: Text = ORACLE,
                 with_pkg: bool = False, num_examples: NonNegativeInt = 5,
                 scope: Literal['task', 'dataset'] = 'task', seed: NonNegativeInt = 0,
                 templates: Optional[Dict[str, Text]] = None, concurrency: Count = 4,
                 allow_failures: bool = False, vlm: bool = False, pkg: Optional[dict] = None,
                 prompt_set: Literal[tuple(PROMPT_SETS)] = 'ours',
                 data_preprocessor: Optional[dict] = None):
        train = annotation_windows(train_dataset)
        super().__init__(train.taxonomy.num_actions, train.horizon, pkg, data_preprocessor)
        graph = self.build_pkg(train)
        prompts = PromptBuilder(train.taxonomy, train.plans, train.tasks, pkg=graph,
                                with_pkg=with_pkg, num_examples=num_examples, scope=scope,
                                seed=seed, templates=templates, prompt_set=prompt_set,
                                train_keys=train.window_keys())
        self.planner = PromptPlanner(build_backend(backend), prompts, vlm=vlm)
        self.anchors = anchors if anchors == ORACLE else load_anchor_predictions(
            anchors, None, train.taxonomy.num_actions)
        self.concurrency, self.allow_failures = concurrency, allow_failures
        self.status_counts = Counter()

    @property
    def usage(self) -> dict:
        """Requests, retries and tokens so far (``backends.UsageCounter``)."""
        return self.planner.backend.usage.counts

    def plan_queries(self, queries, progress: bool = False) -> list:
        """``PlanOutcome`` of each ``PlanningQuery``, in order; counts the statuses and, unless
        ``allow_failures``, raises on requests that failed after the retries."""
        outcomes = run_planner(self.planner, queries, concurrency=self.concurrency,
                               progress=progress)
        self.status_counts.update(o.status for o in outcomes)
        causes = failure_causes(outcomes)
        if causes and not self.allow_failures:
            described = '; '.join(f'{kind} x{count}, e.g. {example}'
                                  for kind, count, example in causes)
            raise RuntimeError(f'LLMPlanner: {sum(c[1] for c in causes)} request(s) of this '
                               f'batch failed after the retries ({described}); no metrics are '
                               'computed from unanswered requests: fix the endpoint and rerun '
                               '(answered ones are cached), or set model.allow_failures=True')
        return outcomes

    def tensor(self, inputs, horizon: int, data_samples=None):
        raise ValueError("LLMPlanner answers in text: evaluate it with mode='predict' "
                         '(tools/test.py or tools/llm_eval.py)')

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        if not data_samples or not {'plan', 'task', 'index', 'window_key'} <= set(data_samples):
            raise ValueError('LLMPlanner needs data_samples with plan, task, index and '
                             'window_key (the PlanningDataset batch; the examples are drawn '
                             f'by window_key); got {sorted(data_samples or {})}')
        if self.planner.vlm:
            raise ValueError('LLMPlanner(vlm=True) needs the clips of each window: run it '
                             'through tools/llm_eval.py --vlm --video-root ...')
        outcomes = self.plan_queries(self._queries(data_samples))
        print_log('LLMPlanner replies so far: ' + ', '.join(
            f'{status} {self.status_counts[status]}' for status in STATUSES) + '; '
            + token_summary(self.usage), logger='current')
        return dict(pred_plan=torch.tensor([o.plan for o in outcomes], dtype=torch.long),
                    metainfo=[{'llm_status': o.status, 'example_draw': EXAMPLE_DRAW}
                              for o in outcomes])

    def _queries(self, data_samples) -> list:
        action_task = self.planner.prompts.taxonomy.action_task
        return [make_query(index, plan, task, self.anchors, action_task, key)
                for plan, task, index, key in zip(data_samples['plan'].tolist(),
                                                  data_samples['task'].tolist(),
                                                  data_samples['index'].tolist(),
                                                  data_samples['window_key'].tolist())]

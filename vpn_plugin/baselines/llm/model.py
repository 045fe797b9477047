"""``LLMPlanner`` in MMAction2's MODELS: a prompted planner that ``tools/test.py`` can evaluate
with the same dataloader and ``PlanningMetric`` as ViterbiPlanNet."""
from __future__ import annotations

from collections import Counter
from typing import Optional

import torch
from mmengine.logging import print_log
from mmengine.model import BaseModel

from mmaction.registry import DATASETS, MODELS
from mmaction.structures import ActionDataSample

from .anchors import ORACLE, load_anchor_predictions
from .backends import build_backend
from .evaluate import failure_counts, run_planner, token_summary
from .factory import prompt_builder_from_dataset
from .planner import STATUSES, PromptPlanner
from .prompting import PlanningQuery


@MODELS.register_module()
class LLMPlanner(BaseModel):
    """Completes each plan from its first and last actions with a chat model (LLM mode).

    Args:
        backend: ``dict(type='openai', base_url=..., model=..., api_key_env=..., cache_dir=...)``
            or ``dict(type='transformers', model=...)`` (see ``backends.build_backend``).
        train_dataset: config of the training PlanningDataset (examples, PKG, taxonomy).
        anchors: ``'oracle'`` (ground-truth first/last actions, an upper bound) or the path
            of a step-model predictions file (``tools/llm_eval.py --save-anchors``), indexed
            by the test sample index.
        with_pkg: put the PKG (edges with probabilities) in the prompt.
        num_examples, scope, seed, templates: see ``PromptBuilder``.
        concurrency: requests in flight per batch.
        allow_failures: score a request that failed after the retries as a wrong plan; by
            default such a batch raises ``RuntimeError`` naming the causes (no metrics).
    VLM mode needs the clips of each window: use ``tools/llm_eval.py --vlm``.
    """

    def __init__(self, backend: dict, train_dataset: dict, anchors: str = ORACLE,
                 with_pkg: bool = False, num_examples: int = 5, scope: str = 'task',
                 seed: int = 0, pkg_count_mode: str = 'window', templates: Optional[dict] = None,
                 concurrency: int = 4, allow_failures: bool = False,
                 data_preprocessor: Optional[dict] = None):
        super().__init__(data_preprocessor=data_preprocessor)
        train = DATASETS.build(train_dataset)
        prompts = prompt_builder_from_dataset(
            train, with_pkg=with_pkg, pkg_count_mode=pkg_count_mode, num_examples=num_examples,
            scope=scope, seed=seed, templates=templates)
        self.planner = PromptPlanner(build_backend(backend), prompts)
        self.anchors = anchors if anchors == ORACLE else load_anchor_predictions(anchors, None)
        self.concurrency, self.allow_failures = concurrency, allow_failures
        self.status_counts = Counter()

    def forward(self, inputs, data_samples=None, mode: str = 'predict'):
        if mode != 'predict':
            raise ValueError(f"LLMPlanner has no trainable parameters (mode={mode!r}); evaluate "
                             "it with mode='predict' (tools/test.py or tools/llm_eval.py)")
        if not data_samples or not {'plan', 'task', 'index'} <= set(data_samples):
            raise ValueError('LLMPlanner needs data_samples with plan, task and index '
                             '(the PlanningDataset batch)')
        outcomes = run_planner(self.planner, self._queries(data_samples),
                               concurrency=self.concurrency, progress=False)
        self.status_counts.update(o.status for o in outcomes)
        self._check_failures(outcomes)
        print_log('LLMPlanner replies so far: ' + ', '.join(
            f'{status} {self.status_counts[status]}' for status in STATUSES) + '; '
            + token_summary(self.planner.backend.usage.counts), logger='current')
        return [self._pack(outcome, data_samples, i) for i, outcome in enumerate(outcomes)]

    def _check_failures(self, outcomes) -> None:
        failures = failure_counts(outcomes)
        if failures and not self.allow_failures:
            causes = '; '.join(f'{kind} x{count}, e.g. '
                               + next(o.detail for o in outcomes if o.failure == kind)
                               for kind, count in failures.items())
            raise RuntimeError(f'LLMPlanner: {sum(failures.values())} request(s) of this batch '
                               f'failed after the retries ({causes}); no metrics are computed '
                               'from unanswered requests: fix the endpoint and rerun (answered '
                               'ones are cached), or set model.allow_failures=True')

    def _query(self, plan: list, task: int, index: int) -> PlanningQuery:
        """Oracle: ground-truth first/last and task; step model: its predictions and the task
        of its first action (as tools/llm_eval.py)."""
        if self.anchors == ORACLE:
            first, last = plan[0], plan[-1]
        else:
            predicted_first, predicted_last = self.anchors
            if index >= len(predicted_first):
                raise IndexError(f'step-model predictions hold {len(predicted_first)} windows; '
                                 f'the test set has sample index {index}')
            first, last = int(predicted_first[index]), int(predicted_last[index])
            task = self.planner.prompts.taxonomy.action_task[first]
        return PlanningQuery(index=index, task=task, horizon=len(plan), gt_plan=plan,
                             first=first, last=last)

    def _queries(self, data_samples) -> list:
        return [self._query(plan, task, index)
                for plan, task, index in zip(data_samples['plan'].tolist(),
                                             data_samples['task'].tolist(),
                                             data_samples['index'].tolist())]

    @staticmethod
    def _pack(outcome, data_samples, i: int) -> ActionDataSample:
        sample = ActionDataSample()
        sample.pred_plan = torch.tensor(outcome.plan, dtype=torch.long)
        sample.gt_plan = data_samples['plan'][i]
        sample.gt_task = data_samples['task'][i]
        sample.sample_idx = data_samples['index'][i]
        sample.set_metainfo({'llm_status': outcome.status})
        return sample

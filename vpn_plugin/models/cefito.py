"""CEFITO (Afham et al., "Contrastive Energy Fields for Inference-Time Procedure Planning in
Instructional Videos", GCPR 2026; github visinf/cefito, commit 0bfaac4) as a planner.

* ``field`` (``core.energy_field.EnergyField``): the causal predictor over
  ``[x_s, a_1, m, ..., a_T, m]`` whose predicted goal's squared distance to LN(x_g) is the
  energy of a sequence; trained with the adaptive-margin triplet loss over N negatives plus
  the auxiliary action classification (``core.energy_field.field_loss``).
* ``classifier`` (``models.pdpp.TaskClassifier``: PDPP's head): trained FIRST, alone
  (``TaskClassifierHook``), then frozen; its prediction c restricts the search to A(c)
  (``task_source='ground_truth'``: the true task, the official NIV configs' ``oracle_task``).
* planning: every sequence of A(c)^T is scored (``core.energy_search``; ``search='tree'``, the
  prefix tree, default; ``'chunked'``, the official full-sequence scoring), lowest energy wins;
  ``top_k`` plans with their energies in the results (``topk_plans``, ``topk_energies``).

Options that reproduce the official code where it differs (docs/cefito.md): ``negative_rng=
'global'`` (Python's global ``random`` stream instead of per-sample generators),
``tie_break='topk'`` (torch.topk's order among exactly tied energies, which depends on the
chunk size, instead of sequence order).

Parameters (E 1536, H 384): 8,523,013 at CrossTask (N=133), 8,771,338 COIN (N=778), 8,490,288
NIV (N=48); the task classifier (7,094,290 / 7,177,396 / 7,087,621) is ``counted_apart``.
Shapes: B batch, T horizon, E observation dim, N actions, K tasks.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Dict, Literal, Optional, Union

from vpn_plugin.config_types import (Count, NonNegative, NonNegativeInt, Positive, Probability,
                                     Range, Text, check_options, checked_arguments)
import torch
from mmengine.logging import print_log

from mmaction.registry import MODELS

from ..core import energy_field, energy_search, negatives
from ..datasets import Taxonomy
from ..errors import check_numbers
from ..progress import StepProgress
from .base_planner import (ActionCount, BasePlanner, Horizon, check_loss_terms, num_parameters,
                           task_fields)
from .pdpp import TaskClassifier, warn_unread_pkg
from .temporal_unet import MAX_FEATURE_DIM
from .text_embeddings import NO_TEXT, load_action_features, stand_in_label

NEGATIVE_RNGS = ('per_sample', 'global')
SEARCHES = ('tree', 'chunked')
# a batch's search longer than this logs its progress and ETA, then at most this often
SEARCH_PROGRESS_SECONDS = 30.0
TASK_SOURCES = ('classifier', 'ground_truth')
LOSS_TERMS = ('loss_contrastive', 'loss_auxiliary')
GIVEN = 'given as a tensor (action_embeddings)'
# prefix-tree token evaluations per second of the full-size field on the 2-core CPU, 2 threads,
# shared (tools/benchmark_cefito_search.py, CrossTask T=4: 1,182/s); only used to say how long a
# refused search would take
DEFAULT_TOKENS_PER_SECOND = 1_200.0
MAX_MLP_RATIO = 64  # the feed-forward width is hidden_dim x mlp_ratio (official: 4)
# negatives scored per sample (official: 50) and plans kept per sample (official: 1): 10**9 of
# either built and then failed allocating, or searched for hours
MAX_NEGATIVES, MAX_TOP_K = 10_000, 10_000


def task_action_lists(taxonomy) -> Dict[int, tuple]:
    """{task: A(task) in taxonomy order} of a ``datasets.Taxonomy`` (or a path to one)."""
    if isinstance(taxonomy, (str, bytes)) or hasattr(taxonomy, '__fspath__'):
        from ..datasets import load_taxonomy
        taxonomy = load_taxonomy(taxonomy)
    return {task: tuple(actions) for task, actions in enumerate(taxonomy.task_actions)}


def check_text_config(text_embeddings) -> None:
    """``model.text_embeddings`` is None (no text features: zeros, marked) or a non-empty
    ``load_action_features`` dict; 0, [] or {} would be read as None by truth value."""
    from collections.abc import Mapping
    if text_embeddings is None:
        return
    if isinstance(text_embeddings, Mapping) and text_embeddings:
        # each option held to load_action_features' kinds (encoder=5 labelled rows "of 5")
        check_options('model.text_embeddings', load_action_features, text_embeddings)
        return
    raise ValueError(f'model.text_embeddings={text_embeddings!r}; expected a dict of '
                     'load_action_features options (e.g. taxonomy=..., encoder=None, '
                     'pooling=...) or None (no text features: all-zero, marked)')


@MODELS.register_module()
class CEFITO(BasePlanner):
    """CEFITO (module docstring).

    Args:
        feature_dim: E (3 x 512 S3D frames). num_actions: N. num_tasks: K. horizon: T.
        taxonomy: the taxonomy file (A(c) of every task, in file order) or a
            ``{task: [action ids]}`` dict.
        text_embeddings: ``load_action_features`` config ((N, text_dim) action-name features;
            the CLIP ViT-B/32 text features, or the MiniLM stand-in, labelled as such).
        text_dim: D of the action features (512).
        hidden_dim, depth, num_heads, mlp_ratio, causal: the predictor.
        num_negatives, hard_negative_ratio, permutation_negative_ratio: the sampler.
        min_margin, max_margin, margin_order_weight, aux_weight: the loss.
        observation_noise: x += noise * std(x over the batch) * N(0, 1) on the raw start and
            goal while training (official crosstask_t3: 0.30).
        negative_rng: 'per_sample' (a generator per (seed, step, window index)) or 'global'.
        negative_seed: seed of the per-sample generators.
        search: 'tree' | 'chunked'. chunk_size: rows per predictor call. top_k: plans kept.
        tie_break: 'sequence' | 'topk'. task_source: 'classifier' | 'ground_truth'.
        max_sequences: refuse, when built and before any search, a horizon at which the largest
            A(c) of the taxonomy gives more sequences per sample than this (None: no limit),
            saying how many and how long one sample would take at ``tokens_per_second``.
    """

    counted_apart = ('classifier',)
    training_hooks = ('TaskClassifierHook',)  # its first stage (runner.check_training_hooks)
    # the search plans within the actions of the task: the classifier's (cross-entropy, its
    # own stage) or the true one (``task_source``, set per model)
    task_score, plan_uses_task = 'probability', True

    text_feature_buffers = ('field.predictor.action_embeddings',)
    text_loader = 'load_action_features'
    default_loss_weights = dict.fromkeys(LOSS_TERMS, 1.0)

    @checked_arguments(prefix='model.')
    def __init__(self, feature_dim: Annotated[int, Range(1, MAX_FEATURE_DIM)],
                 num_actions: ActionCount, num_tasks: ActionCount, horizon: Horizon,
                 taxonomy: Union[Text, os.PathLike, dict, Taxonomy],
                 text_embeddings: Optional[dict] = None,
                 text_dim: Annotated[int, Range(1, MAX_FEATURE_DIM)] = 512,
                 hidden_dim: Annotated[int, Range(1, 4096)] = 384,
                 depth: Annotated[int, Range(1, 64)] = 4, num_heads: Count = 6,
                 mlp_ratio: Annotated[float, Range(0, MAX_MLP_RATIO, low_open=True)] = 4.0,
                 causal: bool = True, num_negatives: Annotated[int, Range(1, MAX_NEGATIVES)] = 50,
                 hard_negative_ratio: Probability = 0.8,
                 permutation_negative_ratio: Probability = 0.0, min_margin: NonNegative = 0.01,
                 max_margin: NonNegative = 0.1, margin_order_weight: NonNegative = 0.0,
                 aux_weight: NonNegative = 1.0, observation_noise: NonNegative = 0.0,
                 negative_rng: Literal[NEGATIVE_RNGS] = 'per_sample',
                 negative_seed: NonNegativeInt = 0, search: Literal[SEARCHES] = 'tree',
                 chunk_size: Count = 50_000, top_k: Annotated[int, Range(1, MAX_TOP_K)] = 1,
                 tie_break: Literal[energy_search.TIE_BREAKS] = 'sequence',
                 task_source: Literal[TASK_SOURCES] = 'classifier',
                 max_sequences: Optional[Count] = 300_000,
                 tokens_per_second: Positive = DEFAULT_TOKENS_PER_SECOND,
                 action_embeddings: Optional[torch.Tensor] = None,
                 loss_weights: Optional[Dict[str, NonNegative]] = None, pkg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None):
        super().__init__(num_actions, horizon, pkg, data_preprocessor)
        self.text_source = text_embeddings  # what text_features_identity records
        warn_unread_pkg(dict(type=type(self).__name__, pkg=pkg))
        check_text_config(text_embeddings)
        if task_source == 'ground_truth':  # an oracle input, never a default: said every run
            print_log("CEFITO: model.task_source='ground_truth': each window's plans are "
                      "searched among the actions of its TRUE task (the official NIV configs' "
                      'oracle_task), not the task classifier\'s prediction: an oracle setting, '
                      'not comparable with planners that infer the task', logger='current',
                      level=logging.WARNING)
        check_loss_terms(loss_weights, LOSS_TERMS)
        check_numbers(dict(max_margin=max_margin), low=min_margin)  # kinds: the annotations
        if int(hidden_dim * mlp_ratio) < 1:  # the blocks' MLP would have no hidden unit
            raise ValueError(f'CEFITO model.mlp_ratio={mlp_ratio:g} with hidden_dim={hidden_dim} '
                             f'gives MLPs of int({hidden_dim} x {mlp_ratio:g}) = 0 hidden units; '
                             f'expected mlp_ratio >= {1 / hidden_dim:.3g} (official 4.0)')
        if not causal and search == 'tree':  # the tree reuses each prefix's hidden states
            raise ValueError("model.causal=False with model.search='tree': the prefix-tree "
                             'search scores a sequence from its prefixes\' hidden states, the '
                             'energies of a causal predictor only (a non-causal one would be '
                             "scored as if causal); use model.search='chunked' (full "
                             'sequences) for a non-causal predictor')
        if negative_rng == 'global' and negative_seed:
            raise ValueError(f"model.negative_seed={negative_seed} with negative_rng='global': the "
                             "global stream is seeded by the run's seed (--seed / "
                             'randomness.seed), negative_seed seeds only the per-sample '
                             "generators, so it would be ignored; drop it or use 'per_sample'")
        self.num_tasks, self.feature_dim = num_tasks, feature_dim
        self.task_to_actions = self.read_task_actions(taxonomy)
        self.num_negatives, self.hard_negative_ratio = num_negatives, hard_negative_ratio
        self.permutation_negative_ratio = permutation_negative_ratio
        self.min_margin, self.max_margin = min_margin, max_margin
        self.margin_order_weight, self.aux_weight = margin_order_weight, aux_weight
        self.observation_noise = observation_noise
        self.negative_rng, self.negative_seed = negative_rng, negative_seed
        self.search, self.chunk_size, self.top_k = search, chunk_size, top_k
        self.tie_break, self.task_source = tie_break, task_source
        self.max_sequences, self.tokens_per_second = max_sequences, tokens_per_second
        self.loss_weights = self.loss_weights_of(loss_weights)
        if text_embeddings:
            self.text_label = stand_in_label(text_embeddings)  # None: CLIP text features
        else:
            self.text_label = (NO_TEXT if action_embeddings is None
                               else GIVEN)
        if action_embeddings is None:
            action_embeddings = (load_action_features(**dict(text_embeddings))
                                 if text_embeddings else torch.zeros(num_actions, text_dim))
        self.check_text_features(action_embeddings, text_dim, text_embeddings)
        self.field = energy_field.EnergyField(feature_dim, num_actions, horizon,
                                              action_embeddings.float(), hidden_dim, depth,
                                              num_heads, mlp_ratio, causal)
        self.classifier = TaskClassifier(feature_dim, num_tasks, owner='CEFITO')
        self.register_buffer('negative_step', torch.tensor(0, dtype=torch.long))
        self.check_search_budget()  # before any training a search could not follow
        print_log(f'CEFITO: energy field {num_parameters(self):,} parameters, task classifier '
                  f'{num_parameters(self.classifier):,} (counted apart) (N={num_actions}, '
                  f'K={num_tasks}, E={feature_dim}, H={hidden_dim}, T={horizon}); text '
                  f'features: {self.text_label or "CLIP text features"}', logger='current',
                  level=logging.INFO if self.text_label in (None, GIVEN) else logging.WARNING)

    def require_pkg(self) -> None:
        """CEFITO plans without the PKG (``PKGHook`` may still count one for the record)."""

    @classmethod
    def plans_read_pkg(cls, model_cfg: dict) -> bool:
        return False

    # ------------------------------------------------------------------ checks
    def read_task_actions(self, taxonomy) -> Dict[int, tuple]:
        if not isinstance(taxonomy, (str, Path, dict)) and not hasattr(taxonomy, 'task_actions'):
            raise ValueError(f'model.taxonomy={taxonomy!r}; expected the taxonomy JSON file '
                             '(e.g. {data_root}/niv/taxonomy.json) or a {task: [action ids]} dict')
        lists = ({int(k): tuple(int(a) for a in v) for k, v in dict(taxonomy).items()}
                 if isinstance(taxonomy, dict) else task_action_lists(taxonomy))
        if len(lists) != self.num_tasks:
            where = 'the task list' if isinstance(taxonomy, dict) else f'the taxonomy {taxonomy}'
            raise ValueError(f'CEFITO: {where} has {len(lists)} tasks but model.num_tasks='
                             f'{self.num_tasks}')
        for task, actions in lists.items():
            if not actions:
                raise ValueError(f'CEFITO: task {task} of the taxonomy has no actions (A(c) is '
                                 'empty); every task needs at least one action to plan with')
            bad = [a for a in actions if not 0 <= a < self.num_actions]
            if bad:
                raise ValueError(f'CEFITO: task {task} lists action ids {bad} outside '
                                 f'0..{self.num_actions - 1} (model.num_actions)')
        return lists

    def check_text_features(self, features: torch.Tensor, text_dim: int, source) -> None:
        where = f'model.text_embeddings={dict(source) if source else None}'
        if not isinstance(features, torch.Tensor):
            raise ValueError(f'model.action_embeddings={features!r}; expected a float tensor '
                             f'({self.num_actions}, {text_dim}) or None (text features from '
                             'model.text_embeddings)')
        if features.ndim != 2 or features.shape[0] != self.num_actions:
            raise ValueError(f'CEFITO: {where} gave text features of shape '
                             f'{tuple(features.shape)}; expected one row per action: '
                             f'({self.num_actions}, {text_dim})')
        if features.shape[1] != text_dim:
            raise ValueError(f'CEFITO: {where} gave {features.shape[1]}-d text features but '
                             f'model.text_dim={text_dim} (CLIP ViT-B/32 text features: 512; a '
                             'stand-in encoder is zero-padded with text_embeddings.pad_to)')
        if source:  # read or encoded here (a tensor given as it is is the caller's)
            self.check_distinct_rows(features, where, source.get('taxonomy'))

    def check_distinct_rows(self, features: torch.Tensor, where: str, taxonomy=None) -> None:
        """The energy field tells the actions of a task apart by their text features: two
        actions of one task with identical rows would always tie (a constant or copied
        feature file): ``ValueError`` naming the task and the actions. Two actions of one name
        (the taxonomy of ``text_embeddings``, when it names one) may share theirs."""
        names = None
        if taxonomy is not None:
            from ..datasets import load_taxonomy
            from ..datasets.validation import normalized_name
            names = [normalized_name(n) for n in load_taxonomy(taxonomy).action_names]
        for task, actions in self.task_to_actions.items():
            rows = features[list(actions)]
            same = [(actions[int(i)], actions[int(j)]) for i, j in
                    (rows[:, None] == rows[None]).all(-1).triu(1).nonzero().tolist()]
            same = [(a, b) for a, b in same if names is None or names[a] != names[b]]
            if same:
                first, second = same[0]
                raise ValueError(f'CEFITO: {where} gave identical text features to actions '
                                 f'{first} and {second} of task {task} ({len(same)} such pair(s) '
                                 'in this task); expected a distinct row per action of a task: '
                                 'the energy field could not tell them apart (every plan with '
                                 'one or the other would tie)')

    def check_search_budget(self) -> None:
        """Refuse before any search when the largest A(c) gives more than ``max_sequences``
        sequences per sample at the model's horizon."""
        task, actions = max(self.task_to_actions.items(), key=lambda item: len(item[1]))
        size, horizon = len(actions), self.horizon
        sequences = size ** horizon
        if self.max_sequences is None or sequences <= self.max_sequences:
            return
        seconds = energy_search.search_cost([size], horizon)['tree_tokens'] / \
            self.tokens_per_second
        raise ValueError(
            f'CEFITO: a search at T={horizon} scores up to {sequences:,} sequences per sample '
            f'(task {task}: |A(c)|={size}), more than model.max_sequences='
            f'{self.max_sequences:,}; estimated {seconds:,.0f} s per such sample at '
            f'{self.tokens_per_second:,.0f} prefix-tree token evaluations/s (model.'
            'tokens_per_second; tools/benchmark_cefito_search.py measures it). Run it on a GPU '
            'with model.max_sequences=None (and model.tokens_per_second set to what the '
            'benchmark measures there), or plan a shorter horizon')

    def check_tasks(self, tasks: torch.Tensor, source: str) -> None:
        bad = [int(t) for t in tasks if int(t) not in self.task_to_actions]
        if bad:
            raise ValueError(f'CEFITO: the {source} task {bad[0]} is not a task of the '
                             f'taxonomy (tasks 0..{self.num_tasks - 1}); A(c) is undefined')

    # ------------------------------------------------------------------ training
    def sampler_rngs(self, data_samples, batch: int):
        if self.negative_rng == 'global':
            return negatives.global_stream()
        indices = data_samples.get('index') if data_samples else None
        if indices is None:
            indices = torch.arange(batch)
        step = int(self.negative_step)
        return lambda i: negatives.sample_rng(self.negative_seed, step, int(indices[i]))

    def draw_negatives(self, plan: torch.Tensor, task: torch.Tensor, data_samples) -> torch.Tensor:
        """(B, M, T) negatives of ground truths (B, T) of tasks (B,)."""
        drawn = negatives.sample_negatives(
            plan.tolist(), task.tolist(), self.task_to_actions, self.num_negatives,
            self.hard_negative_ratio, self.permutation_negative_ratio,
            self.sampler_rngs(data_samples, len(plan)))
        if self.training:
            self.negative_step += 1
        return torch.tensor(drawn, dtype=torch.long, device=plan.device)

    def noisy(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and self.observation_noise):
            return x
        return x + self.observation_noise * x.std() * torch.randn_like(x)

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        plan, task = data_samples['plan'], data_samples['task']
        self.classifier.check_batch(inputs, task)
        self.check_tasks(task, 'ground-truth')
        terms = self.loss_terms(self.noisy(inputs['start']), self.noisy(inputs['goal']), plan,
                                self.draw_negatives(plan, task, data_samples))
        losses = dict(loss_contrastive=terms['contrastive'],
                      loss_auxiliary=self.aux_weight * terms['auxiliary'])
        return {k: v * self.loss_weights.get(k, 1.0) for k, v in losses.items()}

    def loss_terms(self, start, goal, plan, negative_plans) -> Dict[str, torch.Tensor]:
        """``core.energy_field.field_loss`` with the model's margins and weights."""
        return energy_field.field_loss(self.field, start, goal, plan, negative_plans,
                                       self.min_margin, self.max_margin,
                                       self.margin_order_weight, self.aux_weight)

    # ------------------------------------------------------------------ planning
    def search_tasks(self, inputs, data_samples) -> torch.Tensor:
        return self.task_prediction(inputs, data_samples)['pred_task']

    def task_prediction(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        """``pred_task`` (B,), the tasks searched within (``task_source``), with the
        classifier's ``pred_task_score`` (B,)."""
        if self.task_source == 'ground_truth':
            if not data_samples or 'task' not in data_samples:
                raise ValueError('CEFITO: model.task_source=ground_truth needs the batch\'s '
                                 'tasks (data_samples["task"])')
            fields, source = dict(pred_task=data_samples['task']), 'ground-truth'
        else:
            fields, source = task_fields(self.classifier.task_logits(inputs)), 'predicted'
        self.check_tasks(fields['pred_task'], source)
        return fields

    @torch.no_grad()
    def plan(self, start: torch.Tensor, goal: torch.Tensor, tasks: torch.Tensor,
             top_k: Optional[int] = None, scorer: Optional[str] = None,
             tie_break: Optional[str] = None, chunk_size: Optional[int] = None):
        """Raw start, goal (B, E), tasks (B,) -> (plans (B, k, T), energies (B, k))."""
        self.check_search_budget()
        top_k = top_k or self.top_k
        chunk_size = chunk_size or self.chunk_size
        start = energy_field.normalize_observation(start)
        goal = energy_field.normalize_observation(goal)
        plans = torch.zeros(len(start), top_k, self.horizon, dtype=torch.long,
                            device=start.device)
        energies = torch.zeros(len(start), top_k, device=start.device)
        groups = energy_search.group_by_task(tasks)
        progress = self.search_progress(scorer or self.search, groups)
        for task, members in groups:
            actions = torch.tensor(self.task_to_actions[task], device=start.device)
            table = energy_search.energy_table(self.field, start[members], goal[members],
                                               actions, self.horizon, scorer or self.search,
                                               chunk_size, scored=progress.update)
            order, best = energy_search.select_top_k(table, top_k, tie_break or self.tie_break,
                                                     chunk_size)
            plans[members] = energy_search.decode_candidates(
                order.reshape(-1), actions, self.horizon).view(len(members), top_k, -1)
            energies[members] = best
        return plans, energies

    def search_progress(self, scorer: str, groups) -> StepProgress:
        """The progress line of a batch's search (``vpn_plugin.progress``), in (sample,
        sequence) pairs scored: silent unless the search lasts SEARCH_PROGRESS_SECONDS."""
        total = sum(len(members) * len(self.task_to_actions[task]) ** self.horizon
                    for task, members in groups)
        return StepProgress(f'CEFITO search ({scorer}, T={self.horizon})', total,
                            lambda text: print_log(text, logger='current'),
                            unit='sequences', interval=SEARCH_PROGRESS_SECONDS,
                            quiet=SEARCH_PROGRESS_SECONDS)

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        tasks = self.task_prediction(inputs, data_samples)
        plans, energies = self.plan(inputs['start'], inputs['goal'], tasks['pred_task'])
        return dict(pred_plan=plans[:, 0], **tasks, topk_plans=plans, topk_energies=energies)

    def tensor(self, inputs, horizon: int, data_samples=None) -> torch.Tensor:
        """Top-1 plans (B, T) searched within the tasks of ``task_source``, as ``predict``
        (the classifier's, or the batch's true tasks: ``data_samples["task"]``)."""
        return self.plan(inputs['start'], inputs['goal'],
                         self.search_tasks(inputs, data_samples))[0][:, 0]



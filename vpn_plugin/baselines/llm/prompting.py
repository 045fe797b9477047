"""Prompt rendering for the LLM/VLM planning baselines.

Templates are the text files of a prompt set with ``string.Template`` placeholders
(``$name``); this module only computes the values that fill them. Prompt sets
(:data:`PROMPT_SETS`): ``'ours'`` (``prompts/``, the default) and ``'paper'``
(``prompts/paper/``: the paper's printed prompts, README there).
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ...errors import read_text

PROMPTS_DIR = Path(__file__).resolve().parents[3] / 'prompts'
PROMPT_SETS = {'ours': PROMPTS_DIR, 'paper': PROMPTS_DIR / 'paper'}
TEMPLATE_FILES = {
    'completion': 'sequence_completion.txt',
    'completion_pkg': 'sequence_completion_pkg.txt',
    'identification': 'vlm_action_identification.txt',
}
UNKNOWN = -1
# How the few-shot examples are drawn (a results row's ``settings.example_draw``): by the
# window's identity (``datasets.annotations.window_key``) from the training windows sorted by
# theirs, so the same videos listed in any order give the same prompts. Rows without it were
# drawn by the window's position in the test list from the training windows in file order.
EXAMPLE_DRAW = 'window_identity_v2'


def load_template(name_or_path: str | Path, prompt_set: str = 'ours'
                  ) -> tuple[string.Template, Path]:
    """A template by short name (see TEMPLATE_FILES) of a prompt set, or by file path.

    A short name is always the prompt set's own file: a file of the same name in the working
    directory (``prompts/`` itself, a copy of the paper's transcription) is never read instead.
    A relative path is read from the working directory, else from the prompt set's folder."""
    if prompt_set not in PROMPT_SETS:
        raise ValueError(f'prompt set {prompt_set!r} is unknown; expected one of '
                         f'{tuple(PROMPT_SETS)}')
    if str(name_or_path) in TEMPLATE_FILES:
        path = PROMPT_SETS[prompt_set] / TEMPLATE_FILES[str(name_or_path)]
    else:
        path = Path(name_or_path)
        if not path.is_absolute() and not path.exists():
            path = PROMPT_SETS[prompt_set] / path
    if not path.is_file():
        raise FileNotFoundError(f'prompt template {name_or_path!r}: no file {path}')
    return string.Template(read_text(path, 'prompt template', 'a UTF-8 text file')), path


def render_template(template: string.Template, path: Path, fields: dict) -> str:
    try:
        return template.substitute(fields)
    except KeyError as err:
        raise KeyError(f'prompt template {path}: placeholder ${err.args[0]} has no value; '
                       f'available: {sorted(fields)}') from None
    except ValueError as err:
        raise ValueError(f'prompt template {path}: {err}') from None


def allowed_actions(taxonomy, task: int, scope: str) -> list[int]:
    """Action ids the model may answer with: the task's actions or the whole taxonomy."""
    if scope == 'task':
        return list(taxonomy.task_actions[task])
    if scope == 'dataset':
        return list(range(taxonomy.num_actions))
    raise ValueError(f"taxonomy scope {scope!r}: expected 'task' or 'dataset'")


def format_taxonomy(taxonomy, action_ids: Sequence[int]) -> str:
    return '\n'.join(f'{a}: {taxonomy.action_names[a]}' for a in action_ids)


def format_sequence(plan: Sequence[int]) -> str:
    return '[' + ', '.join(str(int(a)) for a in plan) + ']'


def format_names(taxonomy, plan: Sequence[int]) -> str:
    names = ['?' if a == UNKNOWN else taxonomy.action_names[a] for a in plan]
    return '[' + ', '.join(names) + ']'


def format_pkg(pkg: np.ndarray, action_ids: Sequence[int], decimals: int = 2) -> str:
    """Edges ``a -> b: p`` of the PKG between the given actions, strongest first per source."""
    lines = []
    for a in action_ids:
        row = [(pkg[a, b], b) for b in action_ids if pkg[a, b] > 0]
        for prob, b in sorted(row, key=lambda pb: (-pb[0], pb[1])):
            lines.append(f'{a} -> {b}: {prob:.{decimals}f}')
    return '\n'.join(lines) if lines else '(no transitions observed)'


def incomplete_plan(first: int, last: int, horizon: int) -> list[int]:
    if horizon < 2:
        raise ValueError(f'horizon {horizon}: completion needs at least 2 steps')
    return [int(first)] + [UNKNOWN] * (horizon - 2) + [int(last)]


@dataclass
class PlanningQuery:
    """One window to plan: what the prompt may know and the ground truth to score."""
    index: int
    task: int  # task named in the prompt: ground truth, or the task of a predicted first action
    horizon: int
    gt_plan: list[int]
    first: int | None = None   # start/end actions (oracle or step model); None in VLM mode
    last: int | None = None
    start_frames: list[bytes] = field(default_factory=list)   # JPEG bytes, VLM mode
    goal_frames: list[bytes] = field(default_factory=list)
    # the window's identity (``datasets.annotations.window_key``): its examples are drawn by
    # it; None for bare arrays (drawn by ``index``)
    key: int | None = None


class PromptBuilder:
    """Renders the three templates for one dataset.

    Args:
        taxonomy: the dataset Taxonomy (see docs/design.md).
        train_plans: (M, T) training windows; examples are drawn from them.
        train_tasks: (M,) task of each training window.
        train_keys: (M,) identity of each training window (``window_key``): the pool is
            sorted by it (None: in the given order).
        pkg: (N, N) transition probabilities, required with ``with_pkg``.
        num_examples: k example sequences per prompt (from the query's task when
            scope is 'task', else from any task).
        scope: 'task' or 'dataset' taxonomy in the prompt (and accepted in replies).
        seed: examples are drawn with ``default_rng([seed, query.key])`` (:data:`EXAMPLE_DRAW`;
            ``query.index`` for a query without a key), so a prompt never depends on the
            order of the video lists or the concurrency of the run.
        prompt_set: 'ours' or 'paper' (:data:`PROMPT_SETS`); ``templates`` (short name ->
            file) overrides single templates.
    """

    def __init__(self, taxonomy, train_plans, train_tasks, *, pkg=None, with_pkg=False,
                 num_examples=5, scope='task', seed=0, templates=None, prompt_set='ours',
                 train_keys=None):
        self.taxonomy = taxonomy
        self.train_plans = np.asarray(train_plans, dtype=np.int64)
        self.train_tasks = np.asarray(train_tasks, dtype=np.int64)
        if self.train_plans.ndim != 2 or len(self.train_plans) != len(self.train_tasks):
            raise ValueError(f'train_plans {self.train_plans.shape} and train_tasks '
                             f'{self.train_tasks.shape}: expected (M, T) and (M,)')
        self.order = np.arange(len(self.train_plans))  # the pool's order: by identity
        if train_keys is not None:
            keys = np.asarray(train_keys, dtype=np.int64)
            if keys.shape != self.train_tasks.shape:
                raise ValueError(f'train_keys {keys.shape}: expected one key per training '
                                 f'window {self.train_tasks.shape}')
            self.order = np.argsort(keys, kind='stable')
        if with_pkg and pkg is None:
            raise ValueError('with_pkg=True needs a pkg (N, N) array')
        self.pkg, self.with_pkg = pkg, with_pkg
        self.num_examples, self.scope, self.seed = num_examples, scope, seed
        self.prompt_set = prompt_set
        templates = dict(templates or {})
        completion = 'completion_pkg' if with_pkg else 'completion'
        self.completion = load_template(templates.get('completion', completion), prompt_set)
        self.identification = load_template(templates.get('identification', 'identification'),
                                            prompt_set)

    def allowed(self, query: PlanningQuery) -> list[int]:
        """The scope's actions plus the given first/last actions (a step model may predict
        them outside the task; the model must be able to repeat them)."""
        actions = allowed_actions(self.taxonomy, query.task, self.scope)
        extra = [a for a in (query.first, query.last) if a is not None and a not in actions]
        return actions + sorted(set(extra))

    def _example_pool(self, query: PlanningQuery) -> np.ndarray:
        """Indices of the training windows the examples of ``query`` are drawn from."""
        pool = self.order
        return pool[self.train_tasks[pool] == query.task] if self.scope == 'task' else pool

    def example_count(self, query: PlanningQuery) -> int:
        """How many examples the prompt of ``query`` holds: ``num_examples``, or fewer when
        its pool (the task's training windows) is smaller."""
        return min(self.num_examples, len(self._example_pool(query)))

    def examples(self, query: PlanningQuery) -> str:
        pool = self._example_pool(query)
        if self.example_count(query) == 0:
            return '(none)'
        rng = np.random.default_rng([self.seed, query.index if query.key is None else query.key])
        chosen = rng.choice(pool, size=self.example_count(query), replace=False)
        return '\n'.join(f'{format_sequence(self.train_plans[i])} = '
                         f'{format_names(self.taxonomy, self.train_plans[i])}' for i in chosen)

    def common_fields(self, query: PlanningQuery) -> dict:
        return {'task_name': self.taxonomy.task_names[query.task], 'horizon': query.horizon,
                'taxonomy': format_taxonomy(self.taxonomy, self.allowed(query))}

    def completion_prompt(self, query: PlanningQuery, first: int, last: int) -> str:
        partial = incomplete_plan(first, last, query.horizon)
        fields = self.common_fields(query)
        fields.update(examples=self.examples(query), incomplete_ids=format_sequence(partial),
                      incomplete_names=format_names(self.taxonomy, partial),
                      plan_format=', '.join(f'id_{t + 1}' for t in range(query.horizon)))
        if self.with_pkg:
            fields['pkg'] = format_pkg(self.pkg, self.allowed(query))
        return render_template(*self.completion, fields)

    def identification_prompt(self, query: PlanningQuery, clip_role: str) -> str:
        fields = self.common_fields(query)
        fields['clip_role'] = clip_role
        return render_template(*self.identification, fields)

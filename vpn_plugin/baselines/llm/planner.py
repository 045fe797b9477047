"""Prompted planners: complete a plan from its first/last actions (LLM) or from the
start/goal clips (VLM, two stages: identify the end actions, then complete)."""
from __future__ import annotations

from dataclasses import dataclass

from ...core.metrics import no_plan
from .backends import RequestFailedError
from .frames import image_parts
from .parsing import ActionMatcher, OutOfTaxonomyError, ReplyParseError, parse_action, parse_plan
from .prompting import PlanningQuery, PromptBuilder

STATUSES = ('ok', 'unparseable', 'truncated', 'out_of_taxonomy', 'request_failed')


@dataclass
class PlanOutcome:
    """The plan of one query and how the reply was judged (``status`` in STATUSES);
    ``failure`` is the ``RequestFailedError.kind`` of a ``request_failed`` outcome."""
    index: int
    plan: list[int]
    status: str
    detail: str = ''
    first: int | None = None
    last: int | None = None
    failure: str = ''


class _Rejected(Exception):
    def __init__(self, status: str, detail: str, failure: str = ''):
        super().__init__(detail)
        self.status, self.detail, self.failure = status, detail, failure


class PromptPlanner:
    """Plans one :class:`PlanningQuery` with a chat backend.

    LLM mode needs ``query.first``/``query.last`` (oracle or step model). VLM mode
    (``vlm=True``) identifies them from ``query.start_frames``/``goal_frames`` first, then
    completes the plan with the frames attached.
    """

    def __init__(self, backend, prompts: PromptBuilder, *, vlm: bool = False):
        self.backend, self.prompts, self.vlm = backend, prompts, vlm

    def plan(self, query: PlanningQuery) -> PlanOutcome:
        first, last = query.first, query.last
        try:
            if self.vlm:
                first = self._identify(query, 'start (first step)', query.start_frames)
                last = self._identify(query, 'goal (last step)', query.goal_frames)
            if first is None or last is None:
                raise ValueError(f'query {query.index}: LLM mode needs first and last actions')
            plan = self._complete(query, first, last)
        except _Rejected as rejected:
            # no usable plan: scored 0 on every metric (core.metrics.NO_PLAN)
            return PlanOutcome(query.index, no_plan(query.horizon), rejected.status,
                               rejected.detail, first, last, rejected.failure)
        return PlanOutcome(query.index, plan, 'ok', '', first, last)

    def _matcher(self, query: PlanningQuery) -> ActionMatcher:
        return ActionMatcher(self.prompts.taxonomy.action_names, self.prompts.allowed(query))

    def _ask(self, content, parse):
        try:
            reply = self.backend.complete([{'role': 'user', 'content': content}])
            if reply.truncated:
                raise _Rejected('truncated', 'the reply stopped at the token limit '
                                '(finish_reason "length"; raise params.max_tokens)')
            return parse(reply.text)
        except RequestFailedError as err:
            raise _Rejected('request_failed', str(err), err.kind) from err
        except OutOfTaxonomyError as err:
            raise _Rejected('out_of_taxonomy', str(err)) from err
        except ReplyParseError as err:
            raise _Rejected('unparseable', str(err)) from err

    def _identify(self, query: PlanningQuery, clip_role: str, frames: list[bytes]) -> int:
        if not frames:
            raise ValueError(f'query {query.index}: VLM mode needs frames of the {clip_role} clip')
        text = self.prompts.identification_prompt(query, clip_role)
        content = [{'type': 'text', 'text': text}] + image_parts(frames)
        matcher = self._matcher(query)
        return self._ask(content, lambda reply: parse_action(reply, matcher))

    def _complete(self, query: PlanningQuery, first: int, last: int) -> list[int]:
        text = self.prompts.completion_prompt(query, first, last)
        content = text
        if self.vlm:
            content = ([{'type': 'text', 'text': text},
                        {'type': 'text', 'text': 'Frames of the start clip:'}]
                       + image_parts(query.start_frames)
                       + [{'type': 'text', 'text': 'Frames of the goal clip:'}]
                       + image_parts(query.goal_frames))
        matcher = self._matcher(query)
        any_key = self.prompts.prompt_set == 'paper'  # its reply format has no fixed key
        return self._ask(content, lambda reply: parse_plan(reply, matcher, query.horizon,
                                                           any_key))

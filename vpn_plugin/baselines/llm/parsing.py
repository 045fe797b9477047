"""Strict parsing of model replies into action ids of the taxonomy."""
from __future__ import annotations

import json
import re
from typing import Sequence

from vpn_plugin.errors import unique_keys

from .prompting import UNKNOWN

PLAN_KEYS = ('plan', 'sequence', 'actions', 'steps')
ID_KEYS = ('action_id', 'id')
NAME_KEYS = ('action_name', 'name', 'action')


class ReplyParseError(ValueError):
    """The reply holds no JSON of the expected shape."""


class OutOfTaxonomyError(ValueError):
    """The reply names an action that is not in the prompt's taxonomy."""


def _normalise(name: str) -> str:
    return ' '.join(name.lower().split())


# A reasoning model's thinking written inline, as (opening, closing) delimiters: <think>,
# <thinking>, <reasoning> (Qwen3, DeepSeek-R1, ...; attributes or a namespace allowed:
# ByteDance Seed-OSS writes <seed:think>), Mistral's Magistral [THINK] ... [/THINK], Moonshot's
# Kimi-VL-Thinking ◁think▷ ... ◁/think▷. ``name`` ties a closing tag to its opening one.
_TAG_NAME = r'(?:[a-z]+:)?(?:think|thinking|reasoning)'
REASONING_DELIMITERS = (
    (rf'<(?P<name>{_TAG_NAME})(?:\s[^<>]*)?>', r'</(?P=name)>', rf'</{_TAG_NAME}>'),
    (r'\[THINK\]', r'\[/THINK\]', r'\[/THINK\]'),
    ('◁think▷', '◁/think▷', '◁/think▷'),
)
_FLAGS = re.DOTALL | re.IGNORECASE
# gpt-oss (OpenAI's harmony format): the analysis channel, then the final one; as its tokens
# (a server without a reasoning parser), or decoded without them ("analysis...assistantfinal...")
_HARMONY_FINAL = r'<\|channel\|>\s*final\s*(?:<\|constrain\|>\s*\w+\s*)?<\|message\|>'


def _final_channel(text: str) -> str:
    """The final channel of a gpt-oss reply written in the harmony format, else ``text``."""
    finals = list(re.finditer(_HARMONY_FINAL, text))
    if finals:
        return re.sub(r'<\|(?:return|end|call)\|>\s*$', '', text[finals[-1].end():])
    if re.match(r'\s*<\|channel\|>\s*analysis', text):
        return ''  # thinking, cut before its final channel: no answer
    if re.match(r'\s*analysis', text) and 'assistantfinal' in text:
        return text.rsplit('assistantfinal', 1)[1]
    return text


def without_reasoning(text: str) -> str:
    """``text`` without a reasoning model's thinking, which is no part of its answer
    (:data:`REASONING_DELIMITERS`, gpt-oss's harmony channels): the blocks it opens with
    (after prose holding no JSON, a byte-order mark, ...), or, with no opening tag (a chat
    template that opens the block in the prompt: the reply starts inside it), everything
    before the last closing tag. Qwen3, DeepSeek-R1 and others write them inline when the
    server does not split them off, and ``--backend transformers`` returns them whole. An
    unclosed block (cut by the token limit) is thinking to the end: no answer is read from
    it. A tag after a JSON value of the reply (inside or after the answer) is left as
    written."""
    text = _final_channel(text)
    while True:
        block = next((found for opening, closing, _ in REASONING_DELIMITERS
                      if (found := re.match(rf'[^{{\[]*?{opening}.*?(?:{closing}|\Z)', text,
                                            flags=_FLAGS))), None)
        if block is None:
            break
        text = text[block.end():]
    if any(re.search(opening, text, flags=_FLAGS) for opening, _, _ in REASONING_DELIMITERS):
        return text
    closing = [found for _, _, lone in REASONING_DELIMITERS
               for found in re.finditer(lone, text, flags=_FLAGS)]
    return text[max(found.end() for found in closing):] if closing else text


def json_values(text: str) -> list:
    """Top-level JSON objects and arrays in ``text`` (its thinking left out:
    :func:`without_reasoning`): those of fenced blocks first, then those of the whole text
    (bare, or with prose around it).

    A value nested in a malformed one is not top-level: ``{"plan": [0, 1, 2]`` (truncated)
    or ``{"plan": [0, 1, 2] extra}`` yield nothing, so they are unparseable, not plans.
    """
    text = without_reasoning(text)
    fenced = re.findall(r'```(?:json)?\s*(.*?)```', text, flags=re.DOTALL | re.IGNORECASE)
    values = []
    for candidate in fenced + [text]:
        values.extend(_scan_values(candidate))
    return values


_REPLY_KEYS = unique_keys(None, 'reply', same_value_ok=True)


def _reply_object(pairs: list) -> dict:
    """An object of the reply; a key given twice with different values: which one is the
    answer is not known (``errors.unique_keys``), unparseable."""
    try:
        return _REPLY_KEYS(pairs)
    except ValueError as err:
        raise ReplyParseError(str(err)) from None


def _scan_values(text: str) -> list:
    decoder = json.JSONDecoder(object_pairs_hook=_reply_object)
    values, position = [], 0
    while position < len(text):
        if text[position] not in '{[':
            position += 1
            continue
        try:
            value, position = decoder.raw_decode(text, position)
            values.append(value)
        except json.JSONDecodeError as err:
            position = max(position + 1, err.pos)  # resume where the malformed value broke
        except ReplyParseError:  # a key given twice (_reply_object)
            raise
        except (ValueError, RecursionError) as err:  # a number of over 4300 digits, a value
            # nested deeper than Python's recursion limit: the reply is unparseable, not the run
            raise ReplyParseError(f'reply holds a JSON value Python cannot read at character '
                                  f'{position} ({type(err).__name__}: {str(err)[:120]})') from None
    return values


class ActionMatcher:
    """Maps an id (int or numeric string) or a name (case/whitespace-insensitive) to an id."""

    def __init__(self, action_names: Sequence[str], allowed_ids: Sequence[int]):
        self.allowed = set(int(a) for a in allowed_ids)
        self.ids_by_name: dict = {}  # a name several actions share (COIN, CrossTask's dataset)
        for a in allowed_ids:
            self.ids_by_name.setdefault(_normalise(action_names[a]), []).append(int(a))

    def _named(self, name: str, text: str):
        """The id of the action called ``name`` (normalised), None when none is; a name of
        several actions of the prompt's list is refused: which one is meant is not known."""
        ids = self.ids_by_name.get(name)
        if ids and len(ids) > 1:
            raise ReplyParseError(f'action name {text!r} names actions {ids} of the prompt\'s '
                                  'list; which one is meant is not known (expected an id)')
        return ids[0] if ids else None

    def match(self, item) -> int:
        if isinstance(item, dict):
            return self._match_dict(item)
        if isinstance(item, bool):
            raise ReplyParseError(f'action {item!r}: expected an id or a name')
        if isinstance(item, int) or (isinstance(item, float) and item.is_integer()):
            return self._match_id(int(item))
        if isinstance(item, str):
            text = item.strip()
            if re.fullmatch(r'-?\d+', text):
                return self._match_id(int(text))
            return self._match_name(text)
        raise ReplyParseError(f'action {item!r}: expected an id or a name')

    def _match_name(self, text: str) -> int:
        """A name, or ``"<id>: <name>"`` as the taxonomy is listed in the prompt (the id and
        the name must then agree)."""
        name = _normalise(text)
        if name in self.ids_by_name:
            return self._named(name, text)
        labelled = re.fullmatch(r'(-?\d+)\s*[:.)-]\s*(\S.*)', name)
        if labelled is None:
            raise OutOfTaxonomyError(f'action name {text!r} is not in the taxonomy')
        action_id = self._match_id(int(labelled.group(1)))
        if action_id not in self.ids_by_name.get(labelled.group(2), []):
            raise ReplyParseError(f'action {text!r}: the id {action_id} and the name disagree')
        return action_id

    def _match_id(self, action_id: int) -> int:
        if action_id not in self.allowed:
            raise OutOfTaxonomyError(f'action id {action_id} is not in the taxonomy')
        return action_id

    def _match_dict(self, item: dict) -> int:
        """``{"action_id", "action_name"}``: the id when present, else the name; both given,
        they must agree (as in ``"<id>: <name>"``): which one is meant is not known."""
        ids = [self.match(item[key]) for key in ID_KEYS if item.get(key) is not None]
        names = [item[key] for key in NAME_KEYS if item.get(key) is not None]
        if len(set(ids)) > 1 or len({_normalise(str(name)) for name in names}) > 1:
            raise ReplyParseError(f'action object {item!r} gives {len(ids)} ids and '
                                  f'{len(names)} names that disagree; which one is meant is '
                                  'not known')
        if ids and names:
            if ids[0] not in self.ids_by_name.get(_normalise(str(names[0])), []):
                raise ReplyParseError(f'action object {item!r}: the id {ids[0]} and the name '
                                      f'{names[0]!r} disagree; which one is meant is not known')
        if ids:
            return ids[0]
        if names:
            return self.match(str(names[0]))
        raise ReplyParseError(f'action object {item!r}: expected a key among {ID_KEYS + NAME_KEYS}')


def parse_plan(text: str, matcher: ActionMatcher, horizon: int,
               any_key: bool = False) -> list[int]:
    """``{"plan": [...]}`` or a bare list of ``horizon`` actions -> list of ids.

    An object with a plan key (see PLAN_KEYS) wins over bare lists (which may be the prompt's
    incomplete sequence echoed in the prose); with ``any_key`` and no such key, so does the only
    list of an object (``{"completed_sequence": [...]}``: the paper's prompts ask for "a JSON
    format" of no fixed shape); without either, the top-level list is the plan. Two different
    candidates of the kind chosen (two plans, two bare lists) are refused: which is the answer
    is unknown.
    """
    values = json_values(text)
    keyed = _answers([v[k] for v in values if isinstance(v, dict) for k in PLAN_KEYS
                      if isinstance(v.get(k), list)])
    only_lists = _answers([_only_list(v) for v in values
                           if any_key and isinstance(v, dict) and _only_list(v)])
    if len({json.dumps(plan) for plan in keyed}) > 1:
        raise ReplyParseError(f'reply holds {len(keyed)} different plans under {PLAN_KEYS}; '
                              f'which one is the answer is not known: {text[:200]!r}')
    plans = keyed or only_lists or _answers([v for v in values if isinstance(v, list)])
    if any_key:  # "Return only the completed sequences": [[...]] is one sequence in a list
        plans = [plan[0] if len(plan) == 1 and isinstance(plan[0], list) else plan
                 for plan in plans]
    if len({json.dumps(plan) for plan in plans}) > 1:  # bare lists, or lists of objects
        raise ReplyParseError(f'reply holds {len(plans)} different lists and no object with a '
                              f'list under {PLAN_KEYS}; which one is the answer is not known: '
                              f'{text[:200]!r}')
    if not plans:
        raise ReplyParseError(f'reply holds no object with a list under any of {PLAN_KEYS} '
                              f'nor a JSON list: {text[:200]!r}')
    plan = plans[0]
    if len(plan) != horizon:
        raise ReplyParseError(f'reply plan has {len(plan)} actions, expected {horizon}')
    return [matcher.match(item) for item in plan]


def _only_list(value: dict):
    """The list of an object that holds exactly one list besides the prompt's incomplete
    sequence echoed (:func:`_answers`), else None."""
    lists = _answers([item for item in value.values() if isinstance(item, list)])
    return lists[0] if len(lists) == 1 else None


def _echoes_placeholder(plan: list) -> bool:
    """Whether ``plan`` holds the prompt's placeholder of an unknown step (``-1``, as a number
    or a text): the incomplete sequence of the prompt, echoed."""
    return any((type(item) is int and item == UNKNOWN)
               or (isinstance(item, str) and item.strip() == str(UNKNOWN)) for item in plan)


def _answers(plans: list) -> list:
    """``plans`` without the prompt's incomplete sequence echoed beside an answer (a list
    holding the placeholder -1, which the prompt asks to replace, is never the answer when
    another list is there); all of them when every one holds it (then counted as it reads)."""
    kept = [plan for plan in plans if not _echoes_placeholder(plan)]
    return kept or plans


def parse_action(text: str, matcher: ActionMatcher) -> int:
    """``{"action_id", "action_name"}`` (a top-level object, or a list holding only it) -> the
    action id. Objects naming different actions are refused, as two plans are
    (:func:`parse_plan`): which one is the answer is not known."""
    values = [v[0] if isinstance(v, list) and len(v) == 1 else v for v in json_values(text)]
    objects = [v for v in values if isinstance(v, dict)]
    if not objects:
        raise ReplyParseError(f'reply holds no JSON object with action_id: {text[:200]!r}')
    named = [v for v in objects if any(key in v for key in ID_KEYS + NAME_KEYS)] or objects[:1]
    ids = sorted({matcher.match(v) for v in named})
    if len(ids) > 1:
        raise ReplyParseError(f'reply names {len(ids)} different actions {ids}; which one is '
                              f'the answer is not known: {text[:200]!r}')
    return ids[0]

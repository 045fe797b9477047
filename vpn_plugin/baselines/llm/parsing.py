"""Strict parsing of model replies into action ids of the taxonomy."""
from __future__ import annotations

import json
import re
from typing import Sequence

PLAN_KEYS = ('plan', 'sequence', 'actions', 'steps')
ID_KEYS = ('action_id', 'id')
NAME_KEYS = ('action_name', 'name', 'action')


class ReplyParseError(ValueError):
    """The reply holds no JSON of the expected shape."""


class OutOfTaxonomyError(ValueError):
    """The reply names an action that is not in the prompt's taxonomy."""


def _normalise(name: str) -> str:
    return ' '.join(name.lower().split())


def extract_json(text: str):
    """The first JSON object or array in ``text`` (bare, fenced, or with prose around it)."""
    fenced = re.findall(r'```(?:json)?\s*(.*?)```', text, flags=re.DOTALL | re.IGNORECASE)
    decoder = json.JSONDecoder()
    for candidate in fenced + [text]:
        for start, char in enumerate(candidate):
            if char not in '{[':
                continue
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                continue
            if isinstance(value, (dict, list)):
                return value
    raise ReplyParseError(f'no JSON object or array in reply: {text[:200]!r}')


class ActionMatcher:
    """Maps an id (int or numeric string) or a name (case/whitespace-insensitive) to an id."""

    def __init__(self, action_names: Sequence[str], allowed_ids: Sequence[int]):
        self.allowed = set(int(a) for a in allowed_ids)
        self.by_name = {_normalise(action_names[a]): int(a) for a in allowed_ids}

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
            name = _normalise(text)
            if name not in self.by_name:
                raise OutOfTaxonomyError(f'action name {item!r} is not in the taxonomy')
            return self.by_name[name]
        raise ReplyParseError(f'action {item!r}: expected an id or a name')

    def _match_id(self, action_id: int) -> int:
        if action_id not in self.allowed:
            raise OutOfTaxonomyError(f'action id {action_id} is not in the taxonomy')
        return action_id

    def _match_dict(self, item: dict) -> int:
        """``{"action_id", "action_name"}``: the id decides when present, else the name."""
        for key in ID_KEYS:
            if item.get(key) is not None:
                return self.match(item[key])
        for key in NAME_KEYS:
            if item.get(key) is not None:
                return self.match(str(item[key]))
        raise ReplyParseError(f'action object {item!r}: expected a key among {ID_KEYS + NAME_KEYS}')


def parse_plan(text: str, matcher: ActionMatcher, horizon: int) -> list[int]:
    """``{"plan": [...]}`` or a bare list of ``horizon`` actions -> list of ids."""
    value = extract_json(text)
    if isinstance(value, dict):
        key = next((k for k in PLAN_KEYS if isinstance(value.get(k), list)), None)
        if key is None:
            raise ReplyParseError(f'reply JSON has no list under any of {PLAN_KEYS}: '
                                  f'{value!r:.200}')
        value = value[key]
    if len(value) != horizon:
        raise ReplyParseError(f'reply plan has {len(value)} actions, expected {horizon}')
    return [matcher.match(item) for item in value]


def parse_action(text: str, matcher: ActionMatcher) -> int:
    """``{"action_id", "action_name"}`` -> the action id."""
    value = extract_json(text)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict):
        raise ReplyParseError(f'reply JSON is not an object with action_id: {value!r:.200}')
    return matcher.match(value)

"""Action taxonomies of CrossTask, NIV and COIN (``taxonomy*.json`` of the unified protocol)."""
from dataclasses import dataclass, field
from pathlib import Path
from typing import List

from ..config_types import PathLike, checked_arguments
from ..errors import decimal_int, read_json


@dataclass
class Taxonomy:
    """Global action ids and the tasks they belong to.

    ``task_actions[k]`` lists the action ids of task ``k`` in file order; for CrossTask the
    i-th entry is step number i+1 of the task (the 133-action taxonomy).
    """
    action_names: List[str]
    task_names: List[str]
    task_keys: List[str]
    action_task: List[int]
    task_actions: List[List[int]]
    path: str = field(default='', compare=False)

    @property
    def num_actions(self) -> int:
        return len(self.action_names)

    @property
    def num_tasks(self) -> int:
        return len(self.task_names)

    def task_index(self, key) -> int:
        """Task index of a task key ('23521', 'Changing a car tire'), a task name ('Make Jello
        Shots'), a taxonomy file key ('0_make_tea', '0_23521_Make Jello Shots') or an index
        (int / '3'); ValueError listing what is accepted otherwise."""
        if isinstance(key, (str, int)) and not isinstance(key, bool):  # not True, 0.7, [..]
            for names in (self.task_keys, self.task_names, self.file_keys):
                if str(key) in names:
                    return names.index(str(key))
            index = key if isinstance(key, int) else decimal_int(key)
            if index is not None and 0 <= index < self.num_tasks:
                return index
        raise ValueError(f'task {key!r} is not a task of taxonomy {self.path}; expected a task '
                         f'name {self.task_names[:3]}..., a key {self.file_keys[:3]}... or an '
                         f'index 0..{self.num_tasks - 1}')

    @property
    def file_keys(self) -> List[str]:
        """The taxonomy file's keys ('<idx>_[<task id>_]<name>'), as :func:`load_taxonomy`
        parses them."""
        return [f'{i}_{key}' if key == name else f'{i}_{key}_{name}'
                for i, (key, name) in enumerate(zip(self.task_keys, self.task_names))]


def _parse_task_key(raw: str, path) -> tuple:
    """'<idx>_<numeric task id>_<name>' (CrossTask) or '<idx>_<name>' -> (idx, key, name)."""
    parts = raw.split('_', 2)
    if len(parts) < 2 or not _decimal(parts[0]):
        raise ValueError(f'{path}: task key {raw!r} does not parse; expected '
                         '"<idx>_<task id>_<name>" or "<idx>_<name>"')
    if len(parts) == 3 and _decimal(parts[1]):
        return int(parts[0]), parts[1], parts[2]
    name = raw.split('_', 1)[1]
    return int(parts[0]), name, name


def _decimal(text: str) -> bool:
    """ASCII digits 0-9 only (``errors.decimal_int``'s rule without its sign or spaces: a key's
    parts)."""
    return text.isascii() and text.isdigit()


class _Pairs(list):
    """A JSON object as its (key, value) pairs in file order: duplicate keys stay visible."""


def _line_breaking(name: str) -> list:
    """The characters of ``name`` that break or hide a line where it is printed: control
    characters (Unicode Cc: line feed, tab, NUL, ...) and line / paragraph separators
    (U+2028, U+2029), each once."""
    import unicodedata
    return sorted({c for c in name if unicodedata.category(c) in ('Cc', 'Zl', 'Zp')})


@checked_arguments
def load_taxonomy(path: PathLike) -> Taxonomy:
    """Read a taxonomy JSON ``{"<idx>_[<task id>_]<name>": {"<action id>": "<name>"}}``.

    Tasks are read in the order of the index their key carries (a file listing them in
    another order is the same taxonomy). Raises ValueError naming the file and key when task
    indices are not 0..K-1 (each once),
    action ids are not exactly 0..N-1, or an action id appears twice (in one task or in two).
    """
    path = Path(path)
    raw = read_json(path, 'taxonomy', object_pairs_hook=_Pairs)
    if not isinstance(raw, _Pairs) or not raw:
        raise ValueError(f'{path}: expected a non-empty JSON object of tasks')
    names, keys, task_actions, action_names = [], [], [], {}
    action_task = {}
    # the keys carry their index: tasks in another order are read in index order (stable: a
    # duplicated or missing index is named below)
    raw = sorted(raw, key=lambda pair: _parse_task_key(pair[0], path)[0])
    for expected_idx, (task_raw, actions) in enumerate(raw):
        idx, key, name = _parse_task_key(task_raw, path)
        if _line_breaking(task_raw):  # the task's name is printed in the prompts too
            raise ValueError(f'{path}: task {task_raw!r} holds the control or line-separator '
                             f'character(s) {", ".join(map(repr, _line_breaking(task_raw)))}; '
                             'expected a one-line name')
        if idx != expected_idx:  # sorted by index: a smaller one is a repeated index
            first = next((k for k, _ in raw if _parse_task_key(k, path)[0] == idx), None)
            again = (f', the index of task {first!r} too' + (' (the key is given twice in '
                     'the file: JSON would keep only the last)' if first == task_raw else '')
                     if idx < expected_idx else f'; no task has index {expected_idx}')
            raise ValueError(f'{path}: task {task_raw!r} has index {idx}{again}; expected task '
                             f'indices 0..{len(raw) - 1}, each once')
        if not isinstance(actions, _Pairs) or not actions:
            raise ValueError(f'{path}: task {task_raw!r} must map action ids to names')
        ids = []
        for aid, aname in actions:
            if not _decimal(str(aid)):
                raise ValueError(f'{path}: task {task_raw!r}: action id {aid!r} is not an integer')
            if not isinstance(aname, str) or not aname.strip():
                raise ValueError(f'{path}: task {task_raw!r}: action {aid} name = {aname!r}; '
                                 'expected a non-empty string')
            breaking = _line_breaking(aname)
            if breaking:  # the prompts list one action per line: "2: pour\n99: x" adds one
                raise ValueError(f'{path}: task {task_raw!r}: action {aid} name = {aname!r} '
                                 f'holds the control or line-separator character(s) '
                                 f'{", ".join(map(repr, breaking))}; expected a one-line name')
            if int(aid) in action_names:
                first = raw[action_task[int(aid)]][0]
                raise ValueError(f'{path}: task {task_raw!r}: action id {aid} ({aname!r}) is '
                                 f'already used by task {first!r} '
                                 f'({action_names[int(aid)]!r}); expected every action id once')
            ids.append(int(aid))
            action_names[int(aid)] = str(aname)
            action_task[int(aid)] = idx
        names.append(name)
        keys.append(key)
        task_actions.append(ids)
    num = len(action_names)
    if sorted(action_names) != list(range(num)):
        missing = sorted(set(range(max(action_names) + 1)) - set(action_names))
        raise ValueError(f'{path}: action ids must be 0..{num - 1}; missing {missing[:10]}')
    return Taxonomy(action_names=[action_names[i] for i in range(num)], task_names=names,
                    task_keys=keys, action_task=[action_task[i] for i in range(num)],
                    task_actions=task_actions, path=str(path))


def action_map(source: Taxonomy, target: Taxonomy) -> List[int]:
    """Target action id (N_src,) of each action id of ``source``, by action name.

    For a merged taxonomy (CrossTask's 105 actions, where a step shared by several tasks is
    one action): the annotations are written in ``source`` (the 133 actions the CSV step
    numbers index) and relabelled by name, as the ViterbiPlanNet authors'
    ``create_split.py`` does. Both taxonomies must list the same tasks; every source name
    must name exactly one target action.
    """
    if source.task_keys != target.task_keys:
        raise ValueError(f'{source.path} and {target.path} list different tasks '
                         f'({source.task_keys[:3]}... vs {target.task_keys[:3]}...); expected '
                         'the same tasks in the same order')
    by_name: dict = {}
    for action, name in enumerate(target.action_names):
        if name in by_name:
            raise ValueError(f'{target.path}: action name {name!r} is both id {by_name[name]} '
                             f'and id {action}; a name must identify one action to relabel by')
        by_name[name] = action
    missing = sorted({n for n in source.action_names if n not in by_name})
    if missing:
        raise ValueError(f'{source.path}: actions {missing[:5]} have no action of that name in '
                         f'{target.path}; expected every action name to be in both')
    return [by_name[name] for name in source.action_names]

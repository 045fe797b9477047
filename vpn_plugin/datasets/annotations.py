"""Readers for the annotation formats and the sliding-window builder.

Formats (see ../shared/data/README.md and the README section of this package):

* CrossTask ``tasks_primary.txt`` and ``annotations/<task>_<vid>.csv`` rows
  ``<step number (1-based within task)>,<start s>,<end s>``;
* video lists ``splits/{train,test}_videos.json``: CrossTask ``[{"vid", "task", "length"}]``,
  NIV ``[{"feature": "<task>_<NNNN>.npy", "task_id"}]``;
* window files of the unified protocol (``test_T3_133.json``, NIV ``train_T3.json``);
* our per-video JSON for new datasets: ``[{"vid", "task", "steps": [[start_s, end_s,
  action_id], ...], "feature": optional file stem (default "<task>_<vid>")}]`` where ``task``
  is a task key of the taxonomy or a task index and steps are in temporal order;
* COIN's per-video JSON (``coin_{train_70,test_30}.json`` of PDPP / KEPP / the ViterbiPlanNet
  authors): a list of one-key objects ``{vid: {"recipe_type": <task index>, "class": <task
  name>, "annotation": [{"id": "<1-based COIN step id>", "segment": [start_s, end_s],
  "label"}, ...]}}`` (a mapping ``{vid: record}``, or COIN.json's ``{"database": {...}}``,
  reads the same); global action id = ``int(id) - 1``, feature file
  ``<class>_<recipe_type>_<vid>``.

Values are checked, never coerced (``validation.py``): ids are integers, times finite seconds
in [0, 24 h], window names (``vid``, ``task``, ``task_name``, ``actions``) agree with the ids,
a video is listed once, a window's or video's steps are not in reverse temporal order. The
readers take an optional ``warnings`` (``AnnotationWarnings``) that counts what is merely
suspicious (steps partly out of temporal order, a window repeated in a window file).
"""
import csv
import functools
import hashlib
import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

from ..config_types import Count, NonNegativeInt, PathLike, checked_arguments
from ..errors import decimal_int, decimal_number, plain_text, read_json, read_text
from .taxonomy import Taxonomy
from .validation import (AnnotationWarnings, as_int, as_seconds, check_fields,
                         file_stem_problem, first_duplicates, normalized_name, temporal_order)

JSON_VIDEO_FIELDS = ('vid', 'task', 'steps', 'feature')  # our per-video JSON
VIDEO_LIST_FIELDS = (('vid', 'task', 'length'), ('feature', 'task_id'))  # CrossTask, NIV
COIN_RECORD_FIELDS = ('recipe_type', 'class', 'annotation', 'video_url', 'start', 'end',
                      'duration', 'subset')  # every field of COIN.json's records
COIN_STEP_FIELDS = ('id', 'segment', 'label')
WINDOW_FIELDS = ('id', 'instruction_len')  # a window file's sample
WINDOW_ID_FIELDS = ('vid', 'task', 'feature', 'legal_range', 'task_id', 'task_name', 'actions')


class BadVideoError(ValueError):
    """An error confined to one video; ``PlanningDataset(skip_bad_videos=True)`` skips it."""

    def __init__(self, vid: str, reason: str, message: str):
        super().__init__(message)
        self.vid = vid
        self.reason = reason


@dataclass
class VideoAnnotation:
    """All annotated steps of one video, in annotation order."""
    vid: str
    task: int
    feature: str  # feature file stem, e.g. '23521_GNJfDOoVORM'
    steps: List[Tuple[float, float, int]]  # (start s, end s, global action id)
    source: str = ''


@dataclass(frozen=True)
class Window:
    """T consecutive steps of a video; times are whole seconds (frame indices)."""
    vid: str
    task: int
    feature: str
    steps: Tuple[int, ...]
    times: Tuple[Tuple[int, int], ...]
    video_num_steps: int
    position: int = 0  # index of the first step within the video
    sample: int = -1  # index of the window in its window file (-1: slid over annotations)


def window_identity(window: Window) -> str:
    """What identifies a window whatever the order of the lists it was read from: its video
    (``vid``, feature stem) and its steps' places in it (whole-second times) and actions, as
    JSON. The prompting baselines draw their few-shot examples by it."""
    return json.dumps([window.vid, window.feature, [list(t) for t in window.times],
                       list(window.steps)], ensure_ascii=False)


def window_key(window: Window) -> int:
    """:func:`window_identity` as an integer in [0, 2**63) (the first 63 bits of its SHA-256),
    which a batch carries as an int64 (``data_samples['window_key']``)."""
    digest = hashlib.sha256(window_identity(window).encode('utf-8')).digest()
    return int.from_bytes(digest[:8], 'big') >> 1


def round_time(seconds: float) -> int:
    """Annotation time -> whole second, as in the unified protocol's window files."""
    return int(round(float(seconds)))


@checked_arguments
def read_crosstask_tasks(path: PathLike) -> dict:
    """``tasks_primary.txt`` -> {task id: (name, [ordered step names])}."""
    path = Path(path)
    lines = [ln.strip() for ln in _read_text(path).splitlines()]
    tasks, i = {}, 0
    while i < len(lines):
        if not lines[i]:
            i += 1
            continue
        block = lines[i:i + 5]
        if len(block) < 5 or not all(part.isascii() and part.isdigit()  # '١' is no task id
                                     for part in (block[0], block[3])):
            raise ValueError(f'{path}: line {i + 1}: expected a 5-line task block '
                             '(id, name, URL, number of steps, steps), got {block!r}')
        steps = block[4].split(',')
        if len(steps) != int(block[3]):
            raise ValueError(f'{path}: task {block[0]}: {block[3]} steps announced, '
                             f'{len(steps)} listed')
        tasks[block[0]] = (block[1], steps)
        i += 5
    return tasks


@checked_arguments
def read_crosstask_csv(path: PathLike, taxonomy: Taxonomy, task: NonNegativeInt, vid: str = '') -> list:
    """One CrossTask annotation CSV -> [(start, end, global action id)] in file order."""
    path = Path(path)
    actions = taxonomy.task_actions[task]
    steps = []
    for lineno, row in enumerate(csv.reader(_read_text(path, vid).splitlines()), 1):
        if not row:
            continue
        try:  # ASCII numbers only: int()/float() would read '1_7' as 17 or other digits
            number, start, end = (decimal_int(row[0]), decimal_number(row[1]),
                                  decimal_number(row[2]))
            if len(row) != 3 or None in (number, start, end):
                raise ValueError
        except (ValueError, IndexError):
            raise BadVideoError(vid, 'annotation row does not parse',
                                f'{path}: line {lineno}: row {row!r} does not parse; expected '
                                '"<step number>,<start s>,<end s>"') from None
        if not 1 <= number <= len(actions):
            raise BadVideoError(vid, 'action id outside the taxonomy',
                                f'{path}: line {lineno}: step number {number} is outside task '
                                f'{taxonomy.task_keys[task]} (1..{len(actions)} in '
                                f'{taxonomy.path})')
        _check_times(path, vid, f'line {lineno}', start, end)
        steps.append((start, end, actions[number - 1]))
    return steps


def check_step_order(path, vid: str, where: str, starts, warnings=None, kind='videos') -> None:
    """Steps in reverse temporal order (every step starts before the previous one) are a
    ``BadVideoError``; steps partly out of order a counted warning (``warnings``, of
    ``kind`` 'videos' or 'windows'), as in a few real annotations."""
    order = temporal_order(list(starts))
    if order == 'reversed':
        raise BadVideoError(vid, 'steps in reverse temporal order',
                            f'{path}: {where} (vid {plain_text(vid)}): steps in reverse temporal '
                            f'order (start times {list(starts)}); expected the steps in the order '
                            'they happen')
    if order == 'unordered' and warnings is not None:
        warnings.add(f'{kind} with steps out of temporal order',
                     f'{path}: {where} (vid {plain_text(vid)}): start times {list(starts)}')


def count_suspicious(videos: Sequence[VideoAnnotation], taxonomy: Taxonomy,
                     warnings: Optional[AnnotationWarnings]) -> None:
    """Count (``warnings``) what is kept but changes the data silently: a video without
    steps (an empty CrossTask CSV: no window), a video with a repeated step row (a PKG
    self-loop), a task with two actions of one name (tasks and plans read them as one)."""
    if warnings is None:
        return
    for video in videos:
        where = f'{video.source}: vid {plain_text(video.vid)}'
        if not video.steps:
            warnings.add('videos without steps (no window)', where)
        repeated = first_duplicates(list(video.steps))
        if repeated:
            again, first = next(iter(repeated.items()))
            warnings.add('videos with repeated step rows',
                         f'{where}: step {again} repeats step {first} {video.steps[first]}')
    for task, actions in enumerate(taxonomy.task_actions):
        same = first_duplicates([normalized_name(taxonomy.action_names[a]) for a in actions])
        if same:
            again, first = next(iter(same.items()))
            warnings.add('tasks with two actions of one name',
                         f'{taxonomy.path}: task {taxonomy.task_keys[task]}: actions '
                         f'{actions[first]} ({taxonomy.action_names[actions[first]]!r}) and '
                         f'{actions[again]} ({taxonomy.action_names[actions[again]]!r}) are one '
                         'name (case, spaces and punctuation ignored)')


def check_crosstask_step_order(taxonomy: Taxonomy) -> None:
    """CSV step number i+1 is read as the task's i-th action in the taxonomy file's order: the
    released taxonomy lists each task's actions in ascending id order. A task listed in
    another order (a JSON object rewritten or reordered by a tool) would relabel every step
    without a word: refused unless ``tasks_primary`` names the order
    (:func:`check_crosstask_taxonomy`)."""
    for k, actions in enumerate(taxonomy.task_actions):
        if list(actions) != sorted(actions):
            raise ValueError(
                f'{taxonomy.path}: task {taxonomy.file_keys[k]!r} lists its action ids in the '
                f'order {list(actions)[:8]}{" ..." if len(actions) > 8 else ""}; CrossTask CSV '
                'step i+1 is read as the i-th action listed, so expected ascending ids (as the '
                'released taxonomy lists them), or give the dataset tasks_primary '
                '(crosstask_release/tasks_primary.txt), whose step names fix the order')


def check_crosstask_taxonomy(taxonomy: Taxonomy, tasks_primary: dict) -> None:
    """CSV step numbers index the task's actions: the taxonomy must list every step (and
    tasks_primary.txt must list every task of the taxonomy, else the check skips it)."""
    missing = [key for key in taxonomy.task_keys if key not in tasks_primary]
    if missing:
        raise ValueError(f'tasks_primary.txt lists {len(tasks_primary)} tasks and not the '
                         f'task(s) {missing[:5]} of {taxonomy.path}; expected every task of the '
                         'taxonomy (a truncated file?)')
    for k, key in enumerate(taxonomy.task_keys):
        if key in tasks_primary and len(tasks_primary[key][1]) != len(taxonomy.task_actions[k]):
            raise ValueError(
                f'{taxonomy.path}: task {key} has {len(taxonomy.task_actions[k])} actions but '
                f'tasks_primary.txt lists {len(tasks_primary[key][1])} steps; CrossTask CSV '
                'step numbers need the full (133-action) taxonomy')
        if key in tasks_primary:  # step i+1 is the i-th action listed: the names must agree
            names = [taxonomy.action_names[a] for a in taxonomy.task_actions[k]]
            steps = tasks_primary[key][1]
            wrong = next((i for i, (a, b) in enumerate(zip(names, steps))
                          if normalized_name(a) != normalized_name(b)), None)
            if wrong is not None:
                raise ValueError(
                    f'{taxonomy.path}: task {key} lists action '
                    f'{taxonomy.task_actions[k][wrong]} ({names[wrong]!r}) as step {wrong + 1}, '
                    f'but tasks_primary.txt names step {wrong + 1} {steps[wrong]!r}; expected '
                    "the task's actions in the order of its steps (CrossTask CSV step numbers "
                    'index them)')


@checked_arguments
def read_video_list(path: PathLike, taxonomy: Taxonomy) -> List[dict]:
    """Video list JSON -> [{'vid', 'task' (index), 'feature' (file stem)}].

    Accepts the CrossTask ``{"vid", "task"}`` and the NIV ``{"feature", "task_id"}`` entries.
    """
    path = Path(path)
    entries = read_json_file(path)
    if not isinstance(entries, list):
        raise ValueError(f'{path}: expected a JSON list of videos, got {type(entries).__name__}')
    videos = []
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and 'vid' in entry and 'task' in entry:
            check_fields(entry, VIDEO_LIST_FIELDS[0], f'{path}: entry {i}')
            if not isinstance(entry['vid'], str) or not entry['vid']:  # null: '<task>_None.csv'
                raise ValueError(f'{path}: entry {i}: field "vid" = {entry["vid"]!r}; expected '
                                 'the video id (a non-empty string)')
            task = _task_of(path, f'entry {i}: field "task"', entry['task'], taxonomy)
            stem = f"{entry['task']}_{entry['vid']}"
            if file_stem_problem(stem):
                raise ValueError(f'{path}: entry {i}: fields "task", "vid" = {entry["task"]!r}, '
                                 f'{entry["vid"]!r}: {file_stem_problem(stem)}')
            videos.append(dict(vid=str(entry['vid']), task=task, feature=stem, entry=i,
                               **({'length': entry['length']} if 'length' in entry else {})))
        elif isinstance(entry, dict) and 'feature' in entry and 'task_id' in entry:
            check_fields(entry, VIDEO_LIST_FIELDS[1], f'{path}: entry {i}')
            _check_text_fields(path, f'entry {i}', entry['feature'],
                               (('feature', entry['feature'], 'a feature file name'),))
            stem = Path(str(entry['feature'])).stem
            if file_stem_problem(stem):
                raise ValueError(f'{path}: entry {i}: field "feature" = {entry["feature"]!r}: '
                                 f'{file_stem_problem(stem)}')
            task = _task_of(path, f'entry {i}: field "task_id"', entry['task_id'], taxonomy)
            videos.append(dict(vid=stem, task=task, feature=stem))
        else:
            raise ValueError(f'{path}: entry {i} = {entry!r}: expected {{"vid", "task"}} or '
                             '{"feature", "task_id"}')
    _refuse_duplicate_videos(path, [v['feature'] for v in videos])
    return videos


def _refuse_duplicate_videos(path, stems) -> None:
    """A video listed twice would count its windows twice: a ``ValueError``."""
    repeated = first_duplicates(stems)
    if repeated:
        index, first = next(iter(repeated.items()))
        raise ValueError(f'{path}: entry {index}: video {stems[index]!r} is already entry '
                         f'{first} ({len(repeated)} repeated entries); expected each video once')


def check_listed_length(video_list, entry: dict, csv_path, rows: int) -> None:
    """A CrossTask video list's ``length`` (its steps) must be the rows of the video's CSV
    (all 2,748 official entries agree): a CSV that lost rows would give fewer windows."""
    if 'length' not in entry:
        return
    length = entry['length']
    if isinstance(length, bool) or not isinstance(length, int):  # '5' was "'5', but ... 5 rows"
        raise BadVideoError(entry['vid'], 'steps not as listed',
                            f'{video_list}: entry {entry["entry"]} (vid {entry["vid"]}): '
                            f'field "length" = {length!r} ({type(length).__name__}); expected '
                            f'an integer, the number of step rows of {csv_path} ({rows})')
    if length != rows:
        raise BadVideoError(entry['vid'], 'steps not as listed',
                            f'{video_list}: entry {entry["entry"]} (vid '
                            f'{plain_text(entry["vid"])}): '
                            f'field "length" = {length!r}, but {csv_path} has {rows} step rows; '
                            'expected the number of rows of its CSV (a truncated CSV, or the '
                            'list of another release?)')


def crosstask_videos(video_list, annotation_dir, taxonomy: Taxonomy, tasks_primary=None,
                     warnings: Optional[AnnotationWarnings] = None
                     ) -> Tuple[List[VideoAnnotation], List[BadVideoError]]:
    """Videos of a CrossTask video list with their CSV steps; returns (videos, bad videos)."""
    if tasks_primary is not None:
        check_crosstask_taxonomy(taxonomy, read_crosstask_tasks(tasks_primary))
    else:
        check_crosstask_step_order(taxonomy)
    videos, bad = [], []
    for entry in read_video_list(video_list, taxonomy):
        csv_path = Path(annotation_dir) / f"{entry['feature']}.csv"
        try:
            steps = read_crosstask_csv(csv_path, taxonomy, entry['task'], entry['vid'])
            check_listed_length(video_list, entry, csv_path, len(steps))
            check_step_order(csv_path, entry['vid'], 'rows', [s for s, _, _ in steps], warnings)
        except BadVideoError as err:
            bad.append(err)
            continue
        videos.append(VideoAnnotation(entry['vid'], entry['task'], entry['feature'], steps,
                                      str(csv_path)))
    return videos, bad


@checked_arguments
def read_json_annotations(path: PathLike, taxonomy: Taxonomy,
                          warnings: Optional[AnnotationWarnings] = None
                          ) -> Tuple[List[VideoAnnotation], List[BadVideoError]]:
    """Our per-video JSON (module docstring) -> (videos, bad videos)."""
    path = Path(path)
    entries = read_json_file(path)
    if not isinstance(entries, list):
        raise ValueError(f'{path}: expected a JSON list of videos')
    videos, bad = [], []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not {'vid', 'task', 'steps'} <= set(entry):
            raise ValueError(f'{path}: entry {i}: expected an object with "vid", "task", "steps"')
        check_fields(entry, JSON_VIDEO_FIELDS, f'{path}: entry {i} (vid '
                                               f'{plain_text(entry["vid"])})')
        try:
            videos.append(_json_video(path, i, entry, taxonomy, warnings))
        except BadVideoError as err:
            bad.append(err)
    _refuse_duplicate_videos(path, [_json_stem(entry) for entry in entries])
    return videos, bad


def _json_stem(entry: dict) -> str:
    return str(entry.get('feature', f"{entry['task']}_{entry['vid']}"))


def json_video_ids(path) -> set:
    """The video ids of our per-video JSON (e.g. of the other split)."""
    entries = read_json_file(Path(path))
    if not isinstance(entries, list):
        raise ValueError(f'{path}: expected a JSON list of videos')
    return {str(e['vid']) for e in entries if isinstance(e, dict) and 'vid' in e}


@checked_arguments
def read_coin_annotations(path: PathLike, taxonomy: Taxonomy,
                          warnings: Optional[AnnotationWarnings] = None
                          ) -> Tuple[List[VideoAnnotation], List[BadVideoError]]:
    """COIN's per-video JSON (module docstring) -> (videos, bad videos), in file order.

    A record that is not an object with ``recipe_type``, ``class`` and a list ``annotation``
    raises ValueError naming the file, entry and field; a bad video (task index outside the
    taxonomy, ``class`` not the task's name, an unknown step id or one of another task,
    inverted / negative / non-finite segments, steps in reverse temporal order, a video listed
    twice) is a ``BadVideoError``; steps partly out of order are counted in ``warnings``.
    """
    path = Path(path)
    videos, bad, seen = [], [], {}
    for i, vid, record in _coin_records(path):
        try:
            if vid in seen:
                raise BadVideoError(vid, 'video listed twice',
                                    f'{path}: entry {i}: video {plain_text(vid)} is already entry '
                                    f'{seen[vid]}; expected each video once')
            seen[vid] = i
            videos.append(_coin_video(path, i, vid, record, taxonomy, warnings))
        except BadVideoError as err:
            bad.append(err)
    return videos, bad


def coin_video_ids(path) -> set:
    """The video ids of a COIN file (shape checked, steps not), e.g. of the other split."""
    return {vid for _, vid, _ in _coin_records(Path(path))}


def _coin_records(path: Path):
    """(entry index, vid, record) of each video of a COIN file; ValueError for a bad shape."""
    stat = path.stat() if path.exists() else None
    return _parsed_coin_records(path, stat and (stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=4)
def _parsed_coin_records(path: Path, version) -> tuple:
    """``_coin_records`` of one version (size, mtime) of a file: both splits' datasets read
    each file (their own split, the other split's ids), which is parsed once. The records
    are shared: readers never change them."""
    return tuple(_iter_coin_records(path))


def _iter_coin_records(path: Path):
    data = read_json_file(path)
    if isinstance(data, dict) and 'database' in data:  # COIN's own {"database": {vid: record}}
        data = data['database']  # a list there was an AttributeError traceback
    if isinstance(data, dict):
        entries = [{vid: record} for vid, record in data.items()]
    elif isinstance(data, list):
        entries = data
    else:
        raise ValueError(f'{path}: expected a JSON list of {{vid: record}} objects (COIN '
                         f'per-video format), got {type(data).__name__}')
    first_subset = None  # (entry, vid, value): COIN's own "subset" of the file's first record
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or len(entry) != 1:
            raise ValueError(f'{path}: entry {i}: expected a one-key object {{vid: record}}, '
                             f'got {str(entry)[:200]}')
        vid, record = next(iter(entry.items()))
        missing = [k for k in ('recipe_type', 'class', 'annotation')
                   if not isinstance(record, dict) or k not in record]
        if missing or not isinstance(record['annotation'], list):
            raise ValueError(f'{path}: entry {i} (vid {plain_text(vid)}): expected a record with '
                             f'"recipe_type", "class" and a list "annotation"; missing or '
                             f'wrong: {missing or ["annotation"]}')
        check_fields(record, COIN_RECORD_FIELDS, f'{path}: entry {i} (vid {plain_text(vid)})')
        if 'subset' in record:  # a 'testing' video inside a training file: a leak
            first_subset = first_subset or (i, vid, record['subset'])
            if record['subset'] != first_subset[2]:
                raise ValueError(f'{path}: entry {i} (vid {plain_text(vid)}): field "subset" = '
                                 f'{record["subset"]!r} but entry {first_subset[0]} (vid '
                                 f'{plain_text(first_subset[1])}) says {first_subset[2]!r}; '
                                 f'expected the '
                                 'videos of one split in a file (a video of the other split '
                                 'copied in?)')
        yield i, str(vid), record


def _coin_video(path, i, vid, record, taxonomy, warnings=None) -> VideoAnnotation:
    where = f'entry {i}'
    task = record['recipe_type']
    if isinstance(task, bool) or not isinstance(task, int) or not 0 <= task < taxonomy.num_tasks:
        raise BadVideoError(vid, 'task id outside the taxonomy',
                            f'{path}: {where} (vid {plain_text(vid)}): field "recipe_type" = '
                            f'{task!r} is not '
                            f'a task index of the taxonomy {taxonomy.path} '
                            f'(0..{taxonomy.num_tasks - 1}); expected an integer in that range')
    if str(record['class']) != taxonomy.task_names[task]:
        raise BadVideoError(vid, 'task name does not match',
                            f'{path}: {where} (vid {plain_text(vid)}): field "class" = '
                            f'{record["class"]!r} '
                            f'but task {task} of {taxonomy.path} is '
                            f'{taxonomy.task_names[task]!r}')
    steps = [_coin_step(path, f'{where}: annotation[{j}]', vid, step, task, taxonomy)
             for j, step in enumerate(record['annotation'])]
    check_step_order(path, vid, f'{where}: field "annotation"', [s for s, _, _ in steps],
                     warnings)
    stem = f"{record['class']}_{task}_{vid}"
    if file_stem_problem(stem):
        raise BadVideoError(vid, 'feature name is a path', f'{path}: {where} (vid '
                                                           f'{plain_text(vid)}): '
                            f'{file_stem_problem(stem)}')
    return VideoAnnotation(vid, task, stem, steps, str(path))


def _coin_step(path, where, vid, step, task, taxonomy) -> Tuple[float, float, int]:
    """One COIN step -> (start, end, global action id = COIN id - 1), checked."""
    try:
        raw = step['id']
        action = _coin_id(raw) - 1
        start, end = step['segment']  # numbers of seconds, checked below (never coerced)
    except (ValueError, TypeError, KeyError) as err:
        raise BadVideoError(vid, 'annotation row does not parse',
                            f'{path}: {where} (vid {plain_text(vid)}) = {str(step)[:200]}: '
                            f'{err!r}; '
                            'expected {"id": "<COIN step id>", "segment": [start_s, end_s]}'
                            ) from None
    check_fields(step, COIN_STEP_FIELDS, f'{path}: {where} (vid {plain_text(vid)})')
    where = f'{where} (field "id" = {raw!r}: action id {action} = COIN id - 1)'
    _check_step(path, vid, where, start, end, action, taxonomy)
    _check_action_task(path, vid, where, action, task, taxonomy)
    label = step.get('label')  # COIN's own name of the step: all 39,409 agree with the taxonomy
    # compared as names are everywhere (a window file's "actions" too): case, spaces and
    # punctuation ignored
    if label is not None and (normalized_name(label)
                              != normalized_name(taxonomy.action_names[action])):
        raise BadVideoError(vid, 'step label contradicts its id',
                            f'{path}: {where} (vid {plain_text(vid)}): field "label" = {label!r}, '
                            f'but action '
                            f'{action} of {taxonomy.path} is {taxonomy.action_names[action]!r}; '
                            'expected the name of its id (an edited id or label?)')
    return float(start), float(end), action


def _coin_id(raw) -> int:
    """A COIN step id: a JSON integer or its decimal text ("373"); ValueError for any other
    spelling int() would take ("3_7_3", Arabic-Indic digits, "373.0", true)."""
    if isinstance(raw, str) and decimal_int(raw) is not None:
        return decimal_int(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    raise ValueError(f'COIN step id {raw!r} is not a decimal integer')


def split_overlap(videos: Sequence[VideoAnnotation], others: set, path, other_path
                  ) -> Tuple[List[VideoAnnotation], List[BadVideoError]]:
    """Videos of ``path`` whose vid is not in ``others`` (the vids of the other split,
    ``other_path``), and a ``BadVideoError`` for each that is (a video belongs to one split)."""
    kept, bad = [], []
    for video in videos:
        if video.vid in others:
            bad.append(BadVideoError(video.vid, 'video in both splits',
                                     f'{path}: video {plain_text(video.vid)} is also listed in '
                                     f'the other '
                                     f'split {other_path}; expected each video in one split'))
        else:
            kept.append(video)
    return kept, bad


def _task_of(path, where: str, key, taxonomy: Taxonomy) -> int:
    """Task index of a task key or index; ValueError naming the file and field otherwise."""
    try:
        return taxonomy.task_index(key)
    except ValueError as err:
        raise ValueError(f'{path}: {where}: {err}') from None


def _check_text_fields(path, where: str, vid, fields) -> None:
    """Each ``(name, value, what)`` of ``fields`` must be a text or an integer: a list, null
    or bool would be read through str() (``["a.npy"]`` as the file ``a``, null as 'None')."""
    for name, value, what in fields:
        if isinstance(value, bool) or not isinstance(value, (str, int)):  # never str() of a list
            raise BadVideoError(str(vid), 'annotation row does not parse',
                                f'{path}: {where}: field "{name}" = {value!r}; expected a '
                                f'text or an integer ({what})')


def _json_video(path, i, entry, taxonomy, warnings=None) -> VideoAnnotation:
    _check_text_fields(path, f'entry {i}', entry['vid'], (
        ('vid', entry['vid'], 'a video id'),
        ('feature', entry.get('feature', ''), 'a file stem, or no field')))
    vid = str(entry['vid'])
    if not vid.strip():  # its windows, records and default feature stem would name no video
        raise BadVideoError(vid, 'annotation row does not parse',
                            f'{path}: entry {i}: field "vid" = {entry["vid"]!r}; expected a '
                            'non-empty video id')
    task = _task_of(path, f'entry {i} (vid {plain_text(vid)}): field "task"', entry['task'],
                    taxonomy)
    if file_stem_problem(_json_stem(entry)):
        field = 'field "feature"' if 'feature' in entry else '"<task>_<vid>"'
        raise BadVideoError(vid, 'feature name is a path', f'{path}: entry {i} (vid '
                                                           f'{plain_text(vid)}): '
                            f'{field}: {file_stem_problem(_json_stem(entry))}')
    if not isinstance(entry['steps'], list):
        raise BadVideoError(vid, 'annotation row does not parse',
                            f'{path}: entry {i} (vid {plain_text(vid)}): field "steps" must be a '
                            f'list of '
                            f'[start_s, end_s, action_id], got {entry["steps"]!r}')
    steps = []
    for j, step in enumerate(entry['steps']):
        start, end, action = step_values(path, vid, f'entry {i}: steps[{j}]', step)
        _check_action(path, vid, f'entry {i}: steps[{j}]', action, taxonomy)
        _check_action_task(path, vid, f'entry {i}: steps[{j}]', action, task, taxonomy)
        steps.append((start, end, action))
    check_step_order(path, vid, f'entry {i}: steps', [s for s, _, _ in steps], warnings)
    return VideoAnnotation(vid, task, _json_stem(entry), steps, str(path))


def step_values(path, vid: str, where: str, step) -> Tuple[float, float, int]:
    """``(start, end, action)`` of a JSON step ``[start_s, end_s, action_id]``, not coerced:
    times are numbers of seconds, the action an integer (BadVideoError naming the value)."""
    if not isinstance(step, (list, tuple)) or len(step) != 3:
        raise BadVideoError(vid, 'annotation row does not parse',
                            f'{path}: {where} (vid {plain_text(vid)}) = {step!r}; expected '
                            '[start_s, end_s, action_id]')
    place = f'{path}: {where} (vid {plain_text(vid)})'
    start = _seconds(vid, f'{place}: step start time', step[0])
    end = _seconds(vid, f'{place}: step end time', step[1])
    if end < start:
        raise BadVideoError(vid, 'step time outside the video',
                            f'{place}: step times start={start}, end={end} are not '
                            '0 <= start <= end')
    try:
        action = as_int(step[2], f'{place}: action id')
    except ValueError as err:
        raise BadVideoError(vid, 'annotation row does not parse', str(err)) from None
    return start, end, action


def _seconds(vid: str, where: str, value) -> float:
    """``validation.as_seconds`` as a BadVideoError whose reason says what is wrong."""
    try:
        return as_seconds(value, where)
    except ValueError as err:
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        reason = ('annotation row does not parse' if not number else
                  'step time not a finite number' if not math.isfinite(value) else
                  'step time outside the video')
        raise BadVideoError(vid, reason, str(err)) from None


def _check_step(path, vid, where, start, end, action, taxonomy) -> None:
    _check_action(path, vid, where, action, taxonomy)
    _check_times(path, vid, f'{where} (vid {plain_text(vid)})', start, end)


def _check_action(path, vid, where, action, taxonomy) -> None:
    if not 0 <= action < taxonomy.num_actions:
        raise BadVideoError(vid, 'action id outside the taxonomy',
                            f'{path}: {where} (vid {plain_text(vid)}): action id {action} is '
                            f'outside the '
                            f'taxonomy {taxonomy.path} (0..{taxonomy.num_actions - 1})')


def _check_times(path, vid, where, start, end) -> None:
    """Finite ``0 <= start <= end <= validation.MAX_SECONDS``; BadVideoError naming the
    file, place and values."""
    for name, value in (('start', start), ('end', end)):
        _seconds(vid, f'{path}: {where}: step {name} time', value)
    if end < start:
        raise BadVideoError(vid, 'step time outside the video',
                            f'{path}: {where}: step times start={start}, end={end} '
                            'are not 0 <= start <= end')


def _check_action_task(path, vid, where, action, task, taxonomy) -> None:
    if action not in taxonomy.task_actions[task]:
        raise BadVideoError(vid, 'action of another task',
                            f'{path}: {where} (vid {plain_text(vid)}): action id {action} '
                            f'({taxonomy.action_names[action]!r}) belongs to task '
                            f'{taxonomy.task_keys[taxonomy.action_task[action]]!r}, not to the '
                            f"sample's task {taxonomy.task_keys[task]!r} (task_id {task})")


@checked_arguments
def build_windows(videos: Iterable[VideoAnnotation], horizon: Count) -> List[Window]:
    """Slide a length-``horizon`` window over each video's steps (annotation order)."""
    windows = []
    for video in videos:
        n = len(video.steps)
        times = tuple((round_time(s), round_time(e)) for s, e, _ in video.steps)
        actions = tuple(a for _, _, a in video.steps)
        for p in range(n - horizon + 1):
            windows.append(Window(video.vid, video.task, video.feature, actions[p:p + horizon],
                                  times[p:p + horizon], n, p))
    return windows


def chain_windows(windows: Sequence[Window]) -> List[VideoAnnotation]:
    """Per-video step lists from ALL sliding windows of each video (window p+1 = window p
    shifted by one step, in file order); ValueError when a video's windows do not chain."""
    videos: dict = {}
    for w in windows:
        rows = [(float(s), float(e), a) for (s, e), a in zip(w.times, w.steps)]
        video = videos.get(w.feature)
        if video is None:
            videos[w.feature] = VideoAnnotation(w.vid, w.task, w.feature, rows, 'windows')
        elif len(rows) > 1 and video.steps[-(len(rows) - 1):] == rows[:-1]:
            video.steps.append(rows[-1])
        else:
            raise ValueError(f'windows of {w.feature} do not chain: {rows} does not continue '
                             f'{video.steps[-(len(rows) - 1):]}')
    return list(videos.values())


@checked_arguments
def read_window_file(path: PathLike, taxonomy: Taxonomy, horizon: Count,
                     warnings: Optional[AnnotationWarnings] = None
                     ) -> Tuple[List[Window], List[BadVideoError]]:
    """A unified-protocol window file -> (windows, bad-video errors).

    A wrong shape (not a list, missing ``id``/``legal_range``, rows not ``[start, end,
    action]``, not ``horizon`` rows) raises ValueError naming the file, sample and field; a
    wrong value of one sample (module docstring) is a bad-video error; a repeated window or
    steps partly out of temporal order are counted in ``warnings``.
    """
    path = Path(path)
    samples = read_json_file(path)
    if not isinstance(samples, list):
        raise ValueError(f'{path}: expected a JSON list of window samples')
    windows, bad, seen, task_of = [], [], {}, {}
    for i, sample in enumerate(samples):
        meta = sample.get('id') if isinstance(sample, dict) else None
        if not isinstance(meta, dict) or 'legal_range' not in meta or 'feature' not in meta:
            raise ValueError(f'{path}: sample {i}: expected {{"id": {{"feature", "legal_range", '
                             '...}}, "instruction_len"}}')
        check_fields(sample, WINDOW_FIELDS, f'{path}: sample {i}')
        check_fields(meta, WINDOW_ID_FIELDS, f'{path}: sample {i}: field "id"')
        rows = meta['legal_range']
        if (not isinstance(rows, list) or len(rows) != horizon
                or not all(isinstance(r, list) and len(r) == 3 for r in rows)):
            raise ValueError(f'{path}: sample {i}: field "legal_range" must be {horizon} rows of '
                             f'[start_s, end_s, action_id] (horizon {horizon}), got {rows!r}')
        try:
            window = _window_from_sample(path, i, sample, meta, taxonomy, seen, warnings)
            _check_one_task_per_video(path, window, task_of)
            windows.append(window)
        except BadVideoError as err:
            bad.append(err)
    _count_repeated_windows(path, windows, warnings)
    return windows, bad


def _check_one_task_per_video(path, window: Window, task_of: dict) -> None:
    """Every window of one feature file (one video) has the same task: a window whose
    ``feature`` names another task's video would be scored on that video's observations."""
    first = task_of.setdefault(window.feature, (window.task, window.sample))
    if first[0] != window.task:
        raise BadVideoError(window.vid, 'video annotated with two tasks',
                            f'{path}: sample {window.sample} (feature {window.feature}): task_id '
                            f'{window.task}, but sample {first[1]} gives the same video task_id '
                            f'{first[0]}; expected one task per video')


def _count_repeated_windows(path, windows: List[Window], warnings) -> None:
    """The real files repeat a few windows (CrossTask test T=3: 3, from doubled CSV rows):
    kept, but counted."""
    if warnings is None:
        return
    keys = [(w.feature, w.steps, w.times) for w in windows]
    for index, first in first_duplicates(keys).items():
        warnings.add('duplicate windows', f'{path}: sample {windows[index].sample} repeats '
                                          f'sample {windows[first].sample} '
                                          f'({windows[index].feature})')


def _window_from_sample(path, i, sample, meta, taxonomy, seen, warnings=None) -> Window:
    _check_text_fields(path, f'sample {i}', meta.get('vid', meta['feature']), (
        (name, meta[name], what) for name, what in (
            ('feature', 'a feature file name'), ('vid', 'a video id'), ('task', 'a task key'),
            ('task_name', 'a task name')) if name in meta))
    stem = Path(str(meta['feature'])).stem
    vid = str(meta.get('vid', stem))
    if file_stem_problem(stem):
        raise BadVideoError(vid, 'feature name is a path', f'{path}: sample {i} (vid '
                                                           f'{plain_text(vid)}): '
                            f'field "feature" = {meta["feature"]!r}: {file_stem_problem(stem)}')
    rows = [step_values(path, vid, f'sample {i}: legal_range[{j}]', row)
            for j, row in enumerate(meta['legal_range'])]
    task = _sample_task(path, i, vid, meta, taxonomy)
    video_num_steps = _instruction_len(path, i, vid, sample, len(rows))
    for j, (_, _, a) in enumerate(rows):
        _check_action(path, vid, f'sample {i}: legal_range[{j}]', a, taxonomy)
        _check_action_task(path, vid, f'sample {i}: legal_range[{j}]', a, task, taxonomy)
    _check_window_names(path, i, vid, meta, stem, task, [a for _, _, a in rows], taxonomy)
    check_step_order(path, vid, f'sample {i}: legal_range', [s for s, _, _ in rows],
                     warnings, kind='windows')
    position = seen.get(stem, 0)
    seen[stem] = position + 1
    return Window(vid, task, stem, tuple(a for _, _, a in rows),
                  tuple((round_time(s), round_time(e)) for s, e, _ in rows),
                  video_num_steps, position, i)


def _sample_task(path, i, vid, meta, taxonomy) -> int:
    """The task index of a window sample: its integer ``task_id`` (else its ``task`` key)."""
    where = f'{path}: sample {i} (vid {plain_text(vid)}): field'
    if 'task_id' not in meta and 'task' not in meta:
        raise BadVideoError(vid, 'annotation row does not parse',
                            f'{where}s "task_id" and "task" are both missing')
    try:
        if 'task_id' not in meta:
            return taxonomy.task_index(meta['task'])
        task = as_int(meta['task_id'], f'{where} "task_id"')
    except ValueError as err:
        message = str(err) if 'task_id' in meta else f'{where} "task": {err}'
        raise BadVideoError(vid, 'annotation row does not parse', message) from None
    if not 0 <= task < taxonomy.num_tasks:
        raise BadVideoError(vid, 'task id outside the taxonomy',
                            f'{where} "task_id" = {task} is outside the taxonomy '
                            f'{taxonomy.path} (0..{taxonomy.num_tasks - 1})')
    return task


def _instruction_len(path, i, vid, sample, horizon: int) -> int:
    """``instruction_len`` (steps in the video; 0 when absent): an integer >= the window's."""
    if 'instruction_len' not in sample:
        return 0
    where = f'{path}: sample {i} (vid {plain_text(vid)}): field "instruction_len"'
    try:
        steps = as_int(sample['instruction_len'], where)
    except ValueError as err:
        raise BadVideoError(vid, 'annotation row does not parse', str(err)) from None
    if steps < horizon:
        raise BadVideoError(vid, 'window names contradict ids',
                            f'{where} = {steps}: fewer steps than the window\'s {horizon}; '
                            'expected the number of steps of the whole video')
    return steps


def _names_task(taxonomy: Taxonomy, key, task: int) -> bool:
    """Whether ``key`` names task ``task`` in any spelling ``Taxonomy.task_index`` reads (its
    key, name, file key '0_make_tea' or index: the per-video JSON's "task" rule)."""
    try:
        return taxonomy.task_index(key) == task
    except ValueError:
        return False


def _check_window_names(path, i, vid, meta, stem, task, actions, taxonomy) -> None:
    """The names a window sample carries besides its ids must agree with them: ``vid`` with
    the feature file, ``task`` (key) and ``task_name`` with ``task_id``, ``actions`` with the
    action ids (names compared as lower-case alphanumerics)."""
    where = f'{path}: sample {i} (vid {plain_text(vid)}): field'
    problems = []
    if 'vid' in meta and stem != vid and not stem.endswith(f'_{vid}'):
        problems.append(f'"vid" = {vid!r} contradicts "feature" = {meta["feature"]!r}')
    if 'task' in meta and 'task_id' in meta and not _names_task(taxonomy, meta['task'], task):
        problems.append(f'"task" = {meta["task"]!r} contradicts "task_id" = {task} (task '
                        f'{taxonomy.task_keys[task]!r})')
    if ('task_name' in meta and normalized_name(str(meta['task_name']))
            != normalized_name(taxonomy.task_names[task])):
        problems.append(f'"task_name" = {meta["task_name"]!r} contradicts "task_id" = {task} '
                        f'({taxonomy.task_names[task]!r})')
    names = [taxonomy.action_names[a] for a in actions]
    given = meta.get('actions')
    if given is not None and (not isinstance(given, list)
                              or [normalized_name(str(n)) for n in given]
                              != [normalized_name(n) for n in names]):
        problems.append(f'"actions" = {given!r} contradicts the action ids {actions} '
                        f'({names})')
    if problems:
        raise BadVideoError(vid, 'window names contradict ids', f'{where} '
                            + '; '.join(problems) + f' in {taxonomy.path}')


def _read_text(path: Path, vid: Optional[str] = None) -> str:
    try:  # errors.read_text: a BOM (a Windows editor's) is no part of the text
        return read_text(path, 'annotation file')
    except (OSError, ValueError) as err:
        if vid is not None:
            raise BadVideoError(vid, 'annotation file missing or unreadable',
                                f'cannot read annotation file {path}: {err}') from err
        raise ValueError(f'cannot read {path}: {err}') from err


def read_json_file(path: Path):
    """The parsed JSON of ``path`` (``errors.read_json``: a missing, unreadable or malformed
    file is an error naming it, the line and column); an object with a key twice (JSON keeps
    the last value and drops the other without a word) is a ``ValueError`` naming the file,
    the key, both values and the object's feature / vid / id where it has one."""
    return read_json(path, 'annotation file')


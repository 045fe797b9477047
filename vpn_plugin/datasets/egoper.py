"""EgoPER (egocentric procedures with errors) -> the plugin's custom JSON dataset
(library of tools/convert_egoper.py).

EgoPER's ``annotation.json`` (times in seconds)::

    {task: {"segments": [{"video_id": str,
                          "labels": {"time_stamp": [[start_s, end_s], ...],
                                     "action": [action idx, ...],        # 0 = background
                                     "action_type": [type idx, ...],     # 0 = normal, > 0 an error kind
                                     "error_description": [str, ...]}}, ...],
            "action2idx": {action name: idx}, "actiontype2idx": {type name: idx}}}

and its split lists ``training.txt`` / ``test.txt`` (one video id per line), either in the
split folder itself or one per task (``<split dir>/<task>/training.txt``).

Output (``configs/_base_/datasets/custom_json.py`` describes the format):
``taxonomy.json`` (task k = the k-th task of annotation.json; its non-background actions in
``action2idx`` order get consecutive global ids), ``train.json`` / ``test.json`` (per video:
its segments in file order, background dropped, error segments kept or dropped as
``errors`` says), ``conversion.json`` (the choices and counts) and ``dataset.py`` (a dataset
config for them that records ``errors`` in every protocol results row: ``dataset_variant``).
"""
import json
import math
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ..data_paths import REPO_ROOT
from ..errors import plain_text, read_text
from ..tool_choices import ERROR_CHOICES
from .annotations import read_json_file
from .validation import MAX_SECONDS, file_stem_problem, normalized_name

BACKGROUND = 0
BACKGROUND_NAMES = ('bg', 'background')  # action2idx's name of idx 0 (normalized)
SPLIT_FILES = {'train': 'training.txt', 'test': 'test.txt'}
OUTPUT_FILES = ('taxonomy.json', 'train.json', 'test.json', 'conversion.json', 'dataset.py')
RECORD_KEYS = {'source', 'split_dir', 'errors', 'videos', 'segments'}  # of conversion.json


def check_out_dir(out_dir, inputs, overwrite: bool = False) -> None:
    """The files :func:`convert_egoper` writes into ``out_dir`` (``OUTPUT_FILES``) may
    replace an earlier conversion (its ``conversion.json`` is ours) but neither an input nor,
    without ``overwrite``, files of another origin (a dataset folder's own taxonomy.json);
    vpn_plugin/outputs.py, before anything is read."""
    from ..outputs import check_output, json_matching
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f'--out {out_dir}: is a file; expected the output folder')
    ours = json_matching(lambda record: isinstance(record, dict) and RECORD_KEYS <= set(record))
    earlier = (out_dir / 'conversion.json').is_file() and ours(out_dir / 'conversion.json')
    for name in OUTPUT_FILES:
        check_output(out_dir / name, 'converted_dataset', '--out', inputs,
                     overwrite or earlier)


def convert_egoper(annotation_file, split_dir, out_dir, errors: str,
                   feature_stem: str = '{vid}', feature_dir: Optional[str] = None) -> dict:
    """Write the custom JSON dataset (module docstring) to ``out_dir``; returns the record
    written to ``conversion.json``. ValueError names the file, task, video and field."""
    if errors not in ERROR_CHOICES:
        raise ValueError(f'errors={errors!r}; expected one of {ERROR_CHOICES} (what to do with '
                         'segments whose action_type > 0)')
    annotation_file, out_dir = Path(annotation_file), Path(out_dir)
    if feature_dir is not None and Path(feature_dir).is_file():
        raise ValueError(f'--feature-dir {feature_dir}: is a file; expected the folder of the '
                         'feature files')
    data = read_json_file(annotation_file)
    taxonomy, action_ids = _taxonomy(annotation_file, data)
    splits = read_splits(Path(split_dir), list(data))
    counts: Counter = Counter()
    videos = {'train': [], 'test': []}
    seen: Dict[str, str] = {}  # video id -> where it was read first
    for k, (task, entry) in enumerate(data.items()):
        for i, segment in enumerate(entry['segments']):
            where = f'task {task!r}: segments[{i}]'
            vid = _video_id(annotation_file, where, segment)
            if vid in seen:
                raise ValueError(f'{annotation_file}: {where}: video {plain_text(vid)} is listed '
                                 f'again (first '
                                 f'at {seen[vid]}); expected each video once')
            seen[vid] = where
            split = splits.get(vid)
            if split is None:
                counts['videos in no split list'] += 1
                continue
            steps = _steps(annotation_file, task, i, vid, segment, action_ids[task], errors,
                           counts, set(entry['actiontype2idx'].values()))
            if not steps:  # written (it gives no window), counted in conversion.json
                counts['videos with no step kept'] += 1
            videos[split].append(dict(vid=vid, task=k, steps=steps,
                                      feature=feature_name(feature_stem, vid, task)))
    _check_found(splits, videos, split_dir)
    _check_feature_stems(videos, feature_stem)
    record = dict(source=str(annotation_file), split_dir=str(split_dir), errors=errors,
                  videos={s: len(v) for s, v in videos.items()}, segments=dict(counts),
                  action_types={t: e['actiontype2idx'] for t, e in data.items()})
    _write(out_dir, taxonomy, videos, record, feature_dir)
    return record


def read_splits(split_dir: Path, tasks: List[str]) -> Dict[str, str]:
    """video id -> 'train' | 'test' from ``training.txt`` / ``test.txt`` in ``split_dir``
    or in ``split_dir/<task>/``; a video in both lists is an error."""
    split_of: Dict[str, str] = {}
    if split_dir.exists() and not split_dir.is_dir():
        raise ValueError(f'--split-dir {split_dir}: is a file; expected the folder holding '
                         'training.txt and test.txt (or <task>/training.txt ...)')
    for split, name in SPLIT_FILES.items():
        per_task = [split_dir / task / name for task in tasks
                    if (split_dir / task / name).is_file()]
        if (split_dir / name).is_file() and per_task:
            raise ValueError(f'--split-dir {split_dir}: both {split_dir / name} and per-task '
                             f'lists ({", ".join(map(str, per_task[:3]))}); expected one '
                             'layout (the other lists would be ignored): remove one')
        files = [split_dir / name] if (split_dir / name).is_file() else per_task
        if not files:
            raise FileNotFoundError(f'{split_dir}: no {name} (expected {split_dir / name} or '
                                    f'{split_dir}/<task>/{name}, one video id per line)')
        listed = 0
        for path in files:
            # errors.read_text: a BOM (a Windows editor's) is no part of an id
            for number, line in enumerate(read_text(path, 'split list').splitlines(), 1):
                vid = line.strip()
                if not vid:
                    continue
                if vid in split_of:
                    other = split_of[vid]
                    raise ValueError(f'{path}: line {number}: video {plain_text(vid)} is '
                                     + (f'also in the {other} list; expected each video in one '
                                        'split' if other != split else
                                        'listed again; expected each video once'))
                split_of[vid] = split
                listed += 1
        if not listed:
            raise ValueError(f'{", ".join(map(str, files))}: no video listed; expected one video '
                             'id per line')
    return split_of


def _taxonomy(path: Path, data) -> Tuple[dict, Dict[str, Dict[int, int]]]:
    """(taxonomy JSON, per task: EgoPER action idx -> global id), background left out."""
    if not isinstance(data, dict) or not data:
        raise ValueError(f'{path}: expected an object {{task: {{"segments", "action2idx", '
                         '"actiontype2idx"}}')
    taxonomy, action_ids, next_id = {}, {}, 0
    for k, (task, entry) in enumerate(data.items()):
        missing = [f for f in ('segments', 'action2idx', 'actiontype2idx')
                   if not isinstance(entry, dict) or f not in entry]
        if missing:
            raise ValueError(f'{path}: task {task!r}: missing field(s) {missing}')
        for field in ('action2idx', 'actiontype2idx'):
            _check_index_map(path, task, field, entry[field])
        named = [name for name, idx in entry['action2idx'].items() if idx == BACKGROUND]
        if named and normalized_name(named[0]) not in BACKGROUND_NAMES:
            raise ValueError(f'{path}: task {task!r}: action2idx maps {named[0]!r} to '
                             f'{BACKGROUND}, the background idx (EgoPER\'s "BG"), whose '
                             "segments the conversion drops; expected idx 0 = background "
                             f'(\'BG\') and the actions from 1 (renumber {named[0]!r})')
        actions = {}
        for name, idx in sorted(entry['action2idx'].items(), key=lambda item: item[1]):
            if idx != BACKGROUND:
                actions[str(next_id)] = name
                action_ids.setdefault(task, {})[idx] = next_id
                next_id += 1
        if not actions:  # the taxonomy format (and every planner) needs one action per task
            raise ValueError(f'{path}: task {task!r}: action2idx has no action but background '
                             f'({entry["action2idx"]}); expected at least one action idx > 0')
        taxonomy[f'{k}_{task}'] = actions
        action_ids.setdefault(task, {})
    return taxonomy, action_ids


def _check_index_map(path, task, field: str, mapping) -> None:
    """``field`` of a task (``action2idx``, ``actiontype2idx``): {name: integer >= 0}, each
    integer once."""
    if not isinstance(mapping, dict):
        raise ValueError(f'{path}: task {task!r}: {field} = {mapping!r}; expected an object '
                         '{name: integer idx}')
    first = {}
    for name, idx in mapping.items():
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
            raise ValueError(f'{path}: task {task!r}: {field}[{name!r}] = {idx!r}; '
                             'expected an integer >= 0')
        if idx in first:
            raise ValueError(f'{path}: task {task!r}: {field} maps both {first[idx]!r} and '
                             f'{name!r} to {idx}; expected each idx once')
        first[idx] = name


def _steps(path, task, i, vid, segment, ids: Dict[int, int], errors: str,
           counts: Counter, kinds=None) -> List[list]:
    """The kept steps [[start_s, end_s, global id], ...] of one video, counted by kind."""
    where = f'{path}: task {task!r}: segments[{i}] (video {plain_text(vid)})'
    labels = segment.get('labels')
    fields = ('time_stamp', 'action', 'action_type')
    if not isinstance(labels, dict) or not all(isinstance(labels.get(f), list) for f in fields):
        raise ValueError(f'{where}: field "labels" must hold the lists {fields}')
    lengths = {f: len(labels[f]) for f in fields}
    if len(set(lengths.values())) != 1:
        raise ValueError(f'{where}: labels have different lengths {lengths}; expected one entry '
                         'per segment in each')
    steps, previous = [], 0.0
    for j, (times, action, kind) in enumerate(zip(*(labels[f] for f in fields))):
        start, end = _times(where, j, times)
        if start < previous:  # the steps' order is the plan: never taken from a shuffled list
            raise ValueError(f'{where}: labels.time_stamp[{j}] starts at {start}, before '
                             f'time_stamp[{j - 1}] at {previous}; expected the segments in time '
                             'order')
        previous = start
        if isinstance(action, bool) or not isinstance(action, int):
            raise ValueError(f'{where}: labels.action[{j}] = {action!r}; expected an integer '
                             'action idx (0 = background)')
        if action == BACKGROUND:
            counts['background dropped'] += 1
            continue
        if action not in ids:
            raise ValueError(f'{where}: labels.action[{j}] = {action!r} is not an action of '
                             f'task {task!r} (action2idx values {sorted(ids)} and 0 = background)')
        if not isinstance(kind, int) or isinstance(kind, bool) or kind < 0:
            raise ValueError(f'{where}: labels.action_type[{j}] = {kind!r}; expected an integer '
                             '>= 0 (0 = normal, > 0 an error kind)')
        if kinds is not None and kind not in kinds:
            raise ValueError(f'{where}: labels.action_type[{j}] = {kind} is not a type of task '
                             f'{task!r} (actiontype2idx values {sorted(kinds)})')
        if kind > 0:
            counts[f'error segments {"kept" if errors == "keep" else "dropped"}'] += 1
            if errors == 'drop':
                continue
        counts['steps kept'] += 1
        steps.append([start, end, ids[action]])
    return steps


def _times(where, j, times) -> Tuple[float, float]:
    try:
        if any(isinstance(t, (bool, str)) for t in times):
            raise TypeError('not a number')
        start, end = (float(t) for t in times)
    except (TypeError, ValueError):
        raise ValueError(f'{where}: labels.time_stamp[{j}] = {times!r}; expected '
                         '[start_s, end_s], two numbers') from None
    if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or end < start \
            or end > MAX_SECONDS:  # the datasets refuse a time beyond a day (validation.py)
        raise ValueError(f'{where}: labels.time_stamp[{j}] = [{start}, {end}]; expected '
                         f'finite seconds with 0 <= start <= end <= {MAX_SECONDS:g}')
    return start, end


def _video_id(path, where: str, segment) -> str:
    """A segment's ``video_id``: a non-empty string (never a number or null turned into one)."""
    vid = segment.get('video_id') if isinstance(segment, dict) else None
    if not isinstance(vid, str) or not vid.strip():
        raise ValueError(f'{path}: {where}: video_id = {vid!r}; expected the video id, a '
                         'non-empty string as in the split lists')
    return vid


def feature_name(feature_stem: str, vid: str, task: str) -> str:
    """The feature file stem of a video: ``feature_stem`` with ``{vid}`` and ``{task}``."""
    if feature_stem.endswith(('.npy', '.npz')):  # the loader adds the extension
        raise ValueError(f'--feature-stem {feature_stem!r}: ends with a file extension; expected '
                         'the name without it (the loader reads <stem>.npz or <stem>.npy)')
    try:
        name = feature_stem.format(vid=vid, task=task)
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(f'--feature-stem {feature_stem!r}: {type(error).__name__}: {error}; '
                         'expected a file name with the fields {vid} and {task}') from None
    problem = file_stem_problem(name)  # the dataset readers' rule: refused there, so here
    if problem:
        raise ValueError(f'--feature-stem {feature_stem!r} (video {plain_text(vid)}, task '
                         f'{task}): {problem}')
    return name


def _check_feature_stems(videos: dict, feature_stem: str) -> None:
    """Two videos must not read one feature file."""
    first = {}
    for item in (v for split in videos.values() for v in split):
        if item['feature'] in first:
            raise ValueError(f'--feature-stem {feature_stem!r} gives videos {first[item["feature"]]}'
                             f' and {item["vid"]} the same feature file {item["feature"]!r}; '
                             'expected one file per video (use {vid})')
        first[item['feature']] = item['vid']


def _check_found(splits: Dict[str, str], videos: dict, split_dir) -> None:
    found = {v['vid'] for split in videos.values() for v in split}
    missing = sorted(set(splits) - found)
    if missing:
        raise ValueError(f'{split_dir}: {len(missing)} listed video(s) have no annotation, e.g. '
                         f'{missing[:5]}; expected every listed video in annotation.json')


def _write(out_dir: Path, taxonomy, videos, record, feature_dir) -> None:
    """Every file or none (a killed or failed run leaves no mix of two conversions)."""
    from ..errors import write_texts_atomically
    texts = {out_dir / 'taxonomy.json': json.dumps(taxonomy, indent=1)}
    texts.update({out_dir / f'{split}.json': json.dumps(items, indent=1)
                  for split, items in videos.items()})
    texts[out_dir / 'conversion.json'] = json.dumps(record, indent=1)
    texts[out_dir / 'dataset.py'] = dataset_config_text(out_dir, record['errors'], feature_dir)
    write_texts_atomically(texts, 'the converted dataset')


def dataset_config_text(out_dir: Path, errors: str, feature_dir: Optional[str]) -> str:
    """A dataset config for the converted files (as configs/_base_/datasets/custom_json.py)
    whose ``dataset_variant`` puts the error choice into every protocol results row."""
    base = REPO_ROOT / 'configs/_base_/datasets/planning_dataset.py'
    features = feature_dir or str(out_dir.resolve() / 'features')
    return f'''# EgoPER converted by tools/convert_egoper.py (conversion.json): error segments {errors}.
# Inherit it with a model, e.g. _base_ = [THIS FILE, '{REPO_ROOT}/configs/_base_/models/vpn.py', ...]
_base_ = [{str(base)!r}]
data_root = {str(out_dir.resolve())!r}
feature_dir = {features!r}
cache_dir = {str(out_dir.resolve() / 'cache')!r}
paths = dict(data_root='{{data_root}}', taxonomy='taxonomy.json',
             feature_dir='{{feature_dir}}', cache_dir='{{cache_dir}}')
train_dataloader = dict(dataset=dict(**paths, annotation_file='train.json'))
val_dataloader = dict(dataset=dict(**paths, annotation_file='train.json'))
test_dataloader = dict(dataset=dict(**paths, annotation_file='test.json'))
# recorded in the variant of every protocol results row (vpn_plugin/protocol/runner.py)
dataset_variant = dict(egoper_errors={errors!r})
'''

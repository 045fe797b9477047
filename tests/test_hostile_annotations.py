"""Annotations as a hostile user writes them (issue 25, items 5 and 6): nothing is coerced
(``8.9``, ``true``, ``0.7``, ``"abc"``), duplicates and train/test overlap are refused, window
names must agree with their ids, times must be sane, feature arrays real floating point; the
merely suspicious is a counted warning in the summary; a corrupt observation cache is named,
discarded and rebuilt."""
import copy
import json
import logging

import numpy as np
import pytest

from test_bad_inputs import TWO_TASKS, window_sample
from vpn_plugin.datasets.annotations import (BadVideoError, read_json_annotations,
                                             read_video_list, read_window_file)
from vpn_plugin.datasets.features import load_features
from vpn_plugin.datasets.taxonomy import load_taxonomy
from vpn_plugin.datasets.validation import AnnotationWarnings


@pytest.fixture
def taxonomy(tmp_path):
    path = tmp_path / 'taxonomy.json'
    path.write_text(TWO_TASKS)
    return load_taxonomy(path)


def write(path, data):
    path.write_text(json.dumps(data))
    return path


# ------------------------------------------------------------------- window files
def named_sample(**changes):
    """A sample of the unified protocol's window files with all its names (vid, task key,
    task name, action names), as the real CrossTask files have."""
    sample = window_sample(0, [[1, 2, 0], [3, 5, 1]])
    sample['id'].update(vid='v1', task='111', feature='feats/111_v1.npy', task_name='Make tea',
                        actions=['boil water', 'add tea'])
    for key, value in changes.items():
        if key == 'instruction_len':
            sample[key] = value
        else:
            sample['id'][key] = value
    return sample


@pytest.mark.parametrize('changes, expected', [
    (dict(legal_range=[[1, 2, 0.9], [3, 5, 1]]), r'legal_range\[0\] \(vid v1\): action id = 0.9; expected an integer'),
    (dict(legal_range=[[1, 2, True], [3, 5, 1]]), r'action id = True; expected an integer'),
    (dict(task_id=0.7), r'"task_id" = 0.7; expected an integer'),
    (dict(task_id=False), r'"task_id" = False; expected an integer'),
    (dict(instruction_len=True), r'"instruction_len" = True; expected an integer'),
    (dict(instruction_len=1), r'"instruction_len" = 1: fewer steps than the window'),
    (dict(legal_range=[[1, 2e12, 0], [3, 5, 1]]), r'end time = 2e\+12 s; expected a time in \[0, 86400\]'),
    (dict(legal_range=[[1, '2', 0], [3, 5, 1]]), r"end time = '2'; expected a number of seconds"),
    (dict(legal_range=[[9, 10, 0], [3, 5, 1]]), r'steps in reverse temporal order'),
    (dict(task='222'), r'"task" = \'222\' contradicts "task_id" = 0 \(task \'111\'\)'),
    (dict(task_name='Make toast'), r'"task_name" = \'Make toast\' contradicts "task_id" = 0'),
    (dict(actions=['add tea', 'boil water']), r'"actions" = \[\'add tea\', \'boil water\'\] '
                                              r'contradicts the action ids \[0, 1\]'),
    (dict(vid='v2'), r'"vid" = \'v2\' contradicts "feature" = \'feats/111_v1.npy\''),
])
def test_window_file_values_are_never_coerced(taxonomy, tmp_path, changes, expected):
    path = write(tmp_path / 'windows.json', [named_sample(), named_sample(**changes)])
    windows, bad = read_window_file(path, taxonomy, 2)
    assert len(windows) == 1 and len(bad) == 1, (changes, [str(b) for b in bad])
    assert isinstance(bad[0], BadVideoError) and 'windows.json: sample 1' in str(bad[0])
    assert __import__('re').search(expected, str(bad[0])), str(bad[0])


def test_suspicious_windows_are_counted_warnings(taxonomy, tmp_path):
    """As in the real files (CrossTask test T=3: 3 windows twice, 30 with a step that starts
    before the previous one): counted, kept, and summarised."""
    unordered = window_sample(0, [[5, 6, 0], [1, 2, 1], [8, 9, 0]])
    warnings = AnnotationWarnings()
    path = write(tmp_path / 'w2.json', [named_sample(), named_sample()])
    windows, bad = read_window_file(path, taxonomy, 2, warnings=warnings)
    path3 = write(tmp_path / 'w3.json', [unordered])
    windows3, bad3 = read_window_file(path3, taxonomy, 3, warnings=warnings)
    assert len(windows) == 2 and len(windows3) == 1 and not bad and not bad3
    assert warnings.counts == {'duplicate windows': 1, 'windows with steps out of temporal '
                               'order': 1}
    assert 'w2.json: sample 1 repeats sample 0' in warnings.summary()


def logged_warnings(monkeypatch) -> list:
    """The WARNING lines PlanningDataset logs (its print_log, recorded)."""
    import vpn_plugin.datasets.planning_dataset as module
    logged = []
    monkeypatch.setattr(module, 'print_log', lambda message, logger=None, level=logging.INFO:
                        logged.append(message) if level == logging.WARNING else None)
    return logged


def test_the_dataset_prints_the_warnings_in_its_summary(taxonomy, tmp_path, monkeypatch):
    from vpn_plugin.baselines.llm.windows import annotation_windows
    logged = logged_warnings(monkeypatch)
    write(tmp_path / 'windows.json', [named_sample(), named_sample()])
    dataset = annotation_windows(dict(data_root=str(tmp_path), horizon=2,
                                      taxonomy='taxonomy.json', feature_dir=str(tmp_path),
                                      split='test', window_file='windows.json'))
    assert dataset.warnings.counts == {'duplicate windows': 1} and len(dataset) == 2
    assert len(logged) == 1 and '1 warning about the annotations (kept): 1 duplicate ' \
        'windows (first: ' in logged[0], logged


# ------------------------------------------------------------------- per-video JSON, lists
@pytest.mark.parametrize('step, expected', [
    ([0, 1, 1.9], r'steps\[0\] \(vid a\): action id = 1.9; expected an integer'),
    ([0, 1, True], r'action id = True; expected an integer'),
    (['0', 1, 1], r"start time = '0'; expected a number of seconds"),
    ([0, 1e9, 1], r'end time = 1e\+09 s; expected a time in \[0, 86400\]'),
])
def test_per_video_json_values_are_never_coerced(taxonomy, tmp_path, step, expected):
    path = write(tmp_path / 'videos.json', [
        {'vid': 'a', 'task': '111', 'steps': [step, [2, 3, 0]]},
        {'vid': 'b', 'task': '111', 'steps': [[0, 1, 0], [2, 3, 1]]}])
    videos, bad = read_json_annotations(path, taxonomy)
    assert [v.vid for v in videos] == ['b'] and len(bad) == 1
    assert __import__('re').search(expected, str(bad[0])), str(bad[0])


def test_reversed_videos_duplicates_and_bool_tasks_are_refused(taxonomy, tmp_path):
    path = write(tmp_path / 'videos.json', [
        {'vid': 'a', 'task': '111', 'steps': [[8, 9, 0], [4, 5, 1], [0, 1, 0]]}])
    _, bad = read_json_annotations(path, taxonomy)
    assert 'steps in reverse temporal order' in str(bad[0])
    write(path, [{'vid': 'a', 'task': '111', 'steps': [[0, 1, 0]]},
                 {'vid': 'a', 'task': '111', 'steps': [[0, 1, 0]]}])
    with pytest.raises(ValueError, match=r"videos.json: entry 1: video '111_a' is already "
                                         r'entry 0'):
        read_json_annotations(path, taxonomy)
    write(path, [{'vid': 'a', 'task': True, 'steps': [[0, 1, 0]]}])
    with pytest.raises(ValueError, match=r'task True is not a task'):
        read_json_annotations(path, taxonomy)
    listed = write(tmp_path / 'test_videos.json', [{'vid': 'x', 'task': '111'},
                                                   {'vid': 'y', 'task': '222'},
                                                   {'vid': 'x', 'task': '111'}])
    with pytest.raises(ValueError, match=r"test_videos.json: entry 2: video '111_x' is "
                                         r'already entry 0'):
        read_video_list(listed, taxonomy)


def test_training_videos_inside_the_test_split_are_refused(tiny_crosstask, tmp_path):
    from mmengine.config import Config
    from vpn_plugin.datasets.planning_dataset import check_split_disjoint
    train = json.loads(open(tiny_crosstask['train_video_list']).read())
    test = json.loads(open(tiny_crosstask['test_video_list']).read())
    leaky = write(tmp_path / 'train_videos.json', train + test[:2])
    cfg = Config({f'{split}_dataloader': dict(dataset=copy.deepcopy(
        tiny_crosstask[f'{split}_dataset'])) for split in ('train', 'val', 'test')})
    check_split_disjoint(cfg)  # the official lists are disjoint
    cfg.train_dataloader.dataset.video_list = str(leaky)
    with pytest.raises(ValueError, match=r'2 video\(s\) are in both the training and the test '
                                         rf"split, e.g. \[.*'{test[0]['task']}_"):
        check_split_disjoint(cfg)


# ------------------------------------------------------------------- taxonomy, texts
def test_taxonomy_and_state_descriptions_are_never_coerced(taxonomy, tmp_path):
    from vpn_plugin.models.text_embeddings import state_texts
    with pytest.raises(ValueError, match=r'task True is not a task'):
        taxonomy.task_index(True)
    bad = tmp_path / 'bad_taxonomy.json'
    bad.write_text('{"0_111_Make tea": {"0": "boil water", "1": 7}}')
    with pytest.raises(ValueError, match=r"bad_taxonomy.json: task '0_111_Make tea': action 1 "
                                         r'name = 7; expected a non-empty string'):
        load_taxonomy(bad)
    descriptions = {'Make tea': {'boil water': {'before': 'abc', 'after': ['x', 'y', 'z']},
                                 'add tea': {'before': ['a', 'b', 'c'], 'after': ['d', 'e', 'f']}}}
    path = write(tmp_path / 'states.json', descriptions)
    with pytest.raises(ValueError, match=r"states.json: task 'Make tea', action 'boil water': "
                                         r"\"before\" = 'abc'; expected a non-empty list"):
        state_texts(['boil water', 'add tea'], ['Make tea', 'Make tea'], str(path))


# ------------------------------------------------------------------- feature arrays
@pytest.mark.parametrize('dtype', [np.int64, np.bool_, np.complex64])
def test_feature_arrays_must_be_real_floats(tmp_path, dtype):
    path = tmp_path / 'v.npy'
    np.save(path, np.ones((4, 8), dtype))
    with pytest.raises(BadVideoError, match=rf'v.npy: field "frames_features" has dtype '
                                            rf'{np.dtype(dtype)}; expected real floating'):
        load_features(path, 8, 'v')
    np.save(path, np.ones((4, 8), np.float16))
    assert load_features(path, 8, 'v').dtype == np.float32


# ------------------------------------------------------------------- item 6: obs cache
def test_a_truncated_observation_cache_is_named_discarded_and_rebuilt(tiny_crosstask,
                                                                     monkeypatch):
    from mmaction.registry import DATASETS
    config = dict(tiny_crosstask['test_dataset'], observation='mean3')
    first = DATASETS.build(copy.deepcopy(config))
    cache = first._cache_file(first._pkg_windows)[0]
    data = cache.read_bytes()
    cache.write_bytes(data[:len(data) // 3])  # a run killed while a disk was full
    logged = logged_warnings(monkeypatch)
    again = DATASETS.build(copy.deepcopy(config))
    assert any(f'observation cache {cache} is corrupt' in m and 'rebuilt' in m for m in logged)
    np.testing.assert_array_equal(again.start, first.start)
    with np.load(cache) as rebuilt:  # the rebuilt file is whole
        assert set(rebuilt.files) >= {'start', 'goal', 'maps'}


# ------------------------------------------- issue 33: kept, but counted in the summary
def test_empty_videos_repeated_rows_and_same_name_actions_are_counted(tmp_path):
    """Today silent: a video with "steps": [] (or an empty CrossTask CSV: 10,892 -> 10,880
    windows without a word), a repeated step row (a PKG self-loop: 11 -> 14 edges), two
    actions of one name in a task."""
    from vpn_plugin.datasets.sources import read_source
    (tmp_path / 'taxonomy.json').write_text(
        '{"0_111_Make tea": {"0": "boil water", "1": "add tea", "4": "Boil  Water"},\n'
        ' "1_222_Make toast": {"2": "slice bread", "3": "toast bread"}}')
    videos = [dict(vid='v1', task=0, steps=[[1, 2, 0], [3, 5, 1], [3, 5, 1], [6, 7, 4]]),
              dict(vid='v2', task=1, steps=[]),
              dict(vid='v3', task=1, steps=[[1, 2, 2], [3, 4, 3]])]
    write(tmp_path / 'train.json', videos)
    warnings = AnnotationWarnings()
    taxonomy = load_taxonomy(tmp_path / 'taxonomy.json')
    windows, read, bad = read_source(tmp_path, taxonomy, 2, annotation_file='train.json',
                                     warnings=warnings)
    assert not bad and len(read) == 3 and len(windows) == 3 + 0 + 1
    assert warnings.counts == {'videos without steps (no window)': 1,
                               'videos with repeated step rows': 1,
                               'tasks with two actions of one name': 1}
    summary = warnings.summary()
    assert 'train.json: vid v2' in summary
    assert 'vid v1: step 2 repeats step 1 (3.0, 5.0, 1)' in summary
    assert ("task 111: actions 0 ('boil water') and 4 ('Boil  Water') are one name"
            in summary), summary


@pytest.mark.parametrize('text,expected', [
    ('{"0_a": {"0": "x", "1": "y"}, "0_a": {"2": "z"}}',
     "task '0_a' has index 0, the index of task '0_a' too (the key is given twice in the "
     "file: JSON would keep only the last); expected task indices 0..1, each once"),
    ('{"0_a": {"0": "x", "0": "y"}}',
     "task '0_a': action id 0 ('y') is already used by task '0_a' ('x'); expected every "
     'action id once')])
def test_a_duplicate_key_in_the_taxonomy_is_named(tmp_path, text, expected):
    """JSON keeps the last of two equal keys: the taxonomy reader sees both and names the key."""
    path = tmp_path / 'taxonomy.json'
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        load_taxonomy(path)
    assert str(error.value) == f'{path}: {expected}'

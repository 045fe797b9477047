"""Hostile pass 21 (passV, session 16: video and feature tools, user-built folders, dataset
readers): what it found, each with a test that fails on 3ce84f9 (log: /tmp/passV_log.md), and
the no-false-refusal copies of each changed rule."""
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.apis.inference import features_usable
from vpn_plugin.datasets.annotations import BadVideoError, read_json_annotations
from vpn_plugin.datasets.features import load_features, read_feature_record
from vpn_plugin.datasets.taxonomy import load_taxonomy

REPO = Path(__file__).resolve().parents[1]
KITCHEN = REPO / 'examples/custom_dataset/kitchen'
FRAMES = np.arange(5 * 8, dtype=np.float32).reshape(5, 8) / 7


# ------------------------------------------------ D20, D22-D24: a "usable" flag of another form
MALFORMED = {'int 0': np.int64(0), 'one-element [False]': np.array([False]),
             "text 'false'": np.str_('false'), '[True, False]': np.array([True, False])}


@pytest.mark.parametrize('value', MALFORMED.values(), ids=list(MALFORMED))
def test_a_usable_field_not_one_boolean_is_refused_by_the_dataset_reader(tmp_path, value):
    """Before: the dataset reader took ``usable`` = 0, [False], 'false' or [True, False] for
    usable features without a word, while plan.py refused the same file ("expected a
    boolean"): one reader of the flag now (``features.usable_flag``)."""
    path = tmp_path / 'v.npz'
    np.savez(path, frames_features=FRAMES, usable=value)
    with pytest.raises(BadVideoError, match=r'v\.npz: field "usable" = .*; expected a boolean'):
        load_features(path, 8)
    with pytest.raises(ValueError, match=r'field "usable" = .*; expected a boolean'):
        features_usable(read_feature_record(path), path)


def _write(path: Path, frames, usable, layout: str) -> Path:
    fields = dict(frames_features=frames) if usable is None else \
        dict(frames_features=frames, usable=usable)
    if layout == 'npz':
        np.savez(path.with_suffix('.npz'), **fields)
        return path.with_suffix('.npz')
    with open(path.with_suffix('.npy'), 'wb') as handle:  # a pickled dict (public layout)
        pickle.dump(fields, handle, protocol=5 if layout == 'pickle5' else 2)
    return path.with_suffix('.npy')


@pytest.mark.parametrize('usable', [None, True, np.bool_(True), np.array(True)],
                         ids=['absent', 'python True', 'np.bool_', '0-d array'])
@pytest.mark.parametrize('dtype', ['<f4', '>f4', '<f8', '>f8', 'float16'])
@pytest.mark.parametrize('layout', ['npz', 'pickle2', 'pickle5'])
def test_a_usable_flag_of_one_boolean_loads_in_every_layout_and_dtype(tmp_path, usable, dtype,
                                                                        layout):
    """No false refusal: every usable file reads as the plain one (Fortran order too)."""
    frames = np.asfortranarray(FRAMES.astype(dtype))
    path = _write(tmp_path / 'v', frames, usable, layout)
    loaded = load_features(path, 8)
    assert np.array_equal(loaded, frames.astype(np.float32))
    assert features_usable(read_feature_record(path), path) is True


# ------------------------------------------------ D35, D36, H36: an entry with an empty "vid"
def _annotations(tmp_path, vid):
    entries = json.loads((KITCHEN / 'test.json').read_text())
    entries[0]['vid'] = vid
    path = tmp_path / 'test.json'
    path.write_text(json.dumps(entries))
    return read_json_annotations(path, load_taxonomy(KITCHEN / 'taxonomy.json'))


@pytest.mark.parametrize('vid', ['', ' ', '\t'])
def test_an_entry_without_a_video_id_is_refused_naming_entry_and_field(tmp_path, vid):
    """Before: vid "" was read (default stem '0_make_tea_'): with that file present its windows
    were built and exported with vid '' without a word; without it the refusal named only a
    missing feature file."""
    videos, bad = _annotations(tmp_path, vid)
    assert len(videos) == 6 and len(bad) == 1
    assert f'test.json: entry 0: field "vid" = {vid!r}; expected a non-empty video id' in \
        str(bad[0])


@pytest.mark.parametrize('vid', ['tea_12', 12, 'tea 12', 'thé_12', '0'])
def test_a_video_id_of_any_other_text_or_an_integer_is_read(tmp_path, vid):
    videos, bad = _annotations(tmp_path, vid)
    assert not bad and len(videos) == 7
    assert videos[0].vid == str(vid)


# ------------------------------------------------ a state-description field that is not read
def _descriptions_with(tmp_path, **fields) -> Path:
    descriptions = json.loads((KITCHEN / 'state_descriptions.json').read_text())
    descriptions['make tea']['boil water'].update(fields)
    path = tmp_path / 'sd.json'
    path.write_text(json.dumps(descriptions))
    return path


def test_a_state_description_field_that_is_not_encoded_is_said(tmp_path, monkeypatch):
    """Before: "during": [3 sentences] beside "before"/"after" was left out without a word
    (the array equal to the one without it)."""
    from test_hostile_pass20_passV import described
    path = _descriptions_with(tmp_path, during=['The water is heating.'] * 3)
    (before, after), logged = described(KITCHEN / 'taxonomy.json', path, monkeypatch)
    assert len(before) == len(after) == 9
    assert len(logged) == 1 and "1 field(s) of the actions' state descriptions are not read " \
        "(first: task 'make_tea', action 'boil water': 'during')" in logged[0]


def test_description_and_own_fields_of_a_state_description_are_not_flagged(tmp_path,
                                                                            monkeypatch):
    """No false caveat: "description" (the shared datasets' files hold one per action) and a
    field of one's own starting with '_'."""
    from test_hostile_pass20_passV import described
    path = _descriptions_with(tmp_path, description='Boil the water.', _note='mine')
    _, logged = described(KITCHEN / 'taxonomy.json', path, monkeypatch)
    assert logged == []


# ------------------------------------------------ K1, K2 (false refusals), K4, K5: COIN records
COIN = REPO.parent / 'shared' / 'data' / 'coin'


def _coin_read(tmp_path, edit):
    from vpn_plugin.datasets.annotations import read_coin_annotations
    if not (COIN / 'taxonomy.json').is_file():
        pytest.skip('no ../shared/data/coin')
    entries = json.loads((COIN / 'annotations' / 'coin_test_30.json').read_text())[:3]
    edit(next(iter(entries[0].values())))
    path = tmp_path / 'coin.json'
    path.write_text(json.dumps(entries))
    return read_coin_annotations(path, load_taxonomy(COIN / 'taxonomy.json'))


def _label(value):
    return lambda record: record['annotation'][0].update(label=value(record['annotation'][0]
                                                                       ['label']))


@pytest.mark.parametrize('respell', [str.upper, lambda label: f'  {label.title()}. ',
                                     lambda label: label.replace(' ', '-')])
def test_a_coin_label_spelled_otherwise_is_its_action_s_name(tmp_path, respell):
    """Before: a label differing from the taxonomy's name in case, spaces or punctuation was
    "a step label contradicting its id" (the video refused) while a window file's "actions"
    are compared by ``normalized_name``: one comparison of names."""
    videos, bad = _coin_read(tmp_path, _label(respell))
    plain, _ = _coin_read(tmp_path, lambda record: None)
    assert not bad and [v.steps for v in videos] == [v.steps for v in plain]


def test_a_coin_label_of_another_action_is_still_refused(tmp_path):
    videos, bad = _coin_read(tmp_path, _label(lambda label: 'put down the hair and comb'))
    assert len(videos) == 2 and 'field "label" = \'put down the hair and comb\', but action' \
        in str(bad[0])


@pytest.mark.parametrize('value', [122.0, '122'])
def test_a_coin_task_index_of_another_type_says_an_integer_is_expected(tmp_path, value):
    """Before: 'field "recipe_type" = 122.0 is not a task index of the taxonomy (0..179)'
    (122 is in 0..179): the expected type was not said."""
    _, bad = _coin_read(tmp_path, lambda record: record.update(recipe_type=value))
    assert f'field "recipe_type" = {value!r} is not a task index' in str(bad[0])
    assert '(0..179); expected an integer in that range' in str(bad[0])


# ------------------------------------------------ W15, W16 (false refusals): a window's "task"
def _window(task) -> dict:
    return {'id': {'vid': 'tea_12', 'task': task, 'feature': '0_make_tea_tea_12.npy',
                   'legal_range': [[4, 20, 0], [23, 38, 1], [44, 54, 2]], 'task_id': 0,
                   'task_name': 'make_tea',
                   'actions': ['boil water', 'put tea bag in cup', 'pour water into cup']},
            'instruction_len': 4}


def _read_windows(tmp_path, task):
    from vpn_plugin.datasets.annotations import read_window_file
    path = tmp_path / 'windows.json'
    path.write_text(json.dumps([_window(task)]))
    return read_window_file(path, load_taxonomy(KITCHEN / 'taxonomy.json'), 3)


@pytest.mark.parametrize('task', ['make_tea', '0_make_tea', 0, '0'])
def test_a_window_s_task_in_any_spelling_of_its_task_is_read(tmp_path, task):
    """Before: "task": "0_make_tea" (the taxonomy file's own key, as test.json writes it) or
    0 was refused as 'contradicts "task_id" = 0 (task 'make_tea')': the same task."""
    windows, bad = _read_windows(tmp_path, task)
    assert not bad and [w.task for w in windows] == [0]


@pytest.mark.parametrize('task', ['1_make_toast', 'make_toast', 1, 'Make Tea'])
def test_a_window_s_task_of_another_task_is_still_refused(tmp_path, task):
    windows, bad = _read_windows(tmp_path, task)
    assert not windows and f'field "task" = {task!r} contradicts "task_id" = 0' in str(bad[0])

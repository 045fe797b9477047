"""Fourteenth hostile pass, passT (training / testing / resume / comparisons): each test fails
on 22f9984. Cases and commands: /tmp/passT_log.md (ids in the test names)."""
import argparse

import numpy as np
import pytest

from vpn_plugin.engine.checkpoint import features_folder_record, files_unlike_training


def _frames(seconds=12, seed=0):
    return np.random.default_rng(seed).standard_normal((seconds, 512)).astype(np.float32)


@pytest.fixture
def training_folder(tmp_path):
    folder = tmp_path / 'train'
    folder.mkdir()
    for index, stem in enumerate(('a_v1', 'a_v2')):
        np.savez(folder / f'{stem}.npz', frames_features=_frames(seed=index))
    return folder


def _copies(tmp_path, training_folder):
    """The same features of a_v1 in other dtypes / layouts / formats (no-false-caveat inputs),
    and a negated one (other features)."""
    frames = np.load(training_folder / 'a_v1.npz')['frames_features']
    out = tmp_path / 'copies'
    out.mkdir()
    files = {'float64.npz': dict(frames_features=frames.astype(np.float64)),
             'bigendian.npz': dict(frames_features=frames.astype('>f4')),
             'reordered.npz': dict(extra=np.zeros(2), frames_features=frames)}
    made = {}
    for name, arrays in files.items():
        (out / name.split('.')[0]).mkdir()
        made[name] = out / name.split('.')[0] / 'a_v1.npz'
        np.savez(made[name], **arrays)
    (out / 'fortran').mkdir()
    made['fortran.npy'] = out / 'fortran' / 'a_v1.npy'
    np.save(made['fortran.npy'], np.asfortranarray(frames.astype(np.float64)))
    (out / 'negated').mkdir()
    made['negated.npz'] = out / 'negated' / 'a_v1.npz'
    np.savez(made['negated.npz'], frames_features=-frames)
    return made


def test_K_noframes_record_without_frames_calls_no_copy_other_features(tmp_path,
                                                                         training_folder):
    """K_noframes_f64: a record without frames digests (edited or partial) called a float64
    copy of the training features "other features (another seed or extractor?)"; a .npy copy
    "not in the training folder". Now such files are 'unknown' (not compared), never 'other'
    or 'absent'; with the full record every copy is the training file and the negated one
    is other features."""
    record = features_folder_record(training_folder)
    copies = _copies(tmp_path, training_folder)
    for name, path in copies.items():
        other, absent, half, unknown = files_unlike_training(record, [path])
        if name == 'negated.npz':
            assert (other, absent, half, unknown) == (['a_v1.npz'], [], [], []), name
        else:
            assert (other, absent, half, unknown) == ([], [], [], []), name
    partial = dict(record)
    partial.pop('frames')
    for name, path in copies.items():
        other, absent, half, unknown = files_unlike_training(partial, [path])
        assert (other, absent, half) == ([], [], []), name
        assert unknown == [path.name], name
    other, absent, half, unknown = files_unlike_training(partial, [training_folder / 'a_v1.npz'])
    assert (other, absent, half, unknown) == ([], [], [], [])  # the bytes still compare


def test_K_noframes_note_words_it_not_compared(tmp_path, training_folder):
    """The test's note of K_noframes_f64 says the files were not compared, not that they
    differ."""
    from vpn_plugin.engine.checkpoint import features_folder_note
    record = features_folder_record(training_folder)
    record.pop('frames')
    copy = tmp_path / 'f64'
    copy.mkdir()
    for path in training_folder.glob('*.npz'):
        frames = np.load(path)['frames_features']
        np.savez(copy / path.name, frames_features=frames.astype(np.float64))
    note = features_folder_note({'meta': {'features_folder': record}}, 'ck.pth', copy)
    assert 'other features' not in note and 'differ from' not in note
    assert 'not compared' in note and '2 of the 2 files read' in note

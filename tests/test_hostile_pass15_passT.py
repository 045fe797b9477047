"""Session 10, twelfth hostile pass, passT (training, testing and resuming; the test-vs-training
comparison): each test fails on 5f87edc.

A4 / P3 / P7: a float64 copy of the training features (the same float32 values as read) was
named "equal the training features at float16 precision only ... (one side stored as float16)"
in ``changed_from_training`` and by plan.py: neither side was float16 and the model read
bit-identical inputs. A13: a float32 file with one value moved below float16 precision was
called "the same features in another dtype". C8: a checkpoint whose feature statistics hold a
NaN got both ``not_compared`` (feature scale) and a ``feature_statistics`` caveat from the NaN.
H10: a run resumed with one of its validation videos' features changed validated its last
epochs on other windows and compared them with its first epochs' best, without a word.
"""
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from test_hostile_pass13_fix1 import config_on
from test_hostile_pass15_fixrec import as_npy, feature_folder
from tool_modules import load_tool
from vpn_plugin.engine.checkpoint import features_folder_note, features_folder_record


def note_for(trained_on: Path, tested: Path) -> str:
    meta = {'features_folder': features_folder_record(trained_on)}
    return features_folder_note({'meta': meta}, 'run.pth', tested)


def test_a_float64_copy_is_the_training_features(tmp_path):
    """The model reads float32 (``features.frames_of``): a float64 copy of float32 features,
    or a float32 copy of float64 ones holding float32 values, is the same input."""
    trained_on = feature_folder(tmp_path / 'trained')
    wide = feature_folder(tmp_path / 'wide', dtype=np.float64)
    assert note_for(trained_on, wide) == ''
    assert note_for(wide, trained_on) == ''
    assert note_for(trained_on, as_npy(wide, tmp_path / 'wide_npy')) == ''
    # a float16 copy is still named as such, negated float64 features as other features
    assert 'the same features in another dtype' in note_for(
        trained_on, feature_folder(tmp_path / 'half', dtype=np.float16))
    assert 'other features' in note_for(
        trained_on, feature_folder(tmp_path / 'neg', sign=-1.0, dtype=np.float64))


def test_values_changed_below_float16_precision_are_not_another_dtype(tmp_path):
    trained_on = feature_folder(tmp_path / 'trained')
    changed = Path(shutil.copytree(trained_on, tmp_path / 'changed'))
    path = changed / 'task_0003.npz'
    with np.load(path) as data:
        frames = data['frames_features'].copy()
    frames[0, 0] = np.nextafter(frames[0, 0], np.float32(10))  # float32 still
    np.savez(path, frames_features=frames)
    note = note_for(trained_on, changed)
    assert "1 of the 20 files read differ from the training files of the same name " \
           "(['task_0003.npz'])" in note, note
    assert 'another dtype' not in note and 'float16' not in note


def test_the_planning_dataset_remembers_frames_digests_with_their_dtype(tiny_crosstask,
                                                                        tmp_path):
    """A memo of the earlier digests (no stored dtype) must not be taken for the new ones."""
    from mmaction.registry import DATASETS
    import vpn_plugin.mm  # noqa: F401  (registration)
    dataset = DATASETS.build(dict(tiny_crosstask['test_dataset'],
                                  cache_dir=str(tmp_path / 'cache')))
    files = dataset.feature_files_read()[:2]
    for digest in dataset.feature_digests(files, frames=True):
        assert digest.split(' ')[2:] == ['float32'], digest


def test_a_nan_feature_statistics_record_is_not_compared_only():
    from vpn_plugin.engine.checkpoint import feature_statistics_note, not_compared
    checkpoint = {'meta': {'feature_statistics': dict(mean=float('nan'), std=0.33)}}
    tested = dict(mean=0.0016, std=0.334, values=1000)
    assert feature_statistics_note(checkpoint, 'run.pth', tested) == ''
    assert any('feature scale' in line for line in not_compared(checkpoint))
    far = {'meta': {'feature_statistics': dict(mean=5.0, std=0.33)}}  # still named
    assert 'trained on features of mean 5' in feature_statistics_note(far, 'run.pth', tested)


def validation_file(config: Path) -> str:
    """The name of the first feature file the config's validation split reads."""
    from mmaction.registry import DATASETS
    import vpn_plugin.mm  # noqa: F401  (registration)
    from vpn_plugin.data_paths import load_config
    cfg = load_config(str(config))
    return Path(DATASETS.build(cfg.val_dataloader.dataset).feature_files_read()[0]).name


def test_a_resume_on_other_validation_data_is_refused(tiny_crosstask, tmp_path, monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '0')
    train = load_tool('train').main
    features = Path(shutil.copytree(tiny_crosstask['feature_dir'], tmp_path / 'features'))
    config = config_on(tiny_crosstask, features, tmp_path / 'a')
    epochs = ['--cfg-options', 'train_cfg.max_epochs=1', 'train_cfg.val_interval=1']
    train([str(config), '--work-dir', str(tmp_path / 'run'), *epochs])
    copy = Path(shutil.copytree(tmp_path / 'run', tmp_path / 'run_copy'))
    name = validation_file(config)
    with np.load(features / name) as data:
        np.savez(features / name, frames_features=-data['frames_features'])
    more = ['--resume', '--cfg-options', 'train_cfg.max_epochs=2', 'train_cfg.val_interval=1']
    with pytest.raises(SystemExit, match=re.escape(
            f'--resume {tmp_path / "run" / "epoch_1.pth"}: its run validated on other '
            'validation data')):
        train([str(config), '--work-dir', str(tmp_path / 'run'), *more])
    assert not (tmp_path / 'run' / 'epoch_2.pth').exists()
    # the same validation data in another folder (a byte copy) resumes
    with np.load(features / name) as data:
        np.savez(features / name, frames_features=-data['frames_features'])
    moved = config_on(tiny_crosstask, Path(shutil.copytree(features, tmp_path / 'f2')),
                      tmp_path / 'b')
    train([str(moved), '--work-dir', str(copy), *more])
    assert (copy / 'epoch_2.pth').is_file()


def test_the_refusal_names_the_validation_data():
    from vpn_plugin.engine.rank_agreement import check_resume_data
    checkpoint = {'meta': {'train_data': 'a' * 16, 'val_data': 'b' * 16}}
    check_resume_data(checkpoint, 'run/epoch_1.pth', 'a' * 16)
    check_resume_data(checkpoint, 'run/epoch_1.pth', 'b' * 16, validation=True)
    check_resume_data(checkpoint, 'run/epoch_1.pth', '', validation=True)  # no validation now
    with pytest.raises(ValueError, match=r'--resume run/epoch_1.pth: its run validated on other '
                                         r'validation data \(content bbbbbbbbbbbbbbbb; this run '
                                         r'reads cccccccccccccccc\)'):
        check_resume_data(checkpoint, 'run/epoch_1.pth', 'c' * 16, validation=True)

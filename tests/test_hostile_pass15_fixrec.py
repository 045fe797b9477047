"""Session 10, phase 1, fixrec: the training feature-folder record keeps ONE comparison (the
per-file digests), and the items closing9 noticed (each test fails on 2d3cae8).

1. ``meta['features_folder']`` held three tiers (the folder fingerprint, pass1's sizes + 8 sampled
   digests + 8 frames digests, fp's per-file digests), and a test computed pass1's contents of
   the tested folder (8 files decoded) whatever it compared. Now: per-file byte digests and
   per-file frames digests (a converted copy), the fingerprint for display only; the frames of
   a tested file are read only when its bytes are no training file's. A converted folder with
   one of its files really different (not one of the 8 sampled) passed unnamed.
2. A float16 copy of the training features got the hedged "other feature files"; KEPP's
   ``step_n_timesteps=50`` against a training with None (the same 50) was a change; the test
   warning said "(an option only training reads changes nothing here)" of test-time options;
   plan.py ``--features FILE`` compared the file with nothing; init_planner's warnings pointed
   into config_types.py; a pre-stage compared the folder fingerprint (a same-size rewrite of an
   unsampled file went unnoticed).
"""
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from test_hostile_pass13_fix1 import trained  # noqa: F401  (fixture)
from tool_modules import load_tool
from vpn_plugin.engine.checkpoint import features_folder_note, features_folder_record


def feature_folder(folder: Path, videos: int = 20, seed: int = 0, sign: float = 1.0,
                   dtype=np.float32) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(videos):
        frames = sign * rng.normal(size=(5 + i, 8)).astype(np.float32)
        np.savez(folder / f'task_{i:04d}.npz', frames_features=frames.astype(dtype))
    return folder


def note_for(trained_on: Path, tested: Path) -> str:
    meta = {'features_folder': features_folder_record(trained_on)}
    return features_folder_note({'meta': meta}, 'run.pth', tested)


def as_npy(source: Path, target: Path) -> Path:
    """``source``'s files converted to .npy arrays (the same frames)."""
    target.mkdir()
    for path in sorted(source.glob('*.npz')):
        with np.load(path) as data:
            np.save(target / f'{path.stem}.npy', data['frames_features'])
    return target


def test_the_record_holds_one_comparison_per_file(tmp_path):
    from vpn_plugin.datasets.file_digests import sha256_of
    from vpn_plugin.datasets.features import frames_digest
    folder = feature_folder(tmp_path / 'f')
    record = features_folder_record(folder)
    assert set(record) == {'folder', 'fingerprint', 'files', 'bytes', 'digests', 'frames'}
    first = folder / 'task_0000.npz'
    assert record['digests'][first.name] == sha256_of(first)[:16]
    assert record['frames']['task_0000'] == frames_digest(first)
    assert len(record['digests']) == len(record['frames']) == 20


def test_a_test_reads_no_frames_when_every_file_is_a_training_file(tmp_path, monkeypatch):
    """The tested folder's contents were computed (8 files decoded) for every comparison."""
    import vpn_plugin.datasets.features as features
    folder = feature_folder(tmp_path / 'trained')
    record = {'meta': {'features_folder': features_folder_record(folder)}}
    copy = Path(shutil.copytree(folder, tmp_path / 'copy'))
    reads = []
    original = features.read_feature_record
    monkeypatch.setattr(features, 'read_feature_record',
                        lambda *a, **k: reads.append(a) or original(*a, **k))
    assert features_folder_note(record, 'run.pth', copy) == ''
    assert reads == []


def test_correct_runs_say_nothing_wrong_ones_are_named(tmp_path):
    trained_on = feature_folder(tmp_path / 'trained')
    copy = Path(shutil.copytree(trained_on, tmp_path / 'copy'))
    npy = as_npy(trained_on, tmp_path / 'npy')
    for folder in (trained_on, copy, npy):
        assert note_for(trained_on, folder) == '', folder
    assert note_for(npy, trained_on) == ''  # trained on the converted copy
    for name, other in (('seed', feature_folder(tmp_path / 'seed1', seed=1)),
                        ('neg', feature_folder(tmp_path / 'neg', sign=-1.0))):
        assert '20 of the 20 files read differ from the training files' in \
            note_for(trained_on, other), name


def test_a_converted_folder_with_one_unsampled_file_changed_is_named(tmp_path):
    """Only the 8 sampled videos' frames were compared when the names differed (.npz -> .npy):
    one other video among the 12 others passed as the training features."""
    from vpn_plugin.datasets.provenance import feature_files, sampled_files
    trained_on = feature_folder(tmp_path / 'trained')
    npy = as_npy(trained_on, tmp_path / 'npy')
    sampled = {path.stem for path in sampled_files(feature_files(trained_on))}
    stem = next(path.stem for path in feature_files(trained_on) if path.stem not in sampled)
    np.save(npy / f'{stem}.npy', -np.load(npy / f'{stem}.npy'))
    note = note_for(trained_on, npy)
    assert f"1 of the 20 files read differ from the training files of the same name " \
           f"(['{stem}.npy']): other features" in note, note


def test_a_float16_copy_is_named_as_the_same_features_in_another_dtype(tmp_path):
    trained_on = feature_folder(tmp_path / 'trained')
    half = feature_folder(tmp_path / 'half', dtype=np.float16)
    note = note_for(trained_on, half)
    assert '20 of the 20 files read equal the training features at float16 precision only' \
        in note
    assert 'the same features in another dtype' in note and 'other features' not in note
    # as .npy (another format and dtype) too; negated float16 features are other features
    half_npy = as_npy(half, tmp_path / 'half_npy')
    assert 'at float16 precision only' in note_for(trained_on, half_npy)
    assert 'at float16 precision only' in note_for(half, trained_on)  # trained on float16
    negated = feature_folder(tmp_path / 'neg16', sign=-1.0, dtype=np.float16)
    assert 'other features' in note_for(trained_on, negated)


def test_kepp_step_timesteps_none_is_the_plan_timesteps():
    import vpn_plugin.mm  # noqa: F401  (registration)
    from vpn_plugin.engine.checkpoint import model_option_differences
    trained = ("model = dict(type='KEPP', feature_dim=8, num_actions=4, horizon=3, "
               'n_timesteps=50)\n')
    assert model_option_differences(trained, dict(
        type='KEPP', feature_dim=8, num_actions=4, horizon=3, n_timesteps=50,
        step_n_timesteps=50)) == []
    assert model_option_differences(trained, dict(
        type='KEPP', feature_dim=8, num_actions=4, horizon=3, n_timesteps=50,
        step_n_timesteps=20)) == ['model.step_n_timesteps: 50 in training, 20 here']


def test_the_test_warning_words_each_kind_of_option():
    from vpn_plugin.engine.checkpoint import named_options_text
    text = named_options_text(["model.top_k: 1 in training, 5 here"])
    assert 'changes the plans where the model reads it at test' in text and 'top_k' in text
    assert 'test split' not in text
    text = named_options_text(["test_dataloader.dataset.observed_steps: 0 in training, 1 here"])
    assert text.startswith("the test split's options change what is tested")


def test_init_planner_warnings_point_at_the_caller(trained, tmp_path):  # noqa: F811
    from vpn_plugin.apis import init_planner
    config, checkpoint, _ = trained
    loaded = torch.load(checkpoint, weights_only=False)
    del loaded['meta']['features_folder']
    torch.save(loaded, tmp_path / 'old.pth')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        init_planner(str(config), str(tmp_path / 'old.pth'),
                     cfg_options={'model.dvl_layers': 2})
    said = [w for w in caught if 'records too little' in str(w.message)
            or 'other options' in str(w.message)]
    assert len(said) == 2, [str(w.message) for w in caught]
    assert {w.filename for w in said} == {__file__}


def test_plan_features_compares_the_file_with_the_training_files(trained, tiny_crosstask,
                                                                 tmp_path, capsys):  # noqa: F811
    """plan.py --features listed nothing of the file (or 'training feature files' as not
    compared); a training video's file of other content is named, the file itself is not."""
    config, checkpoint, _ = trained
    plan = load_tool('plan')
    source = sorted(Path(tiny_crosstask['feature_dir']).glob('*.npz'))[0]
    args = ['--start-time', '0', '--goal-time', '2']
    assert plan.main([str(config), '--checkpoint', str(checkpoint), '--features', str(source),
                      *args]) in (0, None)
    out = capsys.readouterr().out
    assert 'WARNING: the features' not in out and 'records too little' not in out, out
    negated = tmp_path / source.name
    with np.load(source) as data:
        fields = {key: data[key] for key in data.files}
    fields['frames_features'] = -fields['frames_features']
    np.savez(negated, **fields)
    plan.main([str(config), '--checkpoint', str(checkpoint), '--features', str(negated), *args])
    out = capsys.readouterr().out
    assert f'WARNING: the features planned from, {negated}, differ from the training file of ' \
           'the same video' in out, out


def test_a_pre_stage_sees_a_same_size_rewrite_of_any_file(tmp_path):
    from vpn_plugin.datasets.provenance import feature_files, sampled_files
    from vpn_plugin.engine.pre_stage import data_identity
    folder = feature_folder(tmp_path / 'f')

    class Dataset:
        feature_dir, windows = str(folder), []
    before = data_identity(Dataset, horizon=3)['features_fingerprint']
    sampled = set(sampled_files(feature_files(folder)))
    path = next(p for p in feature_files(folder) if p not in sampled)
    with np.load(path) as data:
        np.savez(path, frames_features=-data['frames_features'])  # same size
    assert data_identity(Dataset, horizon=3)['features_fingerprint'] != before

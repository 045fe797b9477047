"""Pass 14, fp: the training-features check compares the files a test reads, file by file
(pass2 B2 / B3, /tmp/pass2_log.md).

A checkpoint recorded one fingerprint of its whole training feature folder, so a test on a folder
holding only the test videos' files (byte-identical to the training ones), or the training folder
plus one more file, got "other feature files than the training ones" in changed_from_training
and a caveat on its row, though every file it read was a training file. Now the checkpoint
records a content digest per feature file (``meta['features_folder']['digests']``) and a test
compares the files it reads: a file of other content or one the training folder did not have
is named; a subset, a superset or a copy elsewhere says nothing; a checkpoint with only the
folder fingerprint is compared as before.
"""
import shutil
from pathlib import Path

import numpy as np
import pytest

from test_hostile_pass13_fix1 import config_on, negated_copy, run_test, trained  # noqa: F401


def build(config: dict, **options):
    from mmaction.registry import DATASETS
    import vpn_plugin.mm  # noqa: F401  (registration)
    return DATASETS.build(dict(config, **options))


def record_of(tiny_crosstask, feature_dir=None, dataset=True) -> dict:
    """The meta a training on ``feature_dir`` (default: the tiny folder) records."""
    from vpn_plugin.engine.checkpoint import features_folder_record
    feature_dir = feature_dir or tiny_crosstask['feature_dir']
    train = build(tiny_crosstask['train_dataset'], feature_dir=str(feature_dir))
    return {'meta': {'features_folder': features_folder_record(
        feature_dir, train if dataset else None)}}


def note_on(tiny_crosstask, checkpoint: dict, folder: Path, cache: Path) -> str:
    """The note of a test of ``folder`` (its own observation cache ``cache``)."""
    from vpn_plugin.engine.checkpoint import features_folder_note
    test = build(tiny_crosstask['test_dataset'], feature_dir=str(folder), cache_dir=str(cache))
    return features_folder_note(checkpoint, 'run.pth', folder, dataset=test)


def files_read(tiny_crosstask) -> list:
    """The tiny folder's files of the test windows' videos (one per video), by name."""
    windows = build(tiny_crosstask['test_dataset']).windows
    folder = Path(tiny_crosstask['feature_dir'])
    return sorted(folder / f'{stem}.npz' for stem in {w.feature for w in windows})


def subset_folder(tiny_crosstask, target: Path) -> Path:
    """Only the test videos' files of the tiny folder, byte copies."""
    target.mkdir()
    for path in files_read(tiny_crosstask):
        shutil.copy(path, target / path.name)
    return target


def test_the_record_holds_a_short_digest_of_every_feature_file(tiny_crosstask):
    from vpn_plugin.datasets.file_digests import sha256_of
    from vpn_plugin.datasets.provenance import feature_files
    digests = record_of(tiny_crosstask)['meta']['features_folder']['digests']
    files = feature_files(tiny_crosstask['feature_dir'])
    assert sorted(digests) == [path.name for path in files] and len(files) > 60
    assert digests[files[0].name] == sha256_of(files[0])[:16]


def test_a_subset_holding_the_test_files_and_a_superset_say_nothing(tiny_crosstask, tmp_path):
    """B2 / B3: both were named 'other feature files than the training ones'."""
    checkpoint = record_of(tiny_crosstask)
    subset = subset_folder(tiny_crosstask, tmp_path / 'subset')
    assert len(list(subset.iterdir())) < len(list(Path(tiny_crosstask['feature_dir']).iterdir()))
    assert note_on(tiny_crosstask, checkpoint, subset, tmp_path / 'c1') == ''
    superset = shutil.copytree(tiny_crosstask['feature_dir'], tmp_path / 'superset')
    np.savez(superset / 'an_extra_video.npz', frames_features=np.ones((5, 512), np.float32))
    assert note_on(tiny_crosstask, checkpoint, superset, tmp_path / 'c2') == ''
    assert note_on(tiny_crosstask, checkpoint, Path(tiny_crosstask['feature_dir']),
                   tmp_path / 'c3') == ''


def test_a_record_made_without_a_dataset_holds_the_same_digests(tiny_crosstask):
    """Without a dataset (no observation cache memo) the files are hashed directly: the same
    record; one without per-file digests (the fingerprint only) is compared with nothing
    (not_compared lists it: test_hostile_pass14_pass1)."""
    with_dataset = record_of(tiny_crosstask)['meta']['features_folder']
    assert record_of(tiny_crosstask, dataset=False)['meta']['features_folder'] == with_dataset


def test_a_read_file_of_other_content_is_named(tiny_crosstask, tmp_path):
    """Negated features (same names, sizes, mean and std) and one test file rewritten."""
    checkpoint = record_of(tiny_crosstask)
    negated = negated_copy(Path(tiny_crosstask['feature_dir']), tmp_path / 'negated')
    note = note_on(tiny_crosstask, checkpoint, negated, tmp_path / 'c1')
    from vpn_plugin.engine.checkpoint import SHOWN
    read = len(files_read(tiny_crosstask))
    assert note.startswith(f'the test features are read from {negated.resolve()} (fingerprint ')
    assert f'{read} of the {read} files read differ from the training files' in note
    assert f'(and {read - SHOWN} more)' in note
    one = subset_folder(tiny_crosstask, tmp_path / 'one')
    name = files_read(tiny_crosstask)[0].name
    with np.load(one / name) as data:
        fields = {key: data[key] for key in data.files}
    fields['frames_features'] = fields['frames_features'] + 1
    np.savez(one / name, **fields)
    note = note_on(tiny_crosstask, checkpoint, one, tmp_path / 'c2')
    assert f'1 of the {read} files read differ from the training files of the same name ' \
           f"(['{name}']): other features" in note, note


def test_a_read_file_the_training_folder_did_not_have_is_named(tiny_crosstask, tmp_path):
    """Trained on a folder without one test video's file; a test reading it names it."""
    name = files_read(tiny_crosstask)[0].name
    partial = shutil.copytree(tiny_crosstask['feature_dir'], tmp_path / 'partial')
    (partial / name).unlink()
    checkpoint = record_of(tiny_crosstask, partial)
    note = note_on(tiny_crosstask, checkpoint, Path(tiny_crosstask['feature_dir']),
                   tmp_path / 'c')
    assert f'1 of the {len(files_read(tiny_crosstask))} files read were not in the training ' \
           f"folder (['{name}'])" in note, note


@pytest.mark.parametrize('kind', ['subset', 'superset'])
def test_tools_test_on_a_subset_or_superset_writes_no_changed_from_training(
        trained, tiny_crosstask, tmp_path, kind):  # noqa: F811
    """B2 / B3 end to end: tools/test.py's test_metrics.json had changed_from_training."""
    import torch
    config, checkpoint, _ = trained
    if kind == 'subset':
        folder = subset_folder(tiny_crosstask, tmp_path / kind)
    else:
        folder = shutil.copytree(tiny_crosstask['feature_dir'], tmp_path / kind)
        np.savez(folder / 'an_extra_video.npz', frames_features=np.ones((5, 512), np.float32))
    # the subset lacks the train videos: the test config's train / val splits are not built
    metrics = run_test(config_on(tiny_crosstask, folder, tmp_path / 'c'), checkpoint,
                       tmp_path / f'{kind}.json')
    assert 'changed_from_training' not in metrics, metrics
    assert torch.load(checkpoint, weights_only=False)['meta']['features_folder']['digests']

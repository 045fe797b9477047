"""Eighteenth hostile pass (issue 37), passT scope: training, testing and resuming VPN,
SCHEMA and the baselines. Each test names what main at 3ce84f9 did (cases of
/tmp/passT_log.md); the guards beside them keep the messages and refusals that are right."""
import logging
import os

import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import DATASETS
from vpn_plugin.datasets.annotations import window_key
from vpn_plugin.engine.checkpoint import latest_checkpoint_in


def _records(work_dir, caplog) -> tuple:
    """(the checkpoint ``latest_checkpoint_in`` resumes from, its warnings)."""
    logger = logging.getLogger('passT_resume')
    with caplog.at_level(logging.WARNING, logger='passT_resume'):
        found = latest_checkpoint_in(work_dir, logger=logger)
    return found, [r.getMessage() for r in caplog.records if r.name == 'passT_resume']


@pytest.mark.parametrize('record', ['epoch_2.pth', './epoch_2.pth', 'epoch_2.pth\n', None])
def test_a_relative_record_names_a_file_of_the_work_dir(record, tmp_path, monkeypatch, caplog):
    # H1: last_checkpoint holding 'epoch_2.pth' (a file of the work dir, written by hand) was
    # read against the cwd and logged "names epoch_2.pth, outside the work dir w/H1 (copied or
    # moved from another run)": a false caveat on a resume that was bit-identical
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    (work_dir / 'epoch_2.pth').write_bytes(b'x')
    record = record if record is not None else str(work_dir / 'epoch_2.pth')  # absolute
    (work_dir / 'last_checkpoint').write_text(record)
    (tmp_path / 'elsewhere').mkdir()
    monkeypatch.chdir(tmp_path / 'elsewhere')
    found, warnings = _records(work_dir, caplog)
    assert os.path.samefile(found, work_dir / 'epoch_2.pth')
    assert warnings == []


def test_a_record_of_another_folder_is_still_named(tmp_path, monkeypatch, caplog):
    # guard: a relative record naming another folder's checkpoint (a copied work dir) is
    # outside the work dir: the file of that name in the work dir is used, and said
    other, work_dir = tmp_path / 'runR', tmp_path / 'copy'
    for folder in (other, work_dir):
        folder.mkdir()
        (folder / 'epoch_2.pth').write_bytes(b'x')
    (work_dir / 'last_checkpoint').write_text('../runR/epoch_2.pth')
    monkeypatch.chdir(work_dir)
    found, warnings = _records(work_dir, caplog)
    assert os.path.samefile(found, work_dir / 'epoch_2.pth')
    assert len(warnings) == 1 and 'outside the work dir' in warnings[0]


@pytest.mark.parametrize('split', ['test_dataset', 'val_dataset'])
@pytest.mark.parametrize('fraction', [1.0, 1])
def test_the_whole_split_as_a_subset_is_the_split(tiny_crosstask, split, fraction):
    # N27: subset_fraction=1.0 (the whole split: a config's dataset dict shared by the three
    # splits) given to the test split was refused "a subset is drawn of the training split
    # only (the test split is always read whole)": what it asks for is what the test reads
    plain = DATASETS.build(dict(tiny_crosstask[split]))
    given = DATASETS.build(dict(tiny_crosstask[split], subset_fraction=fraction))
    assert [window_key(w) for w in given.windows] == [window_key(w) for w in plain.windows]
    assert given.window_count_summary() == plain.window_count_summary()


@pytest.mark.parametrize('fraction', [0.5, 0.999])
def test_a_subset_of_the_test_split_is_still_refused(tiny_crosstask, fraction):
    with pytest.raises(ValueError, match='a subset is drawn of the training split only'):
        DATASETS.build(dict(tiny_crosstask['test_dataset'], subset_fraction=fraction))


def test_a_pickle_named_pkl_is_named_with_the_name_it_is_read_under(tmp_path):
    # N02-N04, N07, N16 (clear, improved): a folder of pickled dicts named <stem>.pkl was
    # refused "feature file <stem>.npy does not exist (nor <stem>.npz)" without a word of the
    # .pkl beside it; the same pickle named .npy (the public layout) is read
    import pickle
    import numpy as np
    from vpn_plugin.datasets.annotations import BadVideoError
    from vpn_plugin.datasets.features import (find_feature_file, read_feature_record,
                                              require_feature_file)
    frames = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / 'v1.pkl').write_bytes(pickle.dumps({'frames_features': frames}, protocol=0))
    with pytest.raises(BadVideoError, match=r'the folder holds v1\.pkl: .*rename it to v1\.npy'):
        require_feature_file(find_feature_file(tmp_path, 'v1'), 'v1')
    (tmp_path / 'v1.pkl').rename(tmp_path / 'v1.npy')
    record = read_feature_record(require_feature_file(find_feature_file(tmp_path, 'v1'), 'v1'))
    assert np.array_equal(record['frames_features'], frames)
    with pytest.raises(BadVideoError) as missing:  # guard: no such hint when there is none
        require_feature_file(find_feature_file(tmp_path, 'v2'), 'v2')
    assert 'the folder holds' not in str(missing.value)

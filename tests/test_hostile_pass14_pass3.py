"""Hostile pass 14 (pass3, the confirmation pass's tools around training). Each test fails on
90c6eb9."""
import pickle

import numpy as np

from tool_modules import load_tool
from vpn_plugin.engine.checkpoint import features_folder_note, features_folder_record


def _public_folder(folder, seed=0):
    """Three videos in the public layout (a pickled dict named .npy), as downloaded."""
    folder.mkdir()
    rng = np.random.default_rng(seed)
    for video in ('1_a', '1_b', '2_c'):
        frames = rng.normal(size=(12, 512)).astype(np.float32)
        with open(folder / f'{video}.npy', 'wb') as handle:
            pickle.dump({'frames_features': frames, 'cls': 1}, handle)
    return folder


def _trained_on(folder):
    return {'meta': {'features_folder': features_folder_record(folder)}}


def test_w1_converted_copy_of_the_training_features_is_no_other_features(tmp_path, capsys):
    """W1: trained on the public .npy files, converted once (docs/data.md's optional step) and
    tested on the converted folder: test_metrics.json said 'other feature files than the
    training ones' (a false caveat: the same features). Either direction is the same
    features; a converted folder edited after, or a source changed after, still is named.
    (Fixed by pass1's per-file record of the training features, merged from main.)"""
    src = _public_folder(tmp_path / 'public')
    dst = tmp_path / 'converted'
    assert load_tool('convert_features').main(['--src', str(src), '--dst', str(dst)]) == 0
    assert features_folder_note(_trained_on(src), 'ck.pth', dst) == ''
    assert features_folder_note(_trained_on(dst), 'ck.pth', src) == ''
    other = _public_folder(tmp_path / 'other', seed=1)
    assert 'differ from the training files' in features_folder_note(_trained_on(other), 'ck.pth',
                                                                    dst)
    trained_src = _trained_on(src)
    np.savez(dst / '1_a.npz', frames_features=np.zeros((12, 512), np.float32))
    assert 'differ from the training files' in features_folder_note(trained_src, 'ck.pth', dst)


def test_w1_a_resumed_conversion_of_a_changed_source_is_not_taken_as_the_same(tmp_path):
    """A rerun keeps the .npz converted from the source's earlier files (documented resume):
    the converted folder then is not the source as it is now, so no equivalence is recorded."""
    src = _public_folder(tmp_path / 'public')
    dst = tmp_path / 'converted'
    tool = load_tool('convert_features')
    assert tool.main(['--src', str(src), '--dst', str(dst)]) == 0
    with open(src / '1_a.npy', 'wb') as handle:
        pickle.dump({'frames_features': np.ones((13, 512), np.float32)}, handle)
    assert tool.main(['--src', str(src), '--dst', str(dst)]) == 0
    assert 'differ from the training files' in features_folder_note(_trained_on(src), 'ck.pth',
                                                                    dst)


def test_h9_h14_a_cross_horizon_config_exports_and_counts_the_horizon_asked(tmp_path):
    """H9: export_windows --config vpn_niv_t6_eval_t3.py --split test --horizon 6 wrote the T=3
    test windows and printed '(T=6, test)'; H14: dataset_stats --config of that config gave
    the T=3 test windows (270) and their PKG coverage in the rows of T=4, 5 and 6."""
    import json
    from vpn_plugin.datasets.sources import config_dataset
    from vpn_plugin.datasets.stats import window_statistics
    config = 'configs/vpn_niv_t6_eval_t3.py'
    for horizon in (3, 6):
        dataset = config_dataset(config, 'test', horizon)
        assert dataset['horizon'] == horizon
    out = tmp_path / 'w.json'
    assert load_tool('export_windows').main(['--config', config, '--split', 'test',
                                             '--horizon', '6', '--out', str(out)]) == 0
    windows = json.loads(out.read_text())
    assert {len(w['id']['legal_range']) for w in windows} == {6}
    mixed, plain = (window_statistics(config=c, horizons=(3, 6))
                    for c in (config, 'configs/vpn_niv_t6.py'))
    assert [r['test_windows'] for r in mixed] == [r['test_windows'] for r in plain]
    assert mixed[0]['test_windows'] != mixed[1]['test_windows']


def test_h19_quickstart_refuses_a_file_work_dir_before_generating_features(tmp_path,
                                                                          shared_data):
    """H19: quickstart --work-dir <a file> generated 1.3 GB of CrossTask features (32 s) and
    only then refused the work dir."""
    import pytest
    (tmp_path / 'afile').write_text('mine')
    with pytest.raises(SystemExit, match='afile is a regular file'):
        load_tool('quickstart').main(['--work-dir', str(tmp_path / 'afile'), '--features',
                                      str(tmp_path / 'f'), '--data-root', str(shared_data)])
    assert not (tmp_path / 'f').exists()


def test_h20_quickstart_does_not_reuse_features_of_another_dataset(tmp_path, shared_data):
    """H20: features/ holding another dataset's synthetic features (CrossTask, from an earlier
    quickstart) were 'found, reusing them' for an NIV config, which then failed on a missing
    video with a hint to generate into the same folder."""
    import json
    import pytest
    features = tmp_path / 'f' / 'features'
    features.mkdir(parents=True)
    np.savez(features / '105222_x.npz', frames_features=np.zeros((3, 512), np.float32))
    (features / 'provenance.json').write_text(json.dumps({'kind': 'synthetic',
                                                          'dataset': 'crosstask'}))
    with pytest.raises(SystemExit, match="holds synthetic features of dataset 'crosstask'.*"
                                         "this config reads 'niv'"):
        load_tool('quickstart').main(['--config', 'configs/vpn_niv_t3.py', '--features',
                                      str(tmp_path / 'f'), '--work-dir', str(tmp_path / 'run'),
                                      '--data-root', str(shared_data)])


def test_c3_c5_skipped_hidden_files_and_fifos_are_counted_and_named(tmp_path, capsys):
    """C3: a hidden '.v1.npy' (e.g. macOS '._v1.npy') in --src was skipped without being
    counted; C5: a FIFO named fifo.npy was listed as a 'dangling link'."""
    import os
    src = tmp_path / 'src'
    src.mkdir()
    frames = np.zeros((4, 512), np.float32)
    np.save(src / 'v2.npy', frames)
    np.save(src / '.v1.npy', frames)
    os.mkfifo(src / 'fifo.npy')
    assert load_tool('convert_features').main(['--src', str(src), '--dst',
                                               str(tmp_path / 'dst')]) == 0
    out = capsys.readouterr().out
    assert 'converted 1 files' in out
    assert 'skipped 1 hidden entries' in out and '.v1.npy' in out
    assert 'fifo.npy (not a regular file)' in out and 'dangling' not in out.split('fifo.npy')[1][:20]


def test_h54_a_copy_of_some_training_files_is_the_training_features(tmp_path):
    """H54: the test videos' files copied from the training folder (byte for byte) into a
    folder of their own: test_metrics.json said 'other feature files than the training ones'.
    A copy with one file changed still is named. (Fixed by pass1's per-file record, merged.)"""
    import shutil
    src = _public_folder(tmp_path / 'train')
    trained = _trained_on(src)
    subset = tmp_path / 'subset'
    subset.mkdir()
    for name in ('1_a.npy', '2_c.npy'):
        shutil.copy(src / name, subset / name)
    assert features_folder_note(trained, 'ck.pth', subset) == ''
    with open(subset / '2_c.npy', 'wb') as handle:
        pickle.dump({'frames_features': np.ones((12, 512), np.float32)}, handle)
    assert 'differ from the training files' in features_folder_note(trained, 'ck.pth', subset)


def test_h58_features_of_another_time_step_are_refused_by_name(tmp_path):
    """H58: extract_features --chunk 8 (16 fps: a row per 0.5 s), then plan.py --features: exit 0,
    '6 s of S3D features' for a 3 s video, the plan read from the wrong seconds; also plan.py
    --video --fps 8 (a row per 2 s). A recipe of about one row per second still reads."""
    import json
    import pytest
    from vpn_plugin.apis.video import plan_from_video
    from vpn_plugin.datasets.annotations import BadVideoError
    from vpn_plugin.datasets.features import checked_frames
    from vpn_plugin.video import FrameRecipe
    frames = np.zeros((6, 512), np.float32)
    for chunk, fps in ((16, 16.0), (32, 30.0), (8, 8.0)):
        record = {'frames_features': frames, 'recipe': np.array(json.dumps(
            {'fps': fps, 'chunk': chunk}))}
        assert checked_frames(record, 'a.npz', 512).shape == (6, 512)
    with pytest.raises(BadVideoError, match='no field "native_fps"'):  # passV F20: the seconds
        checked_frames({'frames_features': frames, 'recipe': json.dumps(  # of a row unknown
            {'fps': None, 'chunk': 16})}, 'a.npz', 512)
    assert checked_frames({'frames_features': frames, 'native_fps': 16.0, 'recipe': json.dumps(
        {'fps': None, 'chunk': 16})}, 'a.npz', 512).shape == (6, 512)
    record = {'frames_features': frames, 'recipe': np.array(json.dumps({'fps': 16.0,
                                                                         'chunk': 8}))}
    with pytest.raises(BadVideoError, match=r'a\.npz: field "recipe": frame recipe chunk 8 at '
                                            r'16 fps: one feature row per 0\.5 s; expected one '
                                            'row per second'):
        checked_frames(record, 'a.npz', 512)
    with pytest.raises(ValueError, match=r'v\.mp4: frame recipe chunk 16 at 8 fps: one feature '
                                         r'row per 2 s'):
        plan_from_video(None, None, tmp_path / 'v.mp4', 0, 1, FrameRecipe(fps=8.0))


def test_h58_extract_features_refuses_a_recipe_no_reader_takes(tmp_path):
    """H58 at its source: extract_features --chunk 8 wrote features of 0.5 s per row, which
    every reader now refuses; the tool refuses before decoding anything."""
    import pytest
    with pytest.raises(SystemExit, match='one feature row per 0.5 s.*nothing was extracted'):
        load_tool('extract_features').main([str(tmp_path / 'v.mp4'), '--out', str(tmp_path / 'o'),
                                            '--random-weights', '--chunk', '8'])
    assert not (tmp_path / 'o').exists()

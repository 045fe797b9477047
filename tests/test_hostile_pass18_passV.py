"""Hostile pass 18 (passV, session 13: video and feature tools, user-built folders, dataset
readers): what it found, each case with a test that fails on e251d41 (log: /tmp/passV_log.md)."""
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tool_modules import load_tool

from vpn_plugin.datasets.annotations import BadVideoError
from vpn_plugin.datasets.features import find_feature_file, load_features
from vpn_plugin.datasets.file_digests import MISSING, file_digests

REPO = Path(__file__).resolve().parents[1]
KITCHEN = REPO / 'examples/custom_dataset/kitchen'
KITCHEN_CONFIG = REPO / 'examples/custom_dataset/vpn_kitchen_t3.py'


def kitchen_copy(tmp_path, name='k') -> Path:
    """The example dataset's annotation files (no features) in a folder of its own."""
    root = tmp_path / name
    root.mkdir()
    for file in ('taxonomy.json', 'train.json', 'test.json', 'state_descriptions.json'):
        shutil.copy(KITCHEN / file, root)
    return root


# ------------------------------------------------ numeric flags outside the shared number rule
@pytest.mark.parametrize('tool, argv, flag', [
    ('export_windows', ['--dataset', 'niv', '--split', 'test', '--out', 'x.json',
                        '--horizon', '\u0663'], '--horizon'),
    ('export_windows', ['--dataset', 'niv', '--split', 'test', '--out', 'x.json',
                        '--horizon', '1_0'], '--horizon'),
    ('export_windows', ['--dataset', 'niv', '--split', 'test', '--out', 'x.json',
                        '--horizon', '0'], '--horizon'),
    ('extract_features', ['v.mp4', '--out', 'o', '--jpeg-quality', '\u0669\u0665'],
     '--jpeg-quality'),
    ('extract_features', ['v.mp4', '--out', 'o', '--jpeg-quality', '9_5'], '--jpeg-quality'),
    ('extract_features', ['v.mp4', '--out', 'o', '--jpeg-quality', '101'], '--jpeg-quality'),
    ('make_synthetic_features', ['--dataset', 'niv', '--difficulty', '\u0660.\u0665'],
     '--difficulty'),
    ('make_synthetic_features', ['--dataset', 'niv', '--difficulty', '1_0'], '--difficulty'),
    ('make_synthetic_features', ['--dataset', 'niv', '--difficulty', 'nan'], '--difficulty'),
    ('dataset_stats', ['--dataset', 'niv', '--horizons', '3', '1'], '--horizons'),
])
def test_numeric_flags_refuse_other_forms_naming_the_flag(tool, argv, flag, capsys):
    """passV H01/H02/H03 (export_windows --horizon ٣ read as 3, '1_0' as 10, 0 blamed on the
    config), H05/H06 (--jpeg-quality ٩٥ / 9_5 read as 95), H09/H10 (--difficulty ٠.٥ read as
    0.5, '1_0' shown as 10.0), H15 (dataset_stats --horizons 1 refused by build_pkg's
    argument): argparse types of int()/float() instead of errors.at_least."""
    parse = load_tool(tool).parse_args if tool != 'dataset_stats' else load_tool(tool).main
    with pytest.raises(SystemExit) as raised:
        parse(argv)
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert f'argument {flag}' in err and 'expected' in err


def test_numeric_flags_in_ascii_still_read():
    assert load_tool('export_windows').parse_args(
        ['--dataset', 'niv', '--split', 'test', '--out', 'x.json', '--horizon', ' 3']).horizon == 3
    args = load_tool('extract_features').parse_args(['v.mp4', '--out', 'o', '--jpeg-quality', '0'])
    assert args.jpeg_quality == 0  # 0: no JPEG round trip (documented)
    assert load_tool('make_synthetic_features').parse_args(
        ['--dataset', 'niv', '--difficulty', '5e-1']).difficulty == 0.5


# ------------------------------------------------ make_synthetic_features: "replaced" is true
def test_synthetic_rerun_with_the_config_spelled_otherwise_replaces_nothing(tmp_path, capsys,
                                                                            monkeypatch):
    """passV H12 (wrong, false caveat): the same config given by absolute path, then relative
    from the repository root, was 'replaced the features of the earlier run (config
    '/abs/...' -> 'examples/...'); checkpoints trained on the earlier ones no longer match
    these' although every file was byte-identical. The config is compared and recorded in
    its results-row form (data_paths.row_config_path)."""
    make = load_tool('make_synthetic_features').main
    root = kitchen_copy(tmp_path)
    make(['--config', str(KITCHEN_CONFIG), '--data-root', str(root)])
    before = {p.name: p.read_bytes() for p in (root / 'features').glob('*.npz')}
    monkeypatch.chdir(REPO)
    capsys.readouterr()
    make(['--config', 'examples/custom_dataset/vpn_kitchen_t3.py', '--data-root', str(root)])
    out = capsys.readouterr().out
    assert 'replaced' not in out and 'no longer match' not in out
    assert {p.name: p.read_bytes() for p in (root / 'features').glob('*.npz')} == before
    manifest = json.loads((root / 'synthetic_manifest.json').read_text())
    assert manifest['config'] == 'examples/custom_dataset/vpn_kitchen_t3.py'
    make(['--config', str(KITCHEN_CONFIG), '--data-root', str(root), '--seed', '1'])
    assert 'replaced the features of the earlier run (seed 0 -> 1)' in capsys.readouterr().out


def test_synthetic_run_beside_a_manifest_but_no_features_replaces_nothing(tmp_path, capsys):
    """passV H12 (second form): a copied synthetic_manifest.json of an earlier run but no
    feature file beside it: 'replaced the features of the earlier run' although none were."""
    make = load_tool('make_synthetic_features').main
    first, second = kitchen_copy(tmp_path, 'a'), kitchen_copy(tmp_path, 'b')
    make(['--config', str(KITCHEN_CONFIG), '--data-root', str(first)])
    shutil.copy(first / 'synthetic_manifest.json', second)
    capsys.readouterr()
    make(['--config', str(KITCHEN_CONFIG), '--data-root', str(second), '--seed', '1'])
    out = capsys.readouterr().out
    assert 'replaced' not in out and len(list((second / 'features').glob('*.npz'))) == 29


# ------------------------------------------------ dataset_stats says which folder it counted
def test_dataset_stats_names_the_data_root_it_counted(tmp_path, capsys):
    """passV H14 (silent): with --data-root the table (and --json) named only the config,
    whose data_root is another folder: a kept table described the example dataset."""
    root = kitchen_copy(tmp_path, 'mine')
    stats = load_tool('dataset_stats').main
    assert stats(['--config', str(KITCHEN_CONFIG), '--data-root', str(root),
                  '--horizons', '3']) == 0
    assert f'(data root {root})' in capsys.readouterr().out.splitlines()[0]
    assert stats(['--config', str(KITCHEN_CONFIG), '--data-root', str(root), '--horizons', '3',
                  '--json']) == 0
    assert json.loads(capsys.readouterr().out)['data_root'] == str(root)


# ------------------------------------------------ EgoPER --feature-stem: the readers' rule
@pytest.mark.parametrize('stem', ['{task}/{vid}', '{vid}/', '..'])
def test_egoper_feature_stem_that_no_reader_takes_is_refused(stem):
    """passV H55/H60 (silent): --feature-stem '{task}/{vid}' wrote "feature": "coffee/x",
    which every dataset reader refuses (validation.file_stem_problem): found at training."""
    from vpn_plugin.datasets.egoper import feature_name
    with pytest.raises(ValueError, match="is no file name of the feature folder"):
        feature_name(stem, 'coffee_u1_a', 'coffee')
    assert feature_name('{task}_{vid}', 'coffee_u1_a', 'coffee') == 'coffee_coffee_u1_a'


# ------------------------------------------------ feature links that lead nowhere
def test_a_dangling_npz_link_is_named_as_such(tmp_path):
    """passV D09 (vague): features/V.npz a symlink to a missing file was reported as 'V.npy
    does not exist (nor V.npz)'; ls lists V.npz: it is named a broken link now."""
    (tmp_path / 'V.npz').symlink_to('gone.npz')
    path = find_feature_file(tmp_path, 'V')
    assert path.name == 'V.npz'
    with pytest.raises(BadVideoError,
                       match='V.npz .*is a symbolic link to gone.npz, which leads to no file'):
        load_features(path, 512, vid='v')


def test_a_feature_link_loop_is_named_not_a_raw_os_error(tmp_path):
    """passV D10 (vague): V.npz -> V.npy -> V.npz: building the dataset raised the raw
    'OSError: [Errno 40] Too many levels of symbolic links' from the cache's digests."""
    (tmp_path / 'V.npz').symlink_to('V.npy')
    (tmp_path / 'V.npy').symlink_to('V.npz')
    assert file_digests([tmp_path / 'V.npy']) == [MISSING]
    with pytest.raises(BadVideoError, match=r'leads back to itself \(a loop of links\)'):
        load_features(find_feature_file(tmp_path, 'V'), 512, vid='v')


def test_real_files_and_good_links_read_as_before(tmp_path):
    """No false refusal: a plain .npz, a link to one, and a dangling .npz link beside a real
    .npy (the .npy is the file) all read."""
    rows = np.ones((3, 512), np.float32)
    np.savez(tmp_path / 'A.npz', frames_features=rows)
    (tmp_path / 'B.npz').symlink_to('A.npz')
    (tmp_path / 'C.npz').symlink_to('gone.npz')
    np.save(tmp_path / 'C.npy', rows)
    for stem in 'ABC':
        assert np.array_equal(load_features(find_feature_file(tmp_path, stem), 512), rows)
    assert find_feature_file(tmp_path, 'C').name == 'C.npy'
    assert os.path.islink(tmp_path / 'C.npz')


# ------------------------------------------------ state descriptions: which action is off
def test_state_description_count_names_the_action(tmp_path):
    """passV H22 (vague): 'actions have different numbers of state descriptions [2, 3]'
    named no action."""
    from vpn_plugin.models.text_embeddings import state_texts
    descriptions = json.loads((KITCHEN / 'state_descriptions.json').read_text())
    task = next(iter(descriptions))
    action = next(iter(descriptions[task]))
    descriptions[task][action]['before'] = descriptions[task][action]['before'][:2]
    path = tmp_path / 'sd.json'
    path.write_text(json.dumps(descriptions))
    taxonomy = json.loads((KITCHEN / 'taxonomy.json').read_text())
    names, tasks = [], []
    for key, actions in taxonomy.items():
        for name in actions.values():
            names.append(name)
            tasks.append(key.split('_', 1)[1])
    with pytest.raises(ValueError, match=f"action '{action}': \"before\" holds 2 sentence"):
        state_texts(names, tasks, str(path))


# ------------------------------------------------ plan.py --video on a frames folder
def test_a_frames_folder_given_as_a_video_says_what_is_expected(tmp_path):
    """passV H62 (vague): `plan.py --video FRAMES_DIR` said only 'not a regular file (a
    folder)': no word of what it takes (a video file) nor how to make one of the frames."""
    from vpn_plugin.video.decode import UnreadableVideoError, probe_video
    (tmp_path / 'vid1').mkdir()
    with pytest.raises(UnreadableVideoError, match='expected a video file .*-framerate'):
        probe_video(tmp_path / 'vid1')


# ------------------------------------------------ a .npy with data after its array
def _npy_bytes(array) -> bytes:
    import io
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_a_npy_with_a_second_array_after_the_first_is_refused(tmp_path):
    """passV R17 (silent): `cat a.npy b.npy > x.npy` read as a.npy's rows, b's unread without
    a word (np.load stops after the header's count)."""
    rows = np.arange(6 * 512, dtype=np.float32).reshape(6, 512)
    (tmp_path / 'x.npy').write_bytes(_npy_bytes(rows) + _npy_bytes(-rows))
    with pytest.raises(BadVideoError, match=r'bytes follow the \(6, 512\) array'):
        load_features(tmp_path / 'x.npy', 512)


@pytest.mark.parametrize('dtype, order', [('<f4', 'C'), ('>f4', 'F'), ('<f8', 'C'), ('<f2', 'F')])
def test_npy_and_npz_layouts_still_read_whole(tmp_path, dtype, order):
    """No false refusal: .npy / npz members in other dtypes and orders, and a pickled dict,
    end where their array ends."""
    import pickle
    rows = (np.arange(6 * 512).reshape(6, 512) % 7).astype(dtype, order=order)
    np.save(tmp_path / 'a.npy', rows)
    np.savez_compressed(tmp_path / 'b.npz', frames_features=rows)
    np.save(tmp_path / 'c.npy', {'frames_features': rows}, allow_pickle=True)
    (tmp_path / 'd.npy').write_bytes(pickle.dumps({'frames_features': rows}, protocol=4))
    for name in ('a.npy', 'b.npz', 'c.npy', 'd.npy'):
        assert np.array_equal(load_features(tmp_path / name, 512), rows.astype(np.float32))

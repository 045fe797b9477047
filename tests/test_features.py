"""Feature files: every public layout reads without flags; pickles never run code."""
import io
import pickle
import runpy
import zipfile
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.datasets import BadVideoError, load_features, read_feature_record
from vpn_plugin.datasets.safe_pickle import RefusedGlobalError, safe_loads

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = REPO.parent / 'shared' / 'reference' / 'feature_layouts'


def tool_main(name):
    return runpy.run_path(str(REPO / 'tools' / f'{name}.py'))['main']


class WritesMarker:
    """Unpickling this runs ``Path(marker).write_text('ran')``: what a malicious file does."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return Path.write_text, (Path(self.marker), 'ran')


class CallsSystem:
    def __reduce__(self):
        import os
        return os.system, ('true',)


@pytest.fixture
def frames():
    return np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)


# --------------------------------------------------------------------------- shipped samples
@pytest.mark.parametrize('name', ['raw_pickle_protocol2.npy', 'raw_pickle_protocol4.npy',
                                  'npz_named_npy.npy', 'object_array_dict.npy',
                                  'plain_array.npy'])
def test_every_shipped_layout_equals_the_expected_frames(name):
    if not LAYOUTS.is_dir():
        pytest.skip(f'{LAYOUTS} not found')
    expected = np.load(LAYOUTS / 'expected_frames_features.npy', allow_pickle=False)
    frames = load_features(LAYOUTS / name, 512)
    assert frames.dtype == np.float32 and frames.shape == (40, 512)
    np.testing.assert_array_equal(frames, expected)


def test_shipped_raw_pickle_keeps_its_other_fields():
    if not LAYOUTS.is_dir():
        pytest.skip(f'{LAYOUTS} not found')
    record = read_feature_record(LAYOUTS / 'raw_pickle_protocol2.npy')
    reference = np.load(LAYOUTS / 'raw_pickle_protocol2.npy', allow_pickle=True)
    assert set(record) == set(reference) == {'frames_features', 'steps_ids', 'cls', 'start', 'end'}
    np.testing.assert_array_equal(record['steps_ids'], reference['steps_ids'])


# --------------------------------------------------------------------------- layouts built here
def write_layout(path: Path, layout: str, record: dict, protocol: int = 4) -> Path:
    if layout == 'raw':
        path.write_bytes(pickle.dumps(record, protocol=protocol))
    elif layout == 'npz':
        with open(path, 'wb') as f:  # any extension: np.savez to a file object keeps the name
            np.savez(f, **record)
    elif layout == 'object_npy':
        with open(path, 'wb') as f:
            np.save(f, record, allow_pickle=True)
    elif layout == 'plain_npy':
        np.save(path, record['frames_features'])
    return path


@pytest.mark.parametrize('protocol', [0, 1, 2, 3, 4, 5])
def test_raw_pickles_of_every_protocol(tmp_path, frames, protocol):
    record = {'frames_features': frames, 'cls': np.int64(3), 'rate': np.float32(1.5),
              'names': ['a', b'b', None, True, (1, 2.0)], 'steps': np.arange(3)}
    path = write_layout(tmp_path / 'v.pkl', 'raw', record, protocol)
    got = read_feature_record(path)
    np.testing.assert_array_equal(got['frames_features'], frames)
    assert got['cls'] == 3 and got['rate'] == np.float32(1.5)
    assert got['names'] == ['a', b'b', None, True, (1, 2.0)]
    np.testing.assert_array_equal(got['steps'], np.arange(3))


@pytest.mark.parametrize('layout,name', [('npz', 'v.npy'), ('npz', 'v.npz'),
                                         ('object_npy', 'v.npy'), ('plain_npy', 'v.npy')])
def test_numpy_layouts_under_any_extension(tmp_path, frames, layout, name):
    path = write_layout(tmp_path / name, layout, {'frames_features': frames})
    np.testing.assert_array_equal(load_features(path, 4), frames)


def test_single_array_npz_and_missing_key(tmp_path, frames):
    with open(tmp_path / 'one.npz', 'wb') as f:
        np.savez(f, frames)  # stored as arr_0
    np.testing.assert_array_equal(load_features(tmp_path / 'one.npz', 4), frames)
    with open(tmp_path / 'two.npz', 'wb') as f:
        np.savez(f, a=frames, b=frames)
    with pytest.raises(BadVideoError, match=r"two\.npz: no field \"frames_features\"; found "
                                            r"\['a', 'b'\]"):
        load_features(tmp_path / 'two.npz', 4)


# --------------------------------------------------------------------------- safety
def payload_files(tmp_path, payload) -> dict:
    """The payload inside every layout that can carry a pickle."""
    record = {'frames_features': np.zeros((3, 4), np.float32), 'extra': payload}
    files = {'raw': write_layout(tmp_path / 'raw.npy', 'raw', record)}
    files['object_npy'] = write_layout(tmp_path / 'object.npy', 'object_npy', record)
    member = io.BytesIO()
    np.save(member, np.array([payload, 1], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(tmp_path / 'member.npz', 'w') as archive:
        archive.writestr('frames_features.npy', member.getvalue())
    files['npz_member'] = tmp_path / 'member.npz'
    return files


@pytest.mark.parametrize('layout', ['raw', 'object_npy', 'npz_member'])
def test_payload_is_refused_and_never_runs(tmp_path, layout):
    marker = tmp_path / 'marker.txt'
    path = payload_files(tmp_path, WritesMarker(marker))[layout]
    pickle.loads(pickle.dumps(WritesMarker(tmp_path / 'probe.txt')))  # the payload does work
    assert (tmp_path / 'probe.txt').read_text() == 'ran'
    with pytest.raises(BadVideoError, match=rf'{path.name}: refused to unpickle global '
                                            r"'pathlib\.\w*Path\.write_text'") as err:
        load_features(path, 4, vid='v1')
    assert err.value.reason == 'unsafe feature file' and err.value.vid == 'v1'
    assert not marker.exists()


def test_payload_in_another_npz_member_is_refused_or_never_read(tmp_path, frames):
    marker = tmp_path / 'marker.txt'
    member, plain = io.BytesIO(), io.BytesIO()
    np.save(member, np.array([WritesMarker(marker), 1], dtype=object), allow_pickle=True)
    np.save(plain, frames)
    with zipfile.ZipFile(tmp_path / 'v.npz', 'w') as archive:
        archive.writestr('frames_features.npy', plain.getvalue())
        archive.writestr('extra.npy', member.getvalue())
    np.testing.assert_array_equal(load_features(tmp_path / 'v.npz', 4), frames)  # not read
    with pytest.raises(BadVideoError, match=r"v\.npz: refused to unpickle global 'pathlib"):
        read_feature_record(tmp_path / 'v.npz')  # every member, as convert_features reads
    assert not marker.exists()


def test_refused_global_is_named():
    with pytest.raises(RefusedGlobalError, match=r"refused to unpickle global "
                                                 r"'(posix|nt|os)\.system'") as err:
        safe_loads(pickle.dumps(CallsSystem()))
    assert err.value.global_name.endswith('.system')
    with pytest.raises(RefusedGlobalError, match='builtins.eval'):
        safe_loads(b'cbuiltins\neval\n(Vprint(1)\ntR.')
    with pytest.raises(RefusedGlobalError, match=r"_codecs\.encode\(encoding='rot13'"):
        safe_loads(b'c_codecs\nencode\n(Vabc\nVrot13\ntR.')


def test_dataset_skips_an_unsafe_file_when_asked(tmp_path):
    from test_datasets import toy_dataset, write_toy
    write_toy(tmp_path)
    path = tmp_path / 'feat/22_b1.npz'
    with open(path, 'wb') as f:
        pickle.dump({'frames_features': WritesMarker(tmp_path / 'marker.txt')}, f)
    with pytest.raises(BadVideoError, match=r'22_b1\.npz: refused'):
        toy_dataset(tmp_path)
    dataset = toy_dataset(tmp_path, skip_bad_videos=True)
    assert dataset.skipped == {'unsafe feature file': 1} and len(dataset) == 3
    assert not (tmp_path / 'marker.txt').exists()


# --------------------------------------------------------------------------- errors and tools
def test_missing_feature_file_names_dataset_and_command(tmp_path):
    import json
    root = tmp_path / 'niv'
    root.mkdir()
    (root / 'taxonomy.json').write_text(json.dumps({'0_t': {'0': 'a', '1': 'b'}}))
    (root / 'w.json').write_text(json.dumps([{'id': {
        'feature': 't_v1.npy', 'task_id': 0, 'legal_range': [[0, 1, 0], [2, 3, 1]]},
        'instruction_len': 2}]))
    feature_dir = tmp_path / 'synthetic/niv/features'
    feature_dir.mkdir(parents=True)
    from vpn_plugin.datasets import PlanningDataset
    with pytest.raises(BadVideoError) as err:
        PlanningDataset(data_root=root, horizon=2, taxonomy='taxonomy.json',
                        feature_dir=feature_dir, window_file='w.json', split='test')
    message = str(err.value)
    assert f'feature file {feature_dir}/t_v1.npy does not exist (nor t_v1.npz)' in message
    assert "Dataset 'niv'" in message
    assert (f'python tools/make_synthetic_features.py --dataset niv --data-root {tmp_path} '
            f'--out {tmp_path}/synthetic/niv') in message
    assert f'python tools/convert_features.py --src /path/to/real/features --dst {feature_dir}' \
        in message
    # issue 34: from any other directory the hint names the tools by their absolute path
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(elsewhere)
        with pytest.raises(BadVideoError) as err:
            PlanningDataset(data_root=root, horizon=2, taxonomy='taxonomy.json',
                            feature_dir=feature_dir, window_file='w.json', split='test')
    assert f'python {REPO}/tools/make_synthetic_features.py --dataset niv' in str(err.value)
    assert f'python {REPO}/tools/convert_features.py --src' in str(err.value)
    with pytest.raises(FileNotFoundError, match=r'annotation source .*missing\.json does not '
                                                r'exist.*"legal_range"'):
        PlanningDataset(data_root=root, horizon=2, taxonomy='taxonomy.json',
                        feature_dir=feature_dir, window_file='missing.json', split='test')


def test_convert_tool_converts_every_layout_and_reports_refusals(tmp_path, frames, capsys):
    src, dst = tmp_path / 'src', tmp_path / 'dst'
    src.mkdir()
    record = {'frames_features': frames, 'steps_ids': np.arange(2), 'cls': 4}
    for layout in ('raw', 'npz', 'object_npy', 'plain_npy'):
        write_layout(src / f'{layout}.npy', layout, record)
    (src / 'bad.npy').write_bytes(pickle.dumps({'frames_features': CallsSystem()}))
    (src / 'short.npy').write_bytes(pickle.dumps({'frames_features': np.zeros((3, 5))}))
    (src / 'README.md').write_text('# not a feature file\n')  # issue 34: skipped by name
    assert tool_main('convert_features')(['--src', str(src), '--dst', str(dst),
                                          '--frame-dim', '4']) == 1
    out = capsys.readouterr().out
    assert 'skipped 1 files not named *.npy / *.npz (not feature files): README.md' in out
    assert 'README' not in out.split('skipped')[0]  # never read, never refused
    assert 'converted 4 files, kept 0 existing .npz (use --overwrite), refused 2' in out
    assert 'refused (unsafe feature file): 1 files' in out and 'system' in out
    assert 'refused (wrong feature dimension): 1 files' in out
    for layout in ('raw', 'npz', 'object_npy', 'plain_npy'):
        with np.load(dst / f'{layout}.npz', allow_pickle=False) as data:
            np.testing.assert_array_equal(data['frames_features'], frames)
            if layout != 'plain_npy':
                assert int(data['cls']) == 4


def test_a_synthetic_rerun_of_another_format_removes_the_earlier_files(shared_data, tmp_path,
                                                                       capsys):
    """Fourth hostile pass: `--format npz` then `--format public` into one --out left both
    X.npz and X.npy per video (the loader then refuses every video), without a word."""
    from tool_modules import load_tool
    tool = load_tool('make_synthetic_features')
    common = ['--dataset', 'niv', '--data-root', str(shared_data), '--out', str(tmp_path),
              '--frame-dim', '4']
    tool.main(common)
    count = len(list((tmp_path / 'features').glob('*.npz')))
    tool.main(common + ['--format', 'public'])
    assert f'removed the {count} .npz file(s) of the earlier --format npz run' in \
        capsys.readouterr().out
    assert not list((tmp_path / 'features').glob('*.npz'))
    assert len(list((tmp_path / 'features').glob('*.npy'))) == count

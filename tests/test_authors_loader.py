"""The authors' loader oracle: tools/check_authors_loader.py on the shipped fixture and on
fixtures built here, whose expected values come from a plain-python rendering of the loader
rules (below), independent of vpn_plugin's implementation."""
import json
import pickle
import runpy
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO.parent / 'shared' / 'reference' / 'authors_loader_small'
CHECKER = runpy.run_path(str(REPO / 'tools' / 'check_authors_loader.py'))


# --------------------------------------------------------------------------- the oracle
def three_frames(frames, t):
    """Frames [max(0, t-1), min(t+2, L)), the last one repeated until there are 3."""
    picked = [frames[i] for i in range(max(0, t - 1), min(t + 2, len(frames)))]
    while len(picked) < 3:
        picked.append(picked[-1])
    return picked


def authors_loader(windows, features, horizon):
    """What the authors' loader keeps: (window index, states (T, 2, 3, D), actions, task)."""
    kept = []
    for index, window in enumerate(windows):
        frames = features[Path(window['id']['feature']).stem]
        states, actions = [], []
        for start, end, action in window['id']['legal_range']:
            if start < 0 or end >= len(frames):
                if states:  # the previous kept step's features and action
                    states.append(states[-1])
                    actions.append(actions[-1])
                continue
            states.append([three_frames(frames, start), three_frames(frames, end)])
            actions.append(action)
        if not states:
            continue
        while len(states) < horizon:
            states.append(states[-1])
            actions.append(actions[-1])
        kept.append((index, states, actions, window['id']['task_id']))
    return kept


# --------------------------------------------------------------------------- fixtures
EDGE_WINDOWS = [  # (video length, legal_range times); actions are drawn at random
    (12, [(0, 2), (3, 5), (6, 11)]),     # t=0 at the start, end at L-1: kept as is
    (12, [(1, 4), (5, 8), (9, 12)]),     # last step ends at L: relabelled
    (12, [(1, 4), (5, 13), (9, 20)]),    # two steps past the end: both copy step 1
    (12, [(8, 12), (2, 4), (5, 7)]),     # first step past the end: dropped, shift, pad
    (12, [(9, 14), (10, 15), (11, 30)]),  # no step inside the video: window dropped
    (1, [(0, 0), (0, 0), (0, 0)]),       # a 1-frame video: frame 0 three times
    (2, [(0, 1), (1, 1), (0, 2)]),
]


def make_fixture(root: Path, seed: int, horizon: int = 3, videos: int = 6, dim: int = 8,
                 edge_cases: bool = True) -> Path:
    """windows.json, features/ (raw pickled dicts), taxonomy.json, expected.npz."""
    rng = np.random.default_rng(seed)
    tasks, per_task = 2, 4
    (root / 'features').mkdir(parents=True)
    (root / 'taxonomy.json').write_text(json.dumps({
        f'{k}_task{k}': {str(k * per_task + a): f'task{k} step {a}' for a in range(per_task)}
        for k in range(tasks)}))
    specs = [(int(rng.integers(3, 40)), None) for _ in range(videos)]
    if edge_cases and horizon == 3:
        specs += EDGE_WINDOWS
    windows, features = [], {}
    for v, (length, times) in enumerate(specs):
        stem, task = f'task{v % tasks}_v{v:03d}', v % tasks
        features[stem] = rng.standard_normal((length, dim)).astype(np.float32)
        with open(root / 'features' / f'{stem}.npy', 'wb') as f:
            pickle.dump({'frames_features': features[stem]}, f, protocol=2)
        for times in [times] if times else random_windows(rng, length, horizon):
            rows = [[int(s), int(e), int(task * per_task + rng.integers(per_task))]
                    for s, e in times]
            windows.append({'id': {'vid': f'v{v:03d}', 'feature': f'{stem}.npy', 'task_id': task,
                                   'legal_range': rows}, 'instruction_len': horizon + 1})
    (root / 'windows.json').write_text(json.dumps(windows))
    write_expected(root, authors_loader(windows, features, horizon))
    return root


def random_windows(rng, length, horizon):
    """Two windows of ordered steps, whose times may run up to 4 s past the video."""
    for _ in range(2):
        bounds = np.sort(rng.integers(0, length + 4, size=2 * horizon))
        yield [(bounds[2 * i], bounds[2 * i + 1]) for i in range(horizon)]


def write_expected(root, kept):
    states = np.array([k[1] for k in kept], np.float32)  # (W, T, 2, 3, D)
    count = len(kept)
    np.savez(root / 'expected.npz', window_index=np.array([k[0] for k in kept]),
             states=states, start=states[:, 0, 0].reshape(count, -1),
             goal=states[:, -1, 1].reshape(count, -1),
             actions=np.array([k[2] for k in kept]), tasks=np.array([k[3] for k in kept]))


# --------------------------------------------------------------------------- tests
def test_checker_passes_on_the_shipped_fixture(capsys):
    if not SHIPPED.is_dir():
        pytest.skip(f'{SHIPPED} not found')
    assert CHECKER['main']([str(SHIPPED)]) == 0
    out = capsys.readouterr().out
    assert 'actions: 0 mismatching windows' in out and 'OK' in out


def test_oracle_reproduces_the_shipped_fixture():
    """The test's own loader rendering agrees with the authors' recorded outputs too."""
    if not SHIPPED.is_dir():
        pytest.skip(f'{SHIPPED} not found')
    windows = json.loads((SHIPPED / 'windows.json').read_text())
    features = {p.stem: pickle.loads(p.read_bytes())['frames_features']
                for p in (SHIPPED / 'features').glob('*.npy')}
    kept = authors_loader(windows, features, 3)
    with np.load(SHIPPED / 'expected.npz') as expected:
        np.testing.assert_array_equal([k[0] for k in kept], expected['window_index'])
        np.testing.assert_array_equal(np.array([k[1] for k in kept]), expected['states'])
        np.testing.assert_array_equal([k[2] for k in kept], expected['actions'])


@pytest.mark.parametrize('seed,horizon,videos', [(1, 3, 6), (2, 3, 12), (3, 4, 8), (4, 6, 5)])
def test_checker_passes_on_fixtures_built_here(tmp_path, seed, horizon, videos):
    fixture = make_fixture(tmp_path, seed, horizon, videos)
    with np.load(fixture / 'expected.npz') as expected:
        count = len(json.loads((fixture / 'windows.json').read_text()))
        assert 0 < len(expected['window_index']) <= count
    assert CHECKER['compare'](fixture) == {field: 0 for field in CHECKER['FIELDS']}


def test_edge_fixture_has_every_case_and_the_dataset_counts_them(tmp_path):
    fixture = make_fixture(tmp_path, seed=5, videos=0)  # the edge windows only
    dataset = CHECKER['build_dataset'](fixture, 3, 8)
    # relabelled: end at L (twice), two past the end, shifted first step; dropped: none inside
    assert dataset.window_counts == {'relabelled': 4, 'dropped': 1}
    assert [w.sample for w in dataset.windows] == [0, 1, 2, 3, 5, 6]
    annotated = json.loads((fixture / 'windows.json').read_text())[3]['id']['legal_range']
    assert dataset.plans[3].tolist() == [annotated[1][2], annotated[2][2], annotated[2][2]]
    assert CHECKER['main']([str(fixture)]) == 0


@pytest.mark.parametrize('field', ['goal', 'start', 'actions', 'window_index'])
def test_checker_fails_on_an_altered_fixture(tmp_path, capsys, field):
    fixture = make_fixture(tmp_path, seed=6)
    with np.load(fixture / 'expected.npz') as data:
        expected = {k: data[k].copy() for k in data.files}
    expected[field][1] += 1
    np.savez(fixture / 'expected.npz', **expected)
    assert CHECKER['main']([str(fixture)]) == 1
    out = capsys.readouterr().out
    assert f'{field:>13}: 1 mismatching windows' in out and 'FAIL' in out


def test_cached_dataset_keeps_observations_and_counts(tmp_path):
    from vpn_plugin.datasets import PlanningDataset
    fixture = make_fixture(tmp_path / 'f', seed=7, videos=0)
    args = dict(data_root=fixture, horizon=3, taxonomy='taxonomy.json', frame_dim=8,
                feature_dir=fixture / 'features', window_file='windows.json', split='test',
                window_policy='authors', cache_dir=tmp_path / 'cache')
    first, cached = PlanningDataset(**args), PlanningDataset(**args)
    assert len(list((tmp_path / 'cache').glob('obs_*.npz'))) == 1
    assert cached.window_counts == first.window_counts and cached.window_counts['dropped'] == 1
    np.testing.assert_array_equal(cached.goal, first.goal)
    np.testing.assert_array_equal(cached.plans, first.plans)
    keep = PlanningDataset(**dict(args, window_policy='keep'))
    assert len(list((tmp_path / 'cache').glob('obs_*.npz'))) == 2
    assert len(keep) == len(EDGE_WINDOWS) and keep.window_counts == {'clamped': 5}


def test_a_fixture_without_its_expected_arrays_is_named(tmp_path):
    """Fourth hostile pass: '[Errno 2] No such file or directory: .../expected.npz'."""
    with pytest.raises(FileNotFoundError, match=rf'{tmp_path}: no expected.npz; expected an '
                                                r'authors-loader fixture folder'):
        (tmp_path / 'windows.json').write_text('[]')
        (tmp_path / 'taxonomy.json').write_text('{}')
        CHECKER['compare'](tmp_path)

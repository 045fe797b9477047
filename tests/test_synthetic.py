"""Synthetic feature generator, its CLI, tools/convert_features.py and tools/dataset_stats.py."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.datasets import build_windows, load_features
from vpn_plugin.datasets.observations import window_observations
from vpn_plugin.datasets.synthetic import (SyntheticFeatureGenerator, dataset_videos,
                                           save_video_features)

REPO = Path(__file__).resolve().parents[1]


def tool_main(name):
    """``main`` of tools/<name>.py, run in this process (no second interpreter start-up)."""
    return runpy.run_path(str(REPO / 'tools' / f'{name}.py'), run_name='tool')['main']


@pytest.fixture(scope='module')
def crosstask_videos_all(shared_data):
    return dataset_videos('crosstask', shared_data)


def observations(generator, videos, horizon=3, recipe='mean3'):
    """(goal (M, D), start (M, D), plans (M, T)) of every window of ``videos``."""
    starts, goals, plans = [], [], []
    for video in videos:
        frames = generator.video_frames(video)
        for w in build_windows([video], horizon):
            start, goal, _ = window_observations(frames, w.times, recipe, 0)
            starts.append(start)
            goals.append(goal)
            plans.append(w.steps)
    return np.array(starts), np.array(goals), np.array(plans)


def ridge_probe_accuracy(x_train, y_train, x_test, y_test, classes, ridge=0.1):
    """% test accuracy of a one-vs-rest ridge-regression linear probe."""
    mean, std = x_train.mean(0), x_train.std(0) + 1e-6
    a, b = (x_train - mean) / std, (x_test - mean) / std
    a, b = np.hstack([a, np.ones((len(a), 1))]), np.hstack([b, np.ones((len(b), 1))])
    weights = np.linalg.solve(a.T @ a + ridge * len(a) * np.eye(a.shape[1]),
                              a.T @ np.eye(classes)[y_train])
    return 100 * float(((b @ weights).argmax(1) == y_test).mean())


def lookup_accuracy(key_train, y_train, key_test, y_test):
    """% test accuracy of predicting y by its most frequent value for the key (train)."""
    best = {}
    for key in set(key_train.tolist()):
        values, counts = np.unique(y_train[key_train == key], return_counts=True)
        best[key] = values[counts.argmax()]
    return 100 * float(np.mean([best.get(k, -1) == y for k, y in zip(key_test, y_test)]))


def split_videos(videos, per_task_train=30, per_task_test=12):
    train, test, counts = [], [], {}
    for video in videos:
        n = counts.get(video.task, 0)
        counts[video.task] = n + 1
        (train if n < per_task_train else test if n < per_task_train + per_task_test
         else []).append(video)
    return train, test


def test_deterministic_and_per_video_streams(crosstask_videos_all):
    taxonomy, videos = crosstask_videos_all
    one, same = SyntheticFeatureGenerator(taxonomy, seed=0), SyntheticFeatureGenerator(taxonomy)
    other = SyntheticFeatureGenerator(taxonomy, seed=1)
    frames = one.video_frames(videos[5])
    np.testing.assert_array_equal(frames, same.video_frames(videos[5]))
    for video in videos[:5]:  # generating other videos first does not change a video
        one.video_frames(video)
    np.testing.assert_array_equal(frames, one.video_frames(videos[5]))
    reseeded = other.video_frames(videos[5])
    common = min(len(frames), len(reseeded))
    assert not np.allclose(frames[:common], reseeded[:common])
    assert frames.shape[1] == 512 and frames.dtype == np.float32
    last_end = max(e for _, e, _ in videos[5].steps)
    assert frames.shape[0] >= round(last_end) + 2


def test_frames_carry_the_step_action(crosstask_videos_all):
    taxonomy, videos = crosstask_videos_all
    generator = SyntheticFeatureGenerator(taxonomy, difficulty=0.5)
    hits = total = 0
    for video in videos[:40]:
        frames = generator.video_frames(video)
        for start, end, action in video.steps:
            middle = (round(start) + round(end)) // 2
            scores = generator.signatures[taxonomy.task_actions[video.task]] @ frames[middle]
            hits += taxonomy.task_actions[video.task][int(scores.argmax())] == action
            total += 1
    assert hits / total > 0.5  # single frames: the step's own action stands out, not always


def test_no_label_leak_and_difficulty(crosstask_videos_all):
    """Goal observation -> middle action no better than the true last action predicts it."""
    taxonomy, videos = crosstask_videos_all
    train, test = split_videos(videos)
    n = taxonomy.num_actions
    results, goals = {}, {}
    for difficulty in (0.0, 0.5, 1.0):
        generator = SyntheticFeatureGenerator(taxonomy, difficulty=difficulty, seed=0)
        s_tr, g_tr, p_tr = observations(generator, train)
        s_te, g_te, p_te = observations(generator, test)
        goals[difficulty] = g_tr, g_te
        results[difficulty] = dict(
            first=ridge_probe_accuracy(s_tr, p_tr[:, 0], s_te, p_te[:, 0], n),
            last=ridge_probe_accuracy(g_tr, p_tr[:, -1], g_te, p_te[:, -1], n),
            middle=ridge_probe_accuracy(g_tr, p_tr[:, 1], g_te, p_te[:, 1], n))
    lookup_middle = lookup_accuracy(p_tr[:, -1], p_tr[:, 1], p_te[:, -1], p_te[:, 1])
    print(results, 'middle from the true last action', lookup_middle)
    for difficulty, acc in results.items():
        assert acc['middle'] <= lookup_middle + 5, (difficulty, acc)
    firsts = [results[d]['first'] for d in (0.0, 0.5, 1.0)]
    assert firsts[0] > firsts[1] > firsts[2] and firsts[0] > 70 and firsts[1] < 90
    # the probe has the power to see a leak: add the middle action's signature to the goal
    g_tr, g_te = goals[0.5]
    leaky_tr = g_tr + generator.signatures[p_tr[:, 1]]
    leaky_te = g_te + generator.signatures[p_te[:, 1]]
    assert ridge_probe_accuracy(leaky_tr, p_tr[:, 1], leaky_te, p_te[:, 1], n) > lookup_middle + 5


def test_both_layouts_and_convert_tool(crosstask_videos_all, tmp_path):
    taxonomy, videos = crosstask_videos_all
    frames = SyntheticFeatureGenerator(taxonomy).video_frames(videos[0])
    save_video_features(tmp_path / 'v.npy', frames, videos[0], 'public')
    save_video_features(tmp_path / 'v.npz', frames, videos[0], 'npz')
    record = np.load(tmp_path / 'v.npy', allow_pickle=True)  # the public loaders' idiom
    assert set(record) == {'frames_features', 'steps_ids', 'cls', 'start', 'end'}
    np.testing.assert_array_equal(record['frames_features'], frames)
    assert record['cls'] == videos[0].task
    np.testing.assert_array_equal(record['steps_ids'], [a for _, _, a in videos[0].steps])
    np.testing.assert_array_equal(load_features(tmp_path / 'v.npz', 512), frames)
    np.testing.assert_array_equal(load_features(tmp_path / 'v.npy', 512), frames)
    src, dst = tmp_path / 'src', tmp_path / 'dst'
    src.mkdir()
    (tmp_path / 'v.npy').rename(src / '1_abc.npy')
    assert tool_main('convert_features')(['--src', str(src), '--dst', str(dst)]) == 0
    converted = np.load(dst / '1_abc.npz', allow_pickle=False)
    np.testing.assert_array_equal(converted['frames_features'], frames)
    np.testing.assert_array_equal(converted['steps_ids'], record['steps_ids'])
    assert int(converted['cls']) == videos[0].task


def test_generator_cli_public_format_niv(shared_data, tmp_path):
    tool_main('make_synthetic_features')(['--dataset', 'niv', '--data-root', str(shared_data),
                                          '--out', str(tmp_path), '--format', 'public'])
    files = sorted((tmp_path / 'features').glob('*.npy'))
    assert files and not list((tmp_path / 'features').glob('*.npz'))
    record = np.load(files[0], allow_pickle=True)  # the public loaders' idiom
    assert set(record) == {'frames_features', 'num_steps', 'steps_ids', 'steps_starts',
                           'steps_ends'}
    assert record['num_steps'] == len(record['steps_ids']) == len(record['steps_ends'])
    np.testing.assert_array_equal(load_features(files[0], 512), record['frames_features'])
    # the paper config reads the public files as they are, with the authors' recipe
    from vpn_plugin.data_paths import load_config

    from vpn_plugin.datasets import PlanningDataset
    cfg = load_config(str(Path(__file__).parents[1] / 'configs/vpn_niv_t3.py'))
    args = dict(cfg.test_dataloader.dataset, data_root=str(shared_data / 'niv'),
                feature_dir=str(tmp_path / 'features'), cache_dir=None)
    args.pop('type')
    dataset = PlanningDataset(**args)
    assert dataset.recipe == 'authors' and dataset.feature_dim == 1536 and len(dataset) > 0


def test_generator_cli_niv(shared_data, tmp_path):
    stems = set()
    for path in (shared_data / 'niv/splits').glob('*_T*.json'):
        stems |= {Path(s['id']['feature']).stem for s in json.loads(path.read_text())}
    for seed_run in ('a', 'b'):
        tool_main('make_synthetic_features')(['--dataset', 'niv', '--data-root', str(shared_data),
                                              '--out', str(tmp_path / seed_run), '--seed', '3'])
    written = {p.stem for p in (tmp_path / 'a/features').glob('*.npz')}
    assert written == stems
    name = sorted(written)[0] + '.npz'
    assert (tmp_path / 'a/features' / name).read_bytes() == \
        (tmp_path / 'b/features' / name).read_bytes()
    record = json.loads((tmp_path / 'a/features/provenance.json').read_text())
    assert (record['kind'], record['seed'], record['generator']) == (
        'synthetic', 3, 'make_synthetic_features.py')


def test_dataset_stats_tool(shared_data, capsys, tmp_path):
    stats = tool_main('dataset_stats')
    assert stats(['--dataset', 'niv', '--data-root', str(shared_data), '--json']) == 0
    rows = json.loads(capsys.readouterr().out)['rows']
    assert [r['horizon'] for r in rows] == [3, 4, 5, 6]
    for row in rows:
        T = row['horizon']
        train = json.loads((shared_data / f'niv/splits/train_T{T}.json').read_text())
        test = json.loads((shared_data / f'niv/splits/test_T{T}.json').read_text())
        assert (row['train_windows'], row['test_windows']) == (len(train), len(test))
        edges = {(a[2], b[2]) for s in train for a, b in zip(s['id']['legal_range'],
                                                            s['id']['legal_range'][1:])}
        covered = [all((a[2], b[2]) in edges for a, b in zip(s['id']['legal_range'],
                                                             s['id']['legal_range'][1:]))
                   for s in test]
        assert row['pkg_coverage'] == pytest.approx(100 * np.mean(covered), abs=0.01)
        assert (row['actions'], row['tasks']) == (48, 5)
    with pytest.raises(SystemExit, match='^error: ') as raised:
        stats(['--dataset', 'coin', '--data-root', str(tmp_path)])
    assert str(tmp_path / 'coin') in str(raised.value)


def test_dataset_stats_crosstask_against_raw_files(shared_data):
    """T=3 row recomputed straight from the CSVs, the video list and the official test file."""
    from vpn_plugin.datasets.stats import format_table, window_statistics
    row = window_statistics('crosstask', shared_data, horizons=(3,))[0]
    root = shared_data / 'crosstask'
    taxonomy = json.loads((root / 'taxonomy_133.json').read_text())
    task_ids = {key.split('_')[1]: [int(a) for a in actions] for key, actions in taxonomy.items()}
    train_windows = []
    for entry in json.loads((root / 'splits/train_videos.json').read_text()):
        csv = root / f"crosstask_release/annotations/{entry['task']}_{entry['vid']}.csv"
        steps = [task_ids[entry['task']][int(line.split(',')[0]) - 1]
                 for line in csv.read_text().splitlines() if line.strip()]
        train_windows += [steps[p:p + 3] for p in range(len(steps) - 2)]
    test = [[r[2] for r in s['id']['legal_range']]
            for s in json.loads((root / 'splits/test_T3_133.json').read_text())]
    edges = {(a, b) for w in train_windows for a, b in zip(w, w[1:])}
    coverage = 100 * np.mean([all((a, b) in edges for a, b in zip(w, w[1:])) for w in test])
    assert (row['train_windows'], row['test_windows']) == (len(train_windows), len(test))
    assert row['pkg_coverage'] == pytest.approx(coverage, abs=0.01)
    assert (row['actions'], row['tasks']) == (133, 18)
    table = format_table('crosstask', [row]).splitlines()
    assert table[0] == 'crosstask' and 'PKG coverage %' in table[1]
    assert table[2].split('|')[1].strip() == str(len(train_windows))


def test_crosstask_generation_fits_the_budget(crosstask_videos_all, tmp_path):
    """All CrossTask videos: < 2 GB of .npz and < 3 min, extrapolated from 60 written videos
    (exact frame counts; the full run measured ~35 s / 1.3 GB on the 2-core machine)."""
    import time
    from vpn_plugin.datasets.synthetic import write_synthetic_features
    taxonomy, videos = crosstask_videos_all
    assert len(videos) == 2748  # every video of train_videos.json + test_videos.json
    generator = SyntheticFeatureGenerator(taxonomy)
    total_frames = sum(generator.video_length(v, generator._rng(v.feature)) for v in videos)
    sample = videos[::len(videos) // 60][:60]
    began = time.time()
    info = write_synthetic_features(sample, generator, tmp_path, 'npz', progress=False)
    per_frame_seconds = (time.time() - began) / info['frames']
    per_frame_bytes = info['bytes'] / info['frames']
    assert per_frame_bytes < 512 * 4 * 1.05
    assert total_frames * per_frame_bytes < 2e9
    assert total_frames * per_frame_seconds < 180


def test_dataset_stats_of_a_custom_dataset_config(capsys, tmp_path, monkeypatch):
    """Issue 34: --config reads the dataset any config reads (examples/custom_dataset), from
    any directory; windows slid over each video = max(0, steps - T + 1), counted by hand."""
    kitchen = REPO / 'examples/custom_dataset/kitchen'
    monkeypatch.chdir(tmp_path)
    assert tool_main('dataset_stats')(['--config', str(
        REPO / 'examples/custom_dataset/vpn_kitchen_t3.py'), '--json']) == 0
    rows = json.loads(capsys.readouterr().out)['rows']
    for row in rows:
        for split in ('train', 'test'):
            videos = json.loads((kitchen / f'{split}.json').read_text())
            assert row[f'{split}_windows'] == sum(max(0, len(v['steps']) - row['horizon'] + 1)
                                                  for v in videos)
        assert (row['actions'], row['tasks']) == (9, 2)
    assert rows[0]['train_windows'] > 0 and rows[-1]['train_windows'] == 0
    assert rows[-1]['pkg_coverage'] is None  # no windows at T=6: no coverage, no crash

"""COIN from its own per-video format: reader and its errors, the window export against the
official files, statistics against a plain recomputation, synthetic features; the 105-action
CrossTask relabelling (skipped without ../shared/data)."""
import copy
import functools
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mmaction.registry import DATASETS
from tool_modules import load_tool
from vpn_plugin.datasets import load_features, load_taxonomy
from vpn_plugin.datasets.annotations import read_coin_annotations
from vpn_plugin.datasets.sources import dataset_config, source_windows
from vpn_plugin.datasets.synthetic import (FLOAT16_TOLERANCE, SyntheticFeatureGenerator,
                                           write_synthetic_features)

REPO = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=2)
def raw_coin(shared_data, split):
    """[(vid, record)] of a COIN split file, read with plain json."""
    name = 'coin_train_70.json' if split == 'train' else 'coin_test_30.json'
    entries = json.loads((shared_data / 'coin/annotations' / name).read_text())
    return [next(iter(e.items())) for e in entries]


def plain_windows(records, horizon):
    """The authors' recipe, written out: [(vid, task, [[round(s), round(e), id - 1]...])]."""
    windows = []
    for vid, record in records:
        steps = [[round(a['segment'][0]), round(a['segment'][1]), int(a['id']) - 1]
                 for a in record['annotation']]
        windows += [(vid, record['recipe_type'], steps[p:p + horizon])
                    for p in range(len(steps) - horizon + 1)]
    return windows


def test_export_coin_t4_equals_the_official_file_byte_for_byte(shared_data, tmp_path, capsys):
    out = tmp_path / 'coin_test_T4.json'
    assert load_tool('export_windows').main([
        '--dataset', 'coin', '--data-root', str(shared_data), '--split', 'test',
        '--horizon', '4', '--out', str(out)]) == 0
    assert '3391 windows of 1362 videos' in capsys.readouterr().out
    assert out.read_bytes() == (shared_data / 'coin/splits/test_T4.json').read_bytes()


@pytest.mark.parametrize('dataset,split,official', [
    ('crosstask', 'test', 'crosstask/splits/test_T3_133.json'),
    ('niv', 'train', 'niv/splits/train_T3.json')])
def test_export_reproduces_the_other_datasets_files(shared_data, tmp_path, dataset, split,
                                                     official):
    out = tmp_path / 'windows.json'
    assert load_tool('export_windows').main([
        '--dataset', dataset, '--data-root', str(shared_data), '--split', split,
        '--horizon', '3', '--out', str(out)]) == 0
    assert out.read_bytes() == (shared_data / official).read_bytes()


def test_coin_training_windows_and_statistics(shared_data):
    """Training windows (no official file here) against the authors' recipe written out in
    plain Python; feature stems <class>_<recipe_type>_<vid>; dataset_stats' T=4 row against a
    plain recomputation of its counts and PKG coverage."""
    from vpn_plugin.datasets.stats import window_statistics
    records = raw_coin(shared_data, 'train')
    taxonomy, windows, videos = source_windows(dataset_config('coin', 'train', 4, shared_data))
    train = plain_windows(records, 4)
    assert [(w.vid, w.task, [[s, e, a] for (s, e), a in zip(w.times, w.steps)])
            for w in windows] == train
    vid, record = records[0]
    assert videos[0].feature == f"{record['class']}_{record['recipe_type']}_{vid}"
    assert len(videos) == 7064 and (taxonomy.num_actions, taxonomy.num_tasks) == (778, 180)
    row = window_statistics('coin', shared_data, horizons=(4,))[0]
    test = [[r[2] for r in s['id']['legal_range']]
            for s in json.loads((shared_data / 'coin/splits/test_T4.json').read_text())]
    edges = {(a[2], b[2]) for _, _, w in train for a, b in zip(w, w[1:])}
    covered = [all((a, b) in edges for a, b in zip(w, w[1:])) for w in test]
    assert (row['train_windows'], row['test_windows']) == (len(train), len(test)) == (8537, 3391)
    assert row['pkg_coverage'] == pytest.approx(100 * np.mean(covered), abs=0.01)
    assert (row['actions'], row['tasks'], row['tasks_seen']) == (778, 180, 177)


def small_coin(shared_data, tmp_path, mutate=None):
    """A COIN file ``train.json`` of 6 real training videos with >= 3 steps
    (``mutate(records)`` edits them); returns (folder, records)."""
    records = [copy.deepcopy(dict([r])) for r in raw_coin(shared_data, 'train')
               if len(r[1]['annotation']) >= 3][:6]
    if mutate:
        mutate(records)
    (tmp_path / 'train.json').write_text(json.dumps(records))
    return tmp_path, records


def first(records, key='annotation'):
    return next(iter(records[0].values()))[key] if key else next(iter(records[0].values()))


@pytest.mark.parametrize('mutate,reason,message', [
    (lambda r: first(r)[0].update(id='9999'), 'action id outside the taxonomy',
     r'entry 0: annotation\[0\] \(field "id" = \'9999\': action id 9998 = COIN id - 1\) '
     r'\(vid \S+\): action id 9998 is outside the taxonomy .*0\.\.777'),
    (lambda r: first(r)[1].update(id='1'), 'action of another task',
     r'annotation\[1\] \(field "id" = \'1\'.*action id 0 .* belongs to task '
     r"'MakeLambKebab', not to the sample's task 'PractisePoleVault'"),
    (lambda r: first(r)[2].update(segment=[30.0, 20.0]), 'step time outside the video',
     r'annotation\[2\].*start=30.0, end=20.0 are not 0 <= start <= end'),
    (lambda r: first(r)[0].update(segment=[-2.0, 1.0]), 'step time outside the video',
     r'annotation\[0\].*start=-2.0'),
    (lambda r: first(r, None).update({'class': 'MakeTea'}), 'task name does not match',
     r'entry 0 \(vid \S+\): field "class" = \'MakeTea\' but task \d+ of .* is'),
    (lambda r: first(r, None).update(recipe_type=180), 'task id outside the taxonomy',
     r'field "recipe_type" = 180 is not a task index .*0\.\.179'),
    (lambda r: r.append(r[0]), 'video listed twice', r'entry 6: video \S+ is already entry 0'),
])
def test_bad_coin_records_name_file_video_field_and_value(shared_data, tmp_path, mutate,
                                                         reason, message):
    folder, _ = small_coin(shared_data, tmp_path, mutate)
    videos, bad = read_coin_annotations(folder / 'train.json',
                                        load_taxonomy(shared_data / 'coin/taxonomy.json'))
    assert [err.reason for err in bad] == [reason]
    assert str(folder / 'train.json') in str(bad[0])
    assert bad[0].vid in str(bad[0])
    assert re.search(message, str(bad[0])), str(bad[0])
    assert len(videos) == 5 + (reason == 'video listed twice')


def test_coin_dataset_skips_and_counts_bad_videos(shared_data, tmp_path):
    """PlanningDataset on a small COIN file with synthetic features: a video also listed in
    the other split and one with an unknown step id are errors, or skipped and counted."""
    def break_one(records):
        first(records)[0]['id'] = '9999'
    folder, records = small_coin(shared_data, tmp_path, break_one)
    shared_vid = next(iter(records[1]))
    (folder / 'test.json').write_text(json.dumps([records[1]]))  # also in the test split
    cfg = dict(dataset_config('coin', 'train', 3, shared_data), data_root=str(folder),
               taxonomy=str(shared_data / 'coin/taxonomy.json'), annotation_file='train.json',
               other_split='test.json', feature_dir=str(folder / 'features'), cache_dir=None,
               split='test')
    taxonomy, videos = source_windows(dict(cfg, skip_bad_videos=True))[::2]
    write_synthetic_features(videos, SyntheticFeatureGenerator(taxonomy), folder / 'features',
                             progress=False, dataset='coin', dtype='float16')
    with pytest.raises(ValueError, match=r'annotation\[0\].*9998 is outside the taxonomy'):
        DATASETS.build(cfg)
    dataset = DATASETS.build(dict(cfg, skip_bad_videos=True))
    assert dataset.skipped == Counter({'action id outside the taxonomy': 1,
                                       'video in both splits': 1})
    assert shared_vid not in {w.vid for w in dataset.windows}
    assert len({w.vid for w in dataset.windows}) == 4


def test_coin_synthetic_features_float16_within_tolerance(shared_data, tmp_path):
    taxonomy, _, videos = source_windows(dataset_config('coin', 'test', 3, shared_data))
    generator = SyntheticFeatureGenerator(taxonomy)
    sizes = {}
    for dtype in ('float32', 'float16'):
        info = write_synthetic_features(videos[:4], generator, tmp_path / dtype, progress=False,
                                        dataset='coin', dtype=dtype)
        sizes[dtype] = info['bytes']
    assert sizes['float16'] < 0.51 * sizes['float32']
    for video in videos[:4]:
        exact = generator.video_frames(video)
        stored = load_features(tmp_path / 'float16' / f'{video.feature}.npz', 512)
        assert stored.dtype == np.float32 and stored.shape == exact.shape
        assert np.all(np.abs(stored - exact) <= FLOAT16_TOLERANCE * np.abs(exact) + 1e-7)
        assert np.array_equal(load_features(tmp_path / 'float32' / f'{video.feature}.npz', 512),
                              exact)


def test_crosstask_105_windows_are_the_133_windows_relabelled_by_name(shared_data):
    """configs/mtid_protocol: the official T=3 windows, each 133 id replaced by the 105 id of
    the same action name (the authors' create_split.py), checked in plain Python."""
    from vpn_plugin.data_paths import load_config
    cfg = load_config(str(REPO / 'configs/mtid_protocol/vpn_crosstask105_t3.py'),
                      data_root=str(shared_data))
    taxonomy, windows, _ = source_windows(cfg.test_dataloader.dataset.to_dict())
    root = shared_data / 'crosstask'
    names = {int(a): n for acts in json.loads((root / 'taxonomy_133.json').read_text()).values()
             for a, n in acts.items()}
    merged = {n: int(a) for acts in json.loads((root / 'taxonomy_105.json').read_text()).values()
              for a, n in acts.items()}
    official = json.loads((root / 'splits/test_T3_133.json').read_text())
    assert [list(w.steps) for w in windows] == [
        [merged[names[r[2]]] for r in s['id']['legal_range']] for s in official]
    assert taxonomy.num_actions == 105 and cfg.model.num_actions == 105
    assert cfg.test_dataloader.dataset.observation == 'concat3'
    assert cfg.test_evaluator.extra_metrics == ['miou_batch']

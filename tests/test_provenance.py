"""Feature provenance (issue 38): the record each feature tool writes, the folder fingerprint,
the ``features`` of every results row, and the captions, marks and mix refusal of the tables
and figures."""
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.datasets.provenance import (PROVENANCE_FILE, SAMPLED_FILES, feature_provenance,
                                            folder_fingerprint, write_provenance)
from vpn_plugin.protocol.provenance import (SYNTHETIC_MARK, UNUSABLE_MARK, check_feature_mix,
                                            feature_marks)
from vpn_plugin.protocol.report import build_table, to_latex, to_markdown
from vpn_plugin.protocol.results import (ResultRow, append_result, mean_over_datasets,
                                         read_results)
from test_hostile_tools import user_error
from tool_modules import load_tool


def feature_folder(folder: Path, count: int = 12, seed: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(count):
        np.savez(folder / f'task_v{i}.npz', frames_features=rng.random((5, 4), np.float32))
    return folder


def test_synthetic_tool_records_generator_and_seed(shared_data, tmp_path):
    load_tool('make_synthetic_features').main(['--dataset', 'niv', '--data-root',
                                               str(shared_data), '--out', str(tmp_path / 's'),
                                               '--seed', '4', '--difficulty', '0.25'])
    folder = tmp_path / 's/features'
    record = json.loads((folder / PROVENANCE_FILE).read_text())
    assert (record['kind'], record['seed'], record['difficulty'], record['dataset']) == (
        'synthetic', 4, 0.25, 'niv')
    features = feature_provenance(folder)
    count = len(list(folder.glob('*.npz')))
    assert features['kind'] == 'synthetic' and features['files'] == count
    assert features['label'] == (f'synthetic (make_synthetic_features.py: seed 4, difficulty '
                                 f'0.25), fingerprint {features["fingerprint"]} ({count} files)')


def test_fingerprint_sees_names_sizes_and_sampled_contents(tmp_path):
    folder = feature_folder(tmp_path / 'f')
    first = folder_fingerprint(folder)['fingerprint']
    (folder / 'notes.txt').write_text('not a feature file')
    assert folder_fingerprint(folder)['fingerprint'] == first  # only *.npz / *.npy count
    # every file is sampled when there are at most SAMPLED_FILES: a same-size rewrite shows
    small = feature_folder(tmp_path / 'small', count=SAMPLED_FILES)
    before = folder_fingerprint(small)['fingerprint']
    np.savez(small / 'task_v0.npz', frames_features=np.zeros((5, 4), np.float32))
    assert folder_fingerprint(small)['fingerprint'] != before
    np.savez(folder / 'task_v99.npz', frames_features=np.zeros((5, 4), np.float32))
    assert folder_fingerprint(folder)['fingerprint'] != first  # a file added
    # an independent oracle of the stated method: names + sizes, then sampled contents
    files = sorted(folder.glob('*.npz'))
    digest = hashlib.sha256(b''.join(f'{p.name}\0{p.stat().st_size}\n'.encode() for p in files))
    for path in sorted(files, key=lambda p: hashlib.sha1(p.name.encode()).hexdigest())[
            :SAMPLED_FILES]:
        digest.update(path.read_bytes())
    assert folder_fingerprint(folder)['fingerprint'] == digest.hexdigest()[:16]


def test_a_folder_without_a_record_is_user_features_and_a_changed_one_says_so(tmp_path):
    folder = feature_folder(tmp_path / 'mine')
    features = feature_provenance(folder)
    assert features['kind'] == 'user'
    assert features['label'].startswith('user features, fingerprint ')
    write_provenance(folder, dict(kind='synthetic', seed=1, generator='make_synthetic_features.py'))
    assert 'changed' not in feature_provenance(folder)['label']
    (folder / 'task_v0.npz').unlink()
    changed = feature_provenance(folder)
    assert changed['changed_since_record'] is True
    assert 'files changed since the record was written' in changed['label']


def test_older_manifests_are_read(tmp_path):
    synthetic = feature_folder(tmp_path / 'old/features')
    (tmp_path / 'old/synthetic_manifest.json').write_text(json.dumps(dict(seed=2,
                                                                          difficulty=0.5)))
    assert feature_provenance(synthetic)['label'].startswith(
        'synthetic (make_synthetic_features.py: seed 2, difficulty 0.5)')
    extracted = feature_folder(tmp_path / 'extracted')
    (extracted / 'extraction.json').write_text(json.dumps(dict(weights='random')))
    assert feature_provenance(extracted)['kind'] == 'random-weights'
    (extracted / PROVENANCE_FILE).write_text('{"kind": "magic"}')
    with pytest.raises(ValueError, match=r'provenance.json: field "kind" = \'magic\''):
        feature_provenance(extracted)


def test_converted_folder_carries_its_source(tmp_path, capsys):
    src = feature_folder(tmp_path / 'src')
    write_provenance(src, dict(kind='synthetic', seed=3, generator='make_synthetic_features.py'))
    assert load_tool('convert_features').main(['--src', str(src), '--dst', str(tmp_path / 'dst'),
                                               '--frame-dim', '4']) == 0
    features = feature_provenance(tmp_path / 'dst')
    assert features['kind'] == 'converted' and features['source']['seed'] == 3
    assert features['label'].startswith(f'converted from {src.resolve()} (synthetic (make_syn')
    row = ResultRow('VPN', 0, 3, {'success_rate': 1.0}, features=features)
    assert feature_marks([row]) == {'VPN': SYNTHETIC_MARK}  # the source's kind counts


def synthetic_rows(method='VPN', seeds=(0, 1, 2), fingerprint='aaaa', kind='synthetic',
                   dataset='crosstask'):
    label = f'{kind} (make_synthetic_features.py: seed 0), fingerprint {fingerprint} (9 files)'
    return [ResultRow(method, seed, 3, {'success_rate': 20.0 + seed}, dataset=dataset,
                      features=dict(kind=kind, fingerprint=fingerprint, label=label))
            for seed in seeds]


def test_table_names_features_marks_synthetic_and_refuses_a_mix():
    rows = synthetic_rows() + synthetic_rows('Base', kind='user', fingerprint='aaaa')
    # one fingerprint, two kinds recorded: still two sources
    with pytest.raises(ValueError, match=r"dataset 'crosstask' were trained or tested on 2 "
                                         r"feature sources: .*VPN seeds \[0, 1, 2\].*Base "
                                         r"seeds.*--allow-mixed-features"):
        build_table(rows, ['success_rate'])
    rows = synthetic_rows() + synthetic_rows('Base')
    table = build_table(rows, ['success_rate'])
    markdown = to_markdown(table)
    assert f'| VPN{SYNTHETIC_MARK} |' in markdown and f'| Base{SYNTHETIC_MARK} |' in markdown
    assert ('Features: synthetic (make_synthetic_features.py: seed 0), fingerprint aaaa '
            '(9 files).') in markdown
    assert f'{SYNTHETIC_MARK} synthetic features: a check of the pipeline' in markdown
    latex = to_latex(table)
    assert r'VPN\textsuperscript{\textbardbl}' in latex and SYNTHETIC_MARK not in latex
    mixed = synthetic_rows() + synthetic_rows('Other', fingerprint='bbbb')
    text = to_markdown(build_table(mixed, ['success_rate'], allow_mixed_features=True))
    assert 'fingerprint aaaa (9 files) (VPN); synthetic' in text and '(Other)' in text


def test_unusable_and_unrecorded_rows_are_said():
    unusable = synthetic_rows(kind='random-weights')
    unusable[0].features['label'] = unusable[1].features['label'] = \
        unusable[2].features['label'] = 'UNUSABLE: S3D with random weights, fingerprint c'
    text = to_markdown(build_table(unusable, ['success_rate']))
    assert f'| VPN{UNUSABLE_MARK} |' in text and 'these numbers mean nothing' in text
    old = [ResultRow('VPN', s, 3, {'success_rate': 1.0}) for s in range(3)]
    assert 'Features: not recorded in the rows.' in to_markdown(build_table(old, ['success_rate']))
    with pytest.raises(ValueError, match='not recorded in the rows'):
        check_feature_mix(old + synthetic_rows('Base', dataset=''))
    llm = [ResultRow('GPT', 0, 3, {'success_rate': 5.0}, features=dict(
        kind='none', label='no features: prompts from the annotations'))]
    check_feature_mix(llm + synthetic_rows())  # a planner without features mixes with any
    assert 'GPT: no features: prompts from the annotations' in to_markdown(
        build_table(llm + synthetic_rows(), ['success_rate']))


def test_averaged_rows_keep_every_datasets_features():
    rows = synthetic_rows(dataset='crosstask') + synthetic_rows(dataset='niv', fingerprint='n')
    averaged = mean_over_datasets(rows)
    assert {r.features['kind'] for r in averaged} == {'synthetic'}
    assert averaged[0].features['fingerprint'] == 'aaaa+n'
    assert feature_marks(averaged) == {'VPN': SYNTHETIC_MARK}


def test_report_and_plots_tools_refuse_a_mix_unless_asked(tmp_path, capsys):
    results = tmp_path / 'r.jsonl'
    for row in synthetic_rows() + synthetic_rows('Other', fingerprint='bbbb'):
        row.params = 10
        append_result(results, row)
    assert read_results(results)[0].features['fingerprint'] == 'aaaa'  # kept in the file
    assert '2 feature sources' in user_error('report', [results, '--metrics', 'success_rate'])
    load_tool('report').main([str(results), '--metrics', 'success_rate',
                              '--allow-mixed-features'])
    assert 'fingerprint bbbb' in capsys.readouterr().out
    assert '2 feature sources' in user_error('plots', ['params', results, '--out',
                                                       tmp_path / 'p'])
    load_tool('plots').main(['params', str(results), '--out', str(tmp_path / 'p'),
                             '--allow-mixed-features'])
    assert (tmp_path / 'p.png').is_file()


def test_figures_name_the_features_and_mark_the_methods(tmp_path, monkeypatch):
    from test_report_plots import figure_texts
    from vpn_plugin.protocol.plots import plot_params_vs_metric
    texts = figure_texts(monkeypatch)
    rows = synthetic_rows() + synthetic_rows('Base')
    for row in rows:
        row.params = 1000 if row.method == 'VPN' else 10
    plot_params_vs_metric(rows, 'success_rate', tmp_path / 'p')
    assert f'VPN{SYNTHETIC_MARK}' in texts and f'Base{SYNTHETIC_MARK}' in texts
    note = next(t for t in texts if t.startswith('Error bars'))
    assert 'Features: synthetic (make_synthetic_features.py: seed 0), fingerprint aaaa' in \
        note.replace('\n', ' ')


def test_extraction_records_recipe_and_weights_hash(tmp_path):
    import torch
    from test_extract_features import SIZE, write_video
    from vpn_plugin.apis import init_s3d
    videos = tmp_path / 'videos'
    videos.mkdir()
    write_video(videos / 'clip.mp4', 20)
    weights = tmp_path / 's3d_howto100m.pth'
    torch.save(init_s3d(random_weights=True, seed=1).state_dict(), weights)
    common = [str(videos), '--size', str(SIZE), '--num-workers', '0', '--device', 'cpu']
    load_tool('extract_features').main(common + ['--out', str(tmp_path / 'real'),
                                                 '--weights', str(weights)])
    features = feature_provenance(tmp_path / 'real')
    assert features['kind'] == 'extracted' and features['files'] == 1
    assert features['weights_sha256'] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert features['label'].startswith(
        f'extracted (S3D video_embedding, weights s3d_howto100m.pth sha256 '
        f'{features["weights_sha256"][:16]}, recipe chunk=16 crop=center fps=16.0 '
        f'jpeg_quality=95 size={SIZE})')
    load_tool('extract_features').main(common + ['--out', str(tmp_path / 'random'),
                                                 '--random-weights'])
    unusable = feature_provenance(tmp_path / 'random')
    assert unusable['kind'] == 'random-weights' and unusable['label'].startswith('UNUSABLE')
    row = ResultRow('VPN', 0, 3, {'success_rate': 1.0}, features=unusable)
    assert feature_marks([row]) == {'VPN': UNUSABLE_MARK}


def test_a_row_says_when_training_and_test_features_differ():
    from vpn_plugin.datasets.provenance import run_features
    test = dict(kind='user', fingerprint='t', label='user features, fingerprint t')
    train = dict(kind='synthetic', fingerprint='s', label='synthetic, fingerprint s')
    assert run_features(None, test) == test and run_features(dict(test), test) == test
    mixed = run_features(train, test)
    assert mixed['label'] == ('trained on synthetic, fingerprint s; tested on user features, '
                              'fingerprint t')
    row = ResultRow('VPN', 0, 3, {'success_rate': 1.0}, features=mixed)
    assert feature_marks([row]) == {'VPN': SYNTHETIC_MARK}
    with pytest.raises(ValueError, match='2 feature sources'):  # another source than test's
        check_feature_mix([row, ResultRow('VPN', 1, 3, {'success_rate': 1.0}, features=test)])
    unknown = run_features({}, test)  # a training finished before features were recorded
    assert unknown['label'].startswith('trained on features not recorded; tested on user')


def test_overlap_table_names_the_features(tmp_path):
    from test_report_plots import overlap_rows
    from vpn_plugin.protocol.plots import error_overlap, overlap_table
    rows, _ = overlap_rows(tmp_path)
    for row in rows:
        row.features = synthetic_rows()[0].features
    table = overlap_table([error_overlap(rows, 'VPN', 'Base')])
    assert f'| VPN{SYNTHETIC_MARK} | Base{SYNTHETIC_MARK} |' in table
    assert 'Features: synthetic (make_synthetic_features.py: seed 0), fingerprint aaaa' in table


def test_a_mix_of_sources_with_one_label_names_what_tells_them_apart():
    """Before: a record edited by hand (its label kept, another fingerprint) was refused with
    the same text for both sources."""
    rows = synthetic_rows() + synthetic_rows('Base')
    for row in rows[3:]:
        row.features['fingerprint'] = 'bbbb'
    with pytest.raises(ValueError, match=r'fingerprint aaaa \(9 files\) \[synthetic:aaaa\] '
                                         r'\(VPN seeds \[0, 1, 2\]\); .*\[synthetic:bbbb\] '
                                         r'\(Base seeds'):
        check_feature_mix(rows)

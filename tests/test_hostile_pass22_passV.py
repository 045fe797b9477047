"""Nineteenth hostile pass, passV (video and feature tools, readers of user-built folders):
each test fails on 84e3204 unless it is marked as a guard (a no-false-refusal / no-false-caveat
case that passed there too). Case ids: /tmp/passV_log.md."""
import json
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.data_paths import REPO_ROOT

SHARED_DATA = REPO_ROOT.parent / 'shared' / 'data'
needs_shared = pytest.mark.skipif(not (SHARED_DATA / 'niv' / 'taxonomy.json').is_file(),
                                  reason='../shared/data not beside the repository')


# ------------------------------------------------ H23, H24: the default data root
@needs_shared
def test_dataset_stats_default_data_root_is_the_repository_s_from_any_directory(
        tmp_path, monkeypatch, capsys):
    """Before: "../shared/data" was read from the working directory: from any other directory
    the documented default was refused ("taxonomy .../shared/data/niv/taxonomy.json does not
    exist")."""
    from tools.dataset_stats import main
    monkeypatch.chdir(tmp_path)
    assert main(['--dataset', 'niv', '--horizons', '3', '--json']) == 0
    printed = json.loads(capsys.readouterr().out)
    assert Path(printed['data_root']).resolve() == SHARED_DATA.resolve()
    assert printed['rows'][0]['test_windows'] == 270  # the shared NIV test split at T=3


@needs_shared
def test_make_synthetic_features_default_data_root_is_the_repository_s(tmp_path,
                                                                         monkeypatch):
    """Before: "taxonomy ../shared/data/niv/taxonomy.json does not exist" from any directory
    but the repository root."""
    from tools.make_synthetic_features import main
    monkeypatch.chdir(tmp_path)
    main(['--dataset', 'niv', '--out', str(tmp_path / 'syn')])
    assert len(list((tmp_path / 'syn' / 'features').glob('*.npz'))) == 141  # NIV's videos


def test_default_data_root_is_the_folder_the_shipped_configs_read():
    """Guard: one default, the configs' own data_root (whatever the working directory)."""
    from vpn_plugin.datasets.sources import dataset_config, default_data_root
    for dataset in ('crosstask', 'niv', 'coin'):
        root = default_data_root(dataset)
        assert root.is_absolute()
        assert Path(dataset_config(dataset, 'test', 3)['data_root']) == root / dataset


# ------------------------------------------------ H16: the record of a run that wrote nothing
def _failed_run_folder(folder: Path, settings: dict) -> Path:
    """What a finished extraction whose every video failed leaves (as extract_features.py)."""
    folder.mkdir()
    (folder / 'extraction.json').write_text(json.dumps(settings))
    (folder / 'failures.tsv').write_text('v/vfr.mp4\tframe recipe chunk 16 at 30 fps ...\n')
    (folder / 'provenance.json').write_text(json.dumps(dict(
        kind='extracted', tool='extract_features.py', recorded_files=0, recorded_bytes=0)))
    return folder


NATIVE = dict(recipe=dict(fps=None, chunk=16, crop='center', size=64, jpeg_quality=95),
              naming='stem', network='S3D video_embedding', weights='random')
RESAMPLED = dict(NATIVE, recipe=dict(NATIVE['recipe'], fps=16.0))


def test_a_run_into_the_folder_of_a_run_that_wrote_nothing_replaces_its_record(tmp_path,
                                                                              capsys):
    """Before: after `--native-fps` refused a VFR video (advising --fps 16), the advised run
    into the same --out was refused: "the features in o/nv were extracted with other settings"
    although no feature was ever written there."""
    from vpn_plugin.video.extract import MANIFEST, check_manifest, write_manifest
    folder = _failed_run_folder(tmp_path / 'nv', NATIVE)
    check_manifest(folder, RESAMPLED)
    assert 'wrote no feature file' in capsys.readouterr().out
    write_manifest(folder, RESAMPLED)
    assert json.loads((folder / MANIFEST).read_text()) == RESAMPLED
    assert not (folder / 'provenance.json').exists()  # the run writes its own when it ends
    check_manifest(folder, RESAMPLED)  # a second rank / a resume: the same settings


@pytest.mark.parametrize('leftover', ['features', 'partial', 'files_recorded'])
def test_other_settings_are_still_refused_beside_features_or_a_run_in_flight(tmp_path,
                                                                              leftover):
    """Guard: a folder holding a feature file, a temporary file of a run in flight, or a
    provenance recording files keeps its settings (mixed features would be wrong numbers)."""
    from vpn_plugin.video.extract import MANIFEST, check_manifest, write_manifest
    folder = _failed_run_folder(tmp_path / 'nv', NATIVE)
    if leftover == 'features':
        np.savez(folder / 'a.npz', frames_features=np.zeros((2, 512), np.float32))
    elif leftover == 'partial':
        (folder / '.a.npz.partial-host-123').write_bytes(b'')
    else:
        (folder / 'provenance.json').write_text(json.dumps(dict(
            tool='extract_features.py', recorded_files=2)))
    with pytest.raises(ValueError, match='were extracted with other settings'):
        check_manifest(folder, RESAMPLED)
    write_manifest(folder, RESAMPLED)  # never replaces a live record
    assert json.loads((folder / MANIFEST).read_text()) == NATIVE



# ------------------------------------------------ D40, D41, H45: a test video in training
KITCHEN = REPO_ROOT / 'examples' / 'custom_dataset' / 'kitchen'
KCFG = REPO_ROOT / 'examples' / 'custom_dataset' / 'vpn_kitchen_t3.py'


def _kitchen(tmp_path, edit=None) -> Path:
    """kitchen's annotations (no features: the split checks read annotations); ``edit``
    changes train.json's entries given test.json's."""
    root = tmp_path / 'kitchen'
    root.mkdir()
    for name in ('taxonomy.json', 'train.json', 'test.json', 'state_descriptions.json'):
        (root / name).write_bytes((KITCHEN / name).read_bytes())
    if edit:
        train = json.loads((root / 'train.json').read_text())
        edit(train, json.loads((root / 'test.json').read_text()))
        (root / 'train.json').write_text(json.dumps(train))
    return root


def _test_video_as(task):
    def edit(train, test):
        train.append(dict(test[0], task=task))  # test.json writes "0_make_tea"
    return edit


@pytest.mark.parametrize('task', ['make_tea', 0])
def test_a_test_video_listed_in_training_under_another_task_spelling_is_refused(tmp_path,
                                                                               task):
    """Before: tea_12 of test.json ("task": "0_make_tea", stem 0_make_tea_tea_12) also in
    train.json as "make_tea" (stem make_tea_tea_12, a copy of its file) was trained on and
    scored without a word: the split checks compared feature stems only."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.datasets.planning_dataset import check_split_disjoint
    from vpn_plugin.datasets.stats import window_statistics
    root = _kitchen(tmp_path, _test_video_as(task))
    match = "video 'tea_12' of task 0: feature '.*tea_12' in training, '0_make_tea_tea_12'"
    with pytest.raises(ValueError, match=match):
        window_statistics(config=str(KCFG), data_root=str(root), horizons=[3])
    with pytest.raises(ValueError, match=match):  # train.py / test.py (the runner's check)
        check_split_disjoint(load_config(KCFG, data_root=root))


def test_one_video_id_in_two_tasks_is_two_videos(tmp_path):
    """Guard: ids repeat across tasks (the default stem is "<task>_<vid>"): a training video
    of make_toast named like a make_tea test video is another video."""
    from vpn_plugin.datasets.stats import window_statistics

    def edit(train, test):
        toast = next(entry for entry in train if entry['task'] == 'make_toast')
        train.append(dict(toast, vid=test[0]['vid']))
    root = _kitchen(tmp_path, edit)
    assert window_statistics(config=str(KCFG), data_root=str(root), horizons=[3])[0][
        'train_windows'] > 0


# ------------------------------------------------ D97, D98, D113, D116: an option given twice
@pytest.mark.parametrize('tool, argv', [
    ('extract_features', ['v.mp4', '--out', 'a', '--out', 'b']),
    ('extract_features', ['v.mp4', '--out', 'a', '--size', '64', '--size', '32']),
    ('dataset_stats', ['--dataset', 'niv', '--horizons', '3', '--horizons', '4']),
    ('export_windows', ['--dataset', 'niv', '--split', 'test', '--horizon', '3', '--horizon',
                        '4', '--out', 'w.json']),
    ('plan', ['c.py', 'k.pth', '--features', 'a.npz', '--features', 'b.npz'])])
def test_an_option_given_twice_with_two_values_is_refused(tool, argv, capsys):
    """Before: argparse kept the last value and dropped the first without a word (the run
    wrote into b, counted T=4 alone, planned from b.npz)."""
    import importlib
    module = importlib.import_module(f'tools.{tool}')
    with pytest.raises(SystemExit) as exit_:
        module.main(argv)
    assert exit_.value.code == 2
    assert 'is given 2 times' in capsys.readouterr().err


def test_an_option_repeated_with_its_value_or_made_to_repeat_is_read():
    """Guard: the same value again drops nothing; append / count options and two flags of one
    destination (--fps / --native-fps: their own check) keep argparse's meaning."""
    import argparse
    from vpn_plugin.errors import parse_once
    parser = argparse.ArgumentParser()
    parser.add_argument('--out')
    parser.add_argument('--horizons', nargs='+', type=int, default=[3])
    parser.add_argument('--overwrite', action='store_true')
    parser.add_argument('--pair', action='append')
    parser.add_argument('-v', action='count')
    parser.add_argument('--fps', type=float)
    parser.add_argument('--native-fps', dest='fps', action='store_const', const=None)
    args = parse_once(parser, ['--out', 'a', '--out', 'a', '--horizons', '3', '4', '--overwrite',
                               '--overwrite', '--pair', 'x', '--pair', 'y', '-v', '-v',
                               '--fps', '16', '--native-fps'])
    assert vars(args) == dict(out='a', horizons=[3, 4], overwrite=True, pair=['x', 'y'], v=2,
                              fps=None)
    assert vars(parse_once(parser, [])) == dict(out=None, horizons=[3], overwrite=False,
                                                pair=None, v=None, fps=None)


def test_cfg_options_given_in_two_flags_are_merged_not_refused():
    """Guard: --cfg-options given twice merges its keys (one value per key, its own check):
    nothing is dropped, so parse_once reads it."""
    from tools.plan import parse_args
    args = parse_args(['c.py', 'k.pth', '--cfg-options', 'model.a=1', '--cfg-options',
                       'model.b=2'])
    assert args.cfg_options == {'model.a': 1, 'model.b': 2}


# ------------------------------------------------ H20: make_text_features' advice
@pytest.mark.parametrize('encoder, label', [(None, 'all-MiniLM-L6-v2'),
                                            ('/models/my-encoder', 'my-encoder'),
                                            ('/models/clip-vit-large-patch14', None)])
def test_the_printed_text_config_declares_the_encoder_that_made_the_file(encoder, label):
    """Before: "in the config: model.text_embeddings=dict(file='o/t0.npy')" for features of
    the installed MiniLM: a config made as advised took them as the paper's CLIP features (its
    log "encoder not declared (taken as the paper's CLIP)", no stand-in label on its rows).
    Now the line names the encoder, which labels a non-CLIP file a stand-in (a CLIP one not)."""
    import ast
    from tools.make_text_features import text_config
    from vpn_plugin.models.text_embeddings import stand_in_label
    line = text_config('o/t0.npy', encoder)
    assert line.startswith('model.text_embeddings=dict(')
    declared = ast.literal_eval('{' + line[len('model.text_embeddings=dict('):-1].replace(
        "file=", "'file': ").replace(", encoder=", ", 'encoder': ") + '}')
    assert declared['file'] == 'o/t0.npy'
    found = stand_in_label(dict(declared, pooling='mean'), width=384)
    assert (found is None) if label is None else (label in found and 'not the paper' in found)


# ------------------------------------------------ H47: a feature file named with a line break
def test_the_printed_plan_names_a_file_with_a_line_break_on_its_line(monkeypatch):
    """Before: "features o/new<LF>line.npz: 2 s of S3D features ..." printed the name raw: the
    line broke and its second half read as a line about a file "line.npz"."""
    from types import SimpleNamespace

    import torch

    import vpn_plugin.models.plan_display as display
    from vpn_plugin.apis.video import format_video_plan
    monkeypatch.setattr(display, 'task_lines', lambda sample, taxonomy: [])
    monkeypatch.setattr(display, 'outside_task_lines', lambda plan, taxonomy, task: [])
    monkeypatch.setattr(display, 'plan_task', lambda sample: 0)
    sample = SimpleNamespace(metainfo=dict(num_seconds=2), pred_plan=torch.tensor([0]))
    taxonomy = SimpleNamespace(action_names=['boil water'])
    lines = format_video_plan(sample, taxonomy, 'o/new\nline.npz', 0, 1, source='features')
    assert lines[0] == (r'features o/new\nline.npz: 2 s of S3D features; plan from the state '
                        'at 0 s to the state at 1 s')
    assert lines[1:] == ['  1    boil water']


# ------------------------------------------------ H48, H49: output names with a line break
def test_convert_features_prints_a_folder_with_a_line_break_on_its_line(tmp_path, capsys):
    """Before: "... refused 0 -> o/nl" then a line "X/cv": the --dst folder printed raw."""
    from tools.convert_features import main
    src = tmp_path / 'src'
    src.mkdir()
    np.save(src / 'a.npy', np.zeros((3, 512), np.float32))
    main(['--src', str(src), '--dst', str(tmp_path / 'nl\nX')])
    printed = [line for line in capsys.readouterr().out.splitlines() if 'converted' in line]
    assert printed and printed[-1].endswith('nl\\nX'), printed


def test_make_text_features_prints_a_file_with_a_line_break_on_its_line(tmp_path, capsys,
                                                                       monkeypatch):
    """Before: "o/nl" then a line "X/t.npy: (9, 6, 384) ...": the --out file printed raw."""
    import torch

    import vpn_plugin.models.text_embeddings as text
    from tools.make_text_features import main
    monkeypatch.setattr(text, 'load_state_features', lambda **kwargs: torch.zeros(9, 6, 384))
    out = tmp_path / 'nl\nX.npy'
    main(['--taxonomy', str(KITCHEN / 'taxonomy.json'), '--state-descriptions',
          str(KITCHEN / 'state_descriptions.json'), '--out', str(out)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f'{tmp_path}/nl\\nX.npy: (9, 6, 384)'), lines
    assert np.load(out).shape == (9, 6, 384)

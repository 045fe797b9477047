"""Hostile pass 19 (passV, session 14: video and feature tools, user-built folders, dataset
readers): what it found, each case with a test that fails on ab2cb94 (log: /tmp/passV_log.md),
and the no-false-caveat copies of each changed comparison."""
import json
import re
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tool_modules import load_tool

from vpn_plugin.datasets.annotations import BadVideoError, count_suspicious
from vpn_plugin.datasets.features import load_features
from vpn_plugin.datasets.taxonomy import load_taxonomy
from vpn_plugin.datasets.validation import AnnotationWarnings, normalized_name

REPO = Path(__file__).resolve().parents[1]
KITCHEN = REPO / 'examples/custom_dataset/kitchen'
CHINESE = {'boil water': '烧水', 'put tea bag in cup': '放茶包', 'pour water into cup': '倒水',
           'add milk': '加奶', 'stir tea': '搅拌', 'slice bread': '切面包', 'toast bread': '烤面包',
           'spread butter': '抹黄油', 'add jam': '加果酱'}


def chinese_kitchen(tmp_path, drop=(), names=CHINESE) -> tuple:
    """The example's taxonomy and state descriptions with the actions named in ``names``
    (Chinese by default); the descriptions of the actions ``drop`` left out."""
    taxonomy = json.loads((KITCHEN / 'taxonomy.json').read_text())
    taxonomy = {task: {aid: names.get(name, name) for aid, name in actions.items()}
                for task, actions in taxonomy.items()}
    described = json.loads((KITCHEN / 'state_descriptions.json').read_text())
    described = {task: {names.get(action.lower(), action): entry
                        for action, entry in actions.items() if action.lower() not in drop}
                 for task, actions in described.items()}
    (tmp_path / 'taxonomy.json').write_text(json.dumps(taxonomy, ensure_ascii=False))
    (tmp_path / 'sd.json').write_text(json.dumps(described, ensure_ascii=False))
    return tmp_path / 'taxonomy.json', tmp_path / 'sd.json'


def described_texts(taxonomy_file, descriptions_file):
    from vpn_plugin.models.text_embeddings import state_texts
    taxonomy = load_taxonomy(taxonomy_file)
    return state_texts(taxonomy.action_names,
                       [taxonomy.task_names[t] for t in taxonomy.action_task], descriptions_file)


# ------------------------------------------------ H12, H13, H17: names outside ASCII
def test_names_of_any_script_are_told_apart():
    """Before: the name rule kept [0-9a-z] only, so every Chinese name was '' (H12: two
    actions refused as "one name"; H13: "two actions of one name" warned)."""
    assert normalized_name('烧水') != normalized_name('放茶包')
    assert normalized_name('Кипятить воду') != normalized_name('Налить воду')
    # no false refusal, no new difference: the ASCII spellings the rule always joined
    assert normalized_name('Make Jello Shots') == normalized_name('make_jello-shots')
    assert normalized_name('Brake on') == normalized_name('brake on!')
    assert normalized_name('ＡＢＣ') == normalized_name('abc')  # fullwidth letters (NFKC)


def test_state_descriptions_in_chinese_are_encoded_each_with_its_own(tmp_path):
    """H12: make_text_features refused '烧水' and '放茶包' as "one name"."""
    taxonomy, described = chinese_kitchen(tmp_path)
    before, after = described_texts(taxonomy, described)
    english_before, _ = described_texts(KITCHEN / 'taxonomy.json',
                                        KITCHEN / 'state_descriptions.json')
    assert before == english_before  # every action its own sentences, in id order


def test_a_missing_description_is_not_taken_from_another_tasks_action(tmp_path):
    """H17: with '加奶' (make tea) undescribed, the lookup "under any task" found the key ''
    and gave it the sentences of '抹黄油' (make toast)."""
    taxonomy, described = chinese_kitchen(tmp_path, drop=('add milk',))
    with pytest.raises(KeyError, match="action 3 '加奶'"):
        described_texts(taxonomy, described)


def test_a_chinese_taxonomy_gets_no_warning_of_two_actions_of_one_name(tmp_path):
    """H13: dataset_stats / every training log warned "2 tasks with two actions of one name
    (... actions 0 and 1 are both '放茶包')"."""
    taxonomy, _ = chinese_kitchen(tmp_path)
    warnings = AnnotationWarnings()
    count_suspicious([], load_taxonomy(taxonomy), warnings)
    assert not warnings, warnings.summary()
    # the warning stays for a task whose two actions are one name
    taxonomy, _ = chinese_kitchen(tmp_path, names={'stir tea': 'Add milk!'})
    count_suspicious([], load_taxonomy(taxonomy), warnings)
    assert 'two actions of one name' in warnings.summary()


def test_action_features_that_the_encoder_cannot_tell_apart_are_refused(tmp_path,
                                                                        monkeypatch):
    """H16: the MiniLM stand-in gave '烧水' and '倒水' (one task) identical rows and the tool
    wrote them without a word (CEFITO's distinct-row check exempted them: one normalized
    name)."""
    import vpn_plugin.models.text_embeddings as text

    def encoded(names, *args):  # rows of characters outside the vocabulary: all alike
        return torch.stack([torch.full((4,), float(name.isascii())) for name in names])
    monkeypatch.setattr(text, '_cached_encoding', encoded)
    taxonomy, _ = chinese_kitchen(tmp_path)
    with pytest.raises(ValueError, match=r"actions 0 '烧水' and 1 '放茶包' got identical"):
        text.load_action_features(taxonomy=str(taxonomy), encoder=None, pooling='mean',
                                  cache_dir=str(tmp_path / 'cache'))
    # distinct rows: read (no false refusal); two actions of ONE name may share theirs
    monkeypatch.setattr(text, '_cached_encoding', lambda names, *args: torch.stack(
        [torch.full((4,), float(len(name))) + torch.arange(4.0) * i
         for i, name in enumerate(names)]))
    assert text.load_action_features(taxonomy=str(taxonomy), encoder=None, pooling='mean',
                                     cache_dir=str(tmp_path / 'cache')).shape == (9, 4)


# ------------------------------------------------ H01: the same weights under another name
@pytest.mark.parametrize('recorded_name', ['s3d.pth', 'link.pth', 's3d_howto100m (copy).pth'])
def test_an_extraction_resumes_with_the_same_weights_under_another_name(tmp_path,
                                                                        recorded_name):
    """Before: extraction.json joined the weights file's NAME with its sha256, and a resume
    through a symlink (or a renamed copy) of the same file was refused as other settings."""
    from vpn_plugin.video.extract import check_manifest
    digest = 'f5c7a323ea06db571b0dea270e832cafd1c6115a362f6e6290cbeac498b940e0'
    settings = dict(recipe=dict(fps=16.0, chunk=16), network='S3D video_embedding',
                    naming='stem', weights=f'{recorded_name} (sha256 {digest})')
    (tmp_path / 'extraction.json').write_text(json.dumps(settings))
    check_manifest(tmp_path, dict(settings, weights=f's3d.pth (sha256 {digest})'))
    with pytest.raises(ValueError, match='were extracted with'):  # other weights: refused
        check_manifest(tmp_path, dict(settings, weights=f's3d.pth (sha256 {"0" * 64})'))
    with pytest.raises(ValueError, match='were extracted with'):
        check_manifest(tmp_path, dict(settings, weights='random'))


# ------------------------------------------------ H33, H34: names printed raw
def test_a_name_with_a_line_break_keeps_the_printed_table_and_summary_whole(tmp_path, capsys):
    """Before: a data root named 'nl<LF>T | 3 | FORGED' printed a row-like line the tool never
    computed above dataset_stats' table, and broke export_windows' summary line."""
    from vpn_plugin.datasets.stats import format_table
    from vpn_plugin.errors import plain_text
    row = dict(horizon=3, train_windows=45, test_windows=14, train_videos=22, test_videos=7,
               actions=9, tasks=2, actions_seen=9, tasks_seen=2, pkg_coverage=100.0,
               warnings={'test': 'a\nWARNING forged'})
    table = format_table('kitchen (data root nl\nT | 3 | FORGED)', [row]).splitlines()
    assert len(table) == 4 and table[0] == r'kitchen (data root nl\nT | 3 | FORGED)'
    assert plain_text('vidéo ☕ x|y') == 'vidéo ☕ x|y'  # printable names as they are
    out = tmp_path / 'w\nT | 3 | FORGED.json'
    assert load_tool('export_windows').main(['--config', str(REPO / 'examples/custom_dataset/'
                                             'vpn_kitchen_t3.py'), '--split', 'test',
                                             '--horizon', '3', '--out', str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and printed[0].endswith(r'w\nT | 3 | FORGED.json') and out.is_file()


# ------------------------------------------------ H23: parent_stem from inside the folder
@pytest.mark.parametrize('given', ['x.mp4', './x.mp4', '../task/x.mp4', 'sub/../x.mp4'])
def test_parent_stem_names_the_folder_of_a_video_named_from_inside_it(tmp_path, monkeypatch,
                                                                      given):
    """Before: `cd videos/task; extract_features.py x.mp4 --naming parent_stem` wrote
    '_x.npz' (the parent of 'x.mp4' is ''), not 'task_x.npz'."""
    from vpn_plugin.video.extract import feature_name
    (tmp_path / 'task' / 'sub').mkdir(parents=True)
    monkeypatch.chdir(tmp_path / 'task')
    assert feature_name(Path(given), 'parent_stem') == 'task_x'
    assert feature_name(tmp_path / 'task' / 'x.mp4', 'parent_stem') == 'task_x'  # as before
    assert feature_name(Path(given), 'stem') == 'x'


# ------------------------------------------------ H27: a random-weights file among real ones
def write_features(folder: Path, usable=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    fields = dict(frames_features=np.ones((5, 8), np.float32))
    if usable is not None:
        fields.update(usable=np.bool_(usable), warning=np.str_('UNUSABLE: S3D with RANDOM '
                                                               'weights'))
    np.savez(folder / 'v.npz', **fields)
    return folder / 'v.npz'


def test_a_random_weights_file_among_real_features_is_refused(tmp_path):
    """Before: a file extract_features --random-weights wrote (usable false: "these features
    and plans mean nothing") copied into a dataset's folder was read without a word."""
    with pytest.raises(BadVideoError, match=r'field "usable" is false .*user features'):
        load_features(write_features(tmp_path / 'user', usable=False), 8)
    # no false refusal: usable files, files without the field, and a random-weights
    # extraction's own folder (its runs are marked UNUSABLE by its provenance)
    assert load_features(write_features(tmp_path / 'real', usable=True), 8).shape == (5, 8)
    assert load_features(write_features(tmp_path / 'plain'), 8).shape == (5, 8)
    random = tmp_path / 'random'
    write_features(random, usable=False)
    (random / 'extraction.json').write_text(json.dumps(dict(weights='random')))
    assert load_features(random / 'v.npz', 8).shape == (5, 8)
    real = tmp_path / 'extracted'  # an extraction with real weights: refused
    write_features(real, usable=False)
    (real / 'extraction.json').write_text(json.dumps(dict(weights='s3d.pth (sha256 ab)')))
    with pytest.raises(BadVideoError, match='in a folder of extracted features'):
        load_features(real / 'v.npz', 8)


# ------------------------------------------------ H35: a test video reading a training file
def kitchen_with_alias(tmp_path, link) -> Path:
    """The example's annotations; test video tea_12 reads features/alias.npz, made by ``link``
    from the training video make_tea_tea_00's file; the whole features folder a link."""
    root = tmp_path / 'k'
    root.mkdir()
    for file in ('taxonomy.json', 'train.json', 'state_descriptions.json'):
        shutil.copy(KITCHEN / file, root)
    test = json.loads((KITCHEN / 'test.json').read_text())
    test[0]['feature'] = 'alias'
    (root / 'test.json').write_text(json.dumps(test))
    real = tmp_path / 'real_features'
    real.mkdir()
    np.savez(real / 'make_tea_tea_00.npz', frames_features=np.ones((5, 512), np.float32))
    link(real / 'make_tea_tea_00.npz', real / 'alias.npz')
    os.symlink(real, root / 'features')
    return root


@pytest.mark.parametrize('link', [lambda src, dst: os.symlink(src.name, dst), os.link])
def test_a_test_video_reading_a_training_videos_file_through_a_link_is_refused(tmp_path, link):
    """Before: dataset_stats (and the runner's split check) compared feature names only; a
    test entry whose feature file was a link to a training video's file passed."""
    from vpn_plugin.datasets.stats import window_statistics
    root = kitchen_with_alias(tmp_path, link)
    config = REPO / 'examples/custom_dataset/vpn_kitchen_t3.py'
    with pytest.raises(ValueError, match=r"1 test video\(s\) read the feature file of a training "
                                         r"video under another name, e.g. test 'alias'"):
        window_statistics(None, str(root), [3], config=config)
    # no false refusal: a byte copy under another name is another file (it cannot be told)
    (tmp_path / 'real_features' / 'alias.npz').unlink()
    shutil.copy(tmp_path / 'real_features' / 'make_tea_tea_00.npz',
                tmp_path / 'real_features' / 'alias.npz')
    assert window_statistics(None, str(root), [3], config=config)[0]['test_windows'] == 14


# ------------------------------------------------ D25: EgoPER's idx 0 named as an action
def test_egoper_conversion_refuses_an_action_at_the_background_idx(tmp_path):
    """Before: action2idx {"pour water": 0, ...} (no "BG") had the 'pour water' segments
    dropped as background ("background dropped": 2) without naming them."""
    from test_egoper import ANNOTATION, convert, write_egoper
    annotation = json.loads(json.dumps(ANNOTATION))
    annotation['coffee']['action2idx'] = {'pour water': 0, 'grind beans': 1, 'brew': 2,
                                          'stir': 3}
    write_egoper(tmp_path, annotation)
    with pytest.raises(SystemExit, match=r"action2idx maps 'pour water' to 0, the background"):
        convert(tmp_path, 'drop')
    assert not (tmp_path / 'out').exists()
    for name in ('BG', 'background', 'Background'):  # EgoPER's own name: converted
        annotation['coffee']['action2idx'] = {name: 0, 'pour water': 1, 'grind beans': 2,
                                              'brew': 3}
        (tmp_path / name).mkdir()
        write_egoper(tmp_path / name, annotation)
        assert convert(tmp_path / name, 'drop') in (0, None)


# ------------------------------------------------ D31, D33, D35: names spelled another way
@pytest.mark.parametrize('stem, on_disk, hint', [
    ('caf\u00e9_12', 'cafe\u0301_12.npz', 'another Unicode normalization (NFD'),
    ('cafe\u0301_12', 'caf\u00e9_12.npz', 'another Unicode normalization (NFC'),
    ('v_12.npz', 'v_12.npz', "given with its extension; expected the file name without it "
                             "('v_12')"),
])
def test_a_missing_feature_file_names_the_file_spelled_another_way(tmp_path, stem, on_disk,
                                                                   hint):
    """Before: "café_12.npy does not exist (nor café_12.npz)" beside a café_12.npz written in
    NFD (both print alike), and "v_12.npz.npy does not exist" for a stem given with '.npz'."""
    np.savez(tmp_path / on_disk, frames_features=np.ones((3, 8), np.float32))
    with pytest.raises(BadVideoError, match=re.escape(hint)):
        load_features(tmp_path / f'{stem}.npy', 8, 'v')
    assert load_features(tmp_path / on_disk, 8).shape == (3, 8)  # the file itself reads


# ------------------------------------------------ H52: extraction.json deleted
def test_an_extraction_folder_without_its_settings_record_is_named_as_such(tmp_path):
    """Before: a folder extract_features.py wrote (its provenance.json says so) whose
    extraction.json was deleted was refused as "not a folder this tool extracted into (a
    dataset's feature folder?)", which was false."""
    from vpn_plugin.video.extract import check_manifest
    settings = dict(recipe=dict(fps=16.0, chunk=16), weights='random')
    write_features(tmp_path / 'ours')
    (tmp_path / 'ours' / 'provenance.json').write_text(json.dumps(
        dict(kind='random-weights', tool='extract_features.py')))
    with pytest.raises(ValueError, match='a provenance.json of extract_features.py, but no '
                                         'extraction.json'):
        check_manifest(tmp_path / 'ours', settings)
    write_features(tmp_path / 'dataset')  # a dataset's folder: as before
    with pytest.raises(ValueError, match='not a folder this tool extracted into'):
        check_manifest(tmp_path / 'dataset', settings)

"""tools/convert_egoper.py on a small annotation.json written in EgoPER's documented format."""
import json
import re

import pytest

from tool_modules import load_tool
from vpn_plugin.data_paths import load_config
from vpn_plugin.datasets import load_taxonomy, read_json_annotations
from vpn_plugin.datasets.sources import source_windows

ANNOTATION = {
    'coffee': {
        'segments': [
            {'video_id': 'coffee_u1_a', 'labels': {
                'time_stamp': [[0.0, 2.5], [2.5, 9.0], [9.0, 14.2], [14.2, 20.0], [20.0, 26.0]],
                'action': [0, 1, 2, 2, 3], 'action_type': [0, 0, 0, 2, 0],
                'error_description': ['', '', '', 'poured too much', '']}},
            {'video_id': 'coffee_u2_b', 'labels': {
                'time_stamp': [[1.0, 4.0], [4.0, 8.0], [8.5, 12.0]],
                'action': [1, 2, 3], 'action_type': [0, 1, 0],
                'error_description': ['', 'wrong order', '']}}],
        'action2idx': {'BG': 0, 'pour water': 1, 'grind beans': 2, 'brew': 3},
        'actiontype2idx': {'normal': 0, 'wrong order': 1, 'wrong amount': 2}},
    'tea': {
        'segments': [
            {'video_id': 'tea_u1_a', 'labels': {
                'time_stamp': [[0.5, 3.0], [3.0, 6.0], [6.0, 7.5]],
                'action': [2, 1, 0], 'action_type': [0, 0, 0], 'error_description': ['', '', '']}},
            {'video_id': 'tea_u3_c', 'labels': {
                'time_stamp': [[0.0, 5.0], [5.0, 9.0]],
                'action': [1, 2], 'action_type': [0, 0], 'error_description': ['', '']}}],
        'action2idx': {'BG': 0, 'boil water': 1, 'add tea bag': 2},
        'actiontype2idx': {'normal': 0, 'wrong order': 1}}}


def write_egoper(tmp_path, annotation=ANNOTATION, per_task=False):
    (tmp_path / 'annotation.json').write_text(json.dumps(annotation))
    splits = {'training.txt': {'coffee': ['coffee_u1_a'], 'tea': ['tea_u1_a']},
              'test.txt': {'coffee': ['coffee_u2_b'], 'tea': ['tea_u3_c']}}
    for name, by_task in splits.items():
        for task, vids in by_task.items():
            folder = tmp_path / 'splits' / (task if per_task else '')
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / name, 'a') as f:
                f.write('\n'.join(vids) + '\n')


def convert(tmp_path, errors, out='out'):
    return load_tool('convert_egoper').main([
        str(tmp_path / 'annotation.json'), '--split-dir', str(tmp_path / 'splits'),
        '--out', str(tmp_path / out), '--errors', errors])


@pytest.mark.parametrize('per_task', [False, True])
def test_converted_dataset_reads_back_with_background_and_errors_as_chosen(tmp_path, per_task):
    write_egoper(tmp_path, per_task=per_task)
    assert convert(tmp_path, 'keep', 'keep') == 0 and convert(tmp_path, 'drop', 'drop') == 0
    taxonomy = load_taxonomy(tmp_path / 'keep/taxonomy.json')
    assert taxonomy.task_names == ['coffee', 'tea']
    assert taxonomy.action_names == ['pour water', 'grind beans', 'brew', 'boil water',
                                     'add tea bag']
    kept, bad = read_json_annotations(tmp_path / 'keep/train.json', taxonomy)
    assert not bad and [v.vid for v in kept] == ['coffee_u1_a', 'tea_u1_a']
    assert kept[0].steps == [(2.5, 9.0, 0), (9.0, 14.2, 1), (14.2, 20.0, 1), (20.0, 26.0, 2)]
    assert kept[1].steps == [(0.5, 3.0, 4), (3.0, 6.0, 3)]  # background (last) dropped
    dropped, _ = read_json_annotations(tmp_path / 'drop/train.json', taxonomy)
    assert dropped[0].steps == [(2.5, 9.0, 0), (9.0, 14.2, 1), (20.0, 26.0, 2)]
    test, _ = read_json_annotations(tmp_path / 'drop/test.json', taxonomy)
    assert [v.steps for v in test] == [[(1.0, 4.0, 0), (8.5, 12.0, 2)],
                                       [(0.0, 5.0, 3), (5.0, 9.0, 4)]]
    record = json.loads((tmp_path / 'drop/conversion.json').read_text())
    assert record['errors'] == 'drop' and record['videos'] == {'train': 2, 'test': 2}
    assert record['segments'] == {'background dropped': 2, 'error segments dropped': 2,
                                  'steps kept': 9}


def test_generated_config_reads_the_files_and_records_the_choice(tmp_path):
    from vpn_plugin.protocol.runner import config_variant
    write_egoper(tmp_path)
    assert convert(tmp_path, 'keep') == 0
    config = str(tmp_path / 'out/dataset.py')
    cfg = load_config(config, horizon=3)
    taxonomy, windows, _ = source_windows(cfg.train_dataloader.dataset.to_dict())
    assert [list(w.steps) for w in windows] == [[0, 1, 1], [1, 1, 2]]
    assert cfg.test_dataloader.dataset.feature_dir == str(tmp_path / 'out/features')
    assert config_variant(config, {}) == {'egoper_errors': 'keep'}


@pytest.mark.parametrize('edit,message', [
    (lambda a: a['coffee']['segments'][1]['labels']['action'].__setitem__(1, 7),
     r"annotation.json: task 'coffee': segments\[1\] \(video coffee_u2_b\): labels.action\[1\] "
     r'= 7 is not an action of task'),
    (lambda a: a['tea']['segments'][0]['labels']['time_stamp'].__setitem__(1, [6.0, 3.0]),
     r"task 'tea': segments\[0\] \(video tea_u1_a\): labels.time_stamp\[1\] = \[6.0, 3.0\]"),
    (lambda a: a['tea']['segments'][1]['labels']['action_type'].pop(),
     r"segments\[1\] \(video tea_u3_c\): labels have different lengths"),
    # issue 33: `true` was read as action 1, `false` as background; a video listed twice was
    # written twice
    (lambda a: a['coffee']['segments'][1]['labels']['action'].__setitem__(1, True),
     r"segments\[1\] \(video coffee_u2_b\): labels.action\[1\] = True; expected an integer"),
    (lambda a: a['coffee']['segments'][1]['labels']['action'].__setitem__(1, False),
     r"labels.action\[1\] = False; expected an integer action idx"),
    (lambda a: a['coffee']['segments'].append(a['coffee']['segments'][0]),
     r"task 'coffee': segments\[2\]: video coffee_u1_a is listed again \(first at task "
     r"'coffee': segments\[0\]\)"),
    # the fourth hostile pass: a string idx was a TypeError traceback; two names on one idx,
    # an undefined action_type and times as strings were converted without a word
    (lambda a: a['tea']['action2idx'].__setitem__('add tea bag', '2'),
     r"task 'tea': action2idx\['add tea bag'\] = '2'; expected an integer >= 0"),
    (lambda a: a['tea']['action2idx'].__setitem__('add tea bag', 1),
     r"task 'tea': action2idx maps both 'boil water' and 'add tea bag' to 1; expected each "
     r"idx once"),
    (lambda a: a['tea']['actiontype2idx'].__setitem__('late', True),
     r"task 'tea': actiontype2idx\['late'\] = True; expected an integer >= 0"),
    (lambda a: a['tea']['segments'][1]['labels'].__setitem__('action_type', [0, 9]),
     r"segments\[1\] \(video tea_u3_c\): labels.action_type\[1\] = 9 is not a type of task "
     r"'tea' \(actiontype2idx values \[0, 1\]\)"),
    (lambda a: a['tea']['segments'][1]['labels']['time_stamp'].__setitem__(0, ['0', '5']),
     r"labels.time_stamp\[0\] = \['0', '5'\]; expected \[start_s, end_s\], two numbers"),
    (lambda a: a['tea']['segments'][1]['labels'].update(time_stamp=[[5.0, 9.0], [0.0, 5.0]]),
     r"\(video tea_u3_c\): labels.time_stamp\[1\] starts at 0.0, before time_stamp\[0\] at "
     r"5.0; expected the segments in time order"),
])
def test_bad_annotations_name_file_task_video_and_field(tmp_path, edit, message):
    annotation = json.loads(json.dumps(ANNOTATION))
    edit(annotation)
    write_egoper(tmp_path, annotation)
    with pytest.raises(SystemExit) as raised:
        convert(tmp_path, 'keep')
    assert re.search(message, str(raised.value)), str(raised.value)
    assert not (tmp_path / 'out').exists()


def test_split_problems_and_the_required_error_choice(tmp_path, capsys):
    write_egoper(tmp_path)
    with open(tmp_path / 'splits/test.txt', 'a') as f:
        f.write('coffee_u1_a\n')
    with pytest.raises(SystemExit, match='video coffee_u1_a is also in the train list'):
        convert(tmp_path, 'drop')
    (tmp_path / 'splits/test.txt').write_text('tea_u3_c\nghost_video\n')
    with pytest.raises(SystemExit, match=r"no annotation, e.g. \['ghost_video'\]"):
        convert(tmp_path, 'drop')
    with pytest.raises(SystemExit):
        load_tool('convert_egoper').main([str(tmp_path / 'annotation.json'), '--split-dir',
                                          str(tmp_path / 'splits'), '--out', str(tmp_path)])
    assert '--errors' in capsys.readouterr().err


def test_videos_left_without_steps_are_counted(tmp_path):
    """Before: a video of background only (or of errors only, dropped) was written with no step
    and counted among the converted videos without a word."""
    annotation = json.loads(json.dumps(ANNOTATION))
    annotation['tea']['segments'][1]['labels']['action_type'] = [1, 1]
    write_egoper(tmp_path, annotation)
    assert convert(tmp_path, 'drop') == 0
    record = json.loads((tmp_path / 'out/conversion.json').read_text())
    assert record['segments']['videos with no step kept'] == 1


@pytest.mark.parametrize('splits, extra, message', [
    ({'training.txt': '', 'test.txt': 'coffee_u2_b\n'}, [],
     r'splits/training.txt: no video listed; expected one video id per line'),
    ({'training.txt': 'coffee_u1_a\ntea_u1_a\ncoffee_u1_a\n', 'test.txt': 'tea_u3_c\n'}, [],
     r'splits/training.txt: line 3: video coffee_u1_a is listed again; expected each video once'),
    (None, ['--feature-stem', 'same'], r"--feature-stem 'same' gives videos coffee_u1_a and "
     r"(coffee_u2_b|tea_u1_a) the same feature file 'same'"),
    (None, ['--feature-stem', '{video}'], r"--feature-stem '\{video\}': KeyError: 'video'; "
     r"expected a file name with the fields \{vid\} and \{task\}"),
    (None, ['--feature-dir', 'annotation.json'], r'--feature-dir .*annotation.json: is a file'),
])
def test_split_lists_and_feature_names_that_cannot_be_meant(tmp_path, monkeypatch, splits,
                                                            extra, message):
    """Fourth hostile pass: an empty training list converted to a dataset of no training
    video; a constant --feature-stem made every video read one file; '{video}' ended in
    'error: video'; all exit 0 but the last."""
    write_egoper(tmp_path)
    for name, text in (splits or {}).items():
        (tmp_path / 'splits' / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as raised:
        load_tool('convert_egoper').main([
            str(tmp_path / 'annotation.json'), '--split-dir', str(tmp_path / 'splits'),
            '--out', str(tmp_path / 'out'), '--errors', 'keep', *extra])
    assert re.search(message, str(raised.value)), str(raised.value)
    assert not (tmp_path / 'out').exists()

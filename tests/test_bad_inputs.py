"""Bad input files get errors naming the file, the line or sample, the field, the value and
what was expected (issue 13, item 6). Small files written to tmp_path; no shared data."""
import json

import pytest

from vpn_plugin.datasets.annotations import (BadVideoError, read_crosstask_csv,
                                             read_json_annotations, read_window_file)
from vpn_plugin.datasets.taxonomy import load_taxonomy

TWO_TASKS = ('{"0_111_Make tea": {"0": "boil water", "1": "add tea"},\n'
             ' "1_222_Make toast": {"2": "slice bread", "3": "toast bread"}}')


@pytest.fixture
def taxonomy(tmp_path):
    path = tmp_path / 'taxonomy.json'
    path.write_text(TWO_TASKS)
    return load_taxonomy(path)


def test_good_taxonomy_loads(taxonomy):
    assert taxonomy.task_actions == [[0, 1], [2, 3]] and taxonomy.action_task == [0, 0, 1, 1]


def test_action_id_twice_in_one_task_is_refused(tmp_path):
    path = tmp_path / 'taxonomy.json'
    path.write_text('{"0_111_Make tea": {"0": "boil water", "1": "add tea", "0": "pour"}}')
    with pytest.raises(ValueError, match=r"taxonomy.json: task '0_111_Make tea': action id 0 "
                                         r"\('pour'\) is already used by task '0_111_Make tea' "
                                         r"\('boil water'\)"):
        load_taxonomy(path)


def test_action_id_in_two_tasks_is_refused(tmp_path):
    path = tmp_path / 'taxonomy.json'
    path.write_text(TWO_TASKS.replace('"3": "toast bread"', '"1": "toast bread"'))
    with pytest.raises(ValueError, match=r"task '1_222_Make toast': action id 1 "
                                         r"\('toast bread'\) is already used by task "
                                         r"'0_111_Make tea'.*expected every action id once"):
        load_taxonomy(path)


@pytest.mark.parametrize('bad', ['nan', 'inf', '-inf'])
def test_non_finite_time_in_csv_names_file_line_and_value(taxonomy, tmp_path, bad):
    path = tmp_path / '111_vid.csv'
    path.write_text(f'1,0.0,3.5\n2,{bad},9.0\n')
    with pytest.raises(BadVideoError, match=rf'111_vid.csv: line 2: step start time is '
                                            rf'{bad}; expected a finite number of seconds'):
        read_crosstask_csv(path, taxonomy, 0, 'vid')


def window_sample(task_id, rows):
    return {'id': {'vid': 'v1', 'feature': 'feats/111_v1.npy', 'task_id': task_id,
                   'legal_range': rows}, 'instruction_len': 4}


def test_non_finite_time_in_window_file_names_sample_and_row(taxonomy, tmp_path):
    path = tmp_path / 'windows.json'
    rows = [[0, 2, 0], [3, float('nan'), 1]]
    path.write_text(json.dumps([window_sample(0, [[0, 2, 0], [3, 5, 1]]),
                                window_sample(0, rows)]))
    windows, bad = read_window_file(path, taxonomy, 2)
    assert len(windows) == 1 and [e.reason for e in bad] == ['step time not a finite number']
    assert ('windows.json: sample 1: legal_range[1] (vid v1): step end time is nan; expected '
            'a finite number of seconds') in str(bad[0])


def test_window_action_of_another_task_is_refused(taxonomy, tmp_path):
    path = tmp_path / 'windows.json'
    path.write_text(json.dumps([window_sample(0, [[0, 2, 0], [3, 5, 3]])]))
    windows, bad = read_window_file(path, taxonomy, 2)
    assert not windows and [e.reason for e in bad] == ['action of another task']
    assert ("windows.json: sample 0: legal_range[1] (vid v1): action id 3 ('toast bread') "
            "belongs to task '222', not to the sample's task '111'") in str(bad[0])
    windows, bad = read_window_file(_good(path), taxonomy, 2)
    assert len(windows) == 1 and not bad


def _good(path):
    path.write_text(json.dumps([window_sample(1, [[0, 2, 2], [3, 5, 3]])]))
    return path


def test_json_annotation_step_of_another_task_and_inf_time(taxonomy, tmp_path):
    path = tmp_path / 'videos.json'
    path.write_text(json.dumps([
        {'vid': 'a', 'task': '111', 'steps': [[0, 1, 0], [2, 3, 2]]},
        {'vid': 'b', 'task': '222', 'steps': [[0, float('inf'), 2]]},
        {'vid': 'c', 'task': '222', 'steps': [[0, 1, 2], [1, 2, 3]]}]))
    videos, bad = read_json_annotations(path, taxonomy)
    assert [v.vid for v in videos] == ['c']
    assert [e.reason for e in bad] == ['action of another task', 'step time not a finite number']
    assert "entry 0: steps[1] (vid a): action id 2 ('slice bread') belongs to task '222'" \
        in str(bad[0])
    assert 'entry 1: steps[0] (vid b): step end time is inf' in str(bad[1])

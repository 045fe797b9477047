"""Third hostile pass (issue 37, "Done means"), training/test/protocol tools and data: cases
found on main 122c153, each failing on the behaviour before its fix."""
import json

import numpy as np
import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from vpn_plugin.datasets.annotations import BadVideoError


# ------------------------------------------------- feature files that hold no feature file
@pytest.mark.parametrize('content, said', [
    (b'', 'the file is empty (0 bytes)'),
    (b'frames_features: 1 2 3\n', "a text file, no .npy, npz or pickle (it starts with "
                                  "'frames_features: 1 2 3"),
    (None, 'an npz (zip) archive with no arrays'),
    (b'\x89PNG\r\n\x1a\n' + bytes(range(256)) * 2, "no .npy, npz or pickle (it starts with bytes "),
])
def test_a_feature_file_that_holds_no_features_says_what_it_holds(tmp_path, content, said):
    """Before: "cannot read X: EOFError('Ran out of input')" (empty), "UnpicklingError" (text)
    and "pickle data was truncated" (an npz with no arrays): the file named, not what it is nor
    what was expected."""
    from vpn_plugin.datasets.features import load_features
    path = tmp_path / 'clip.npz'
    if content is None:
        np.savez(path)
    else:
        path.write_bytes(content)
    with pytest.raises(BadVideoError) as caught:
        load_features(path, 8, vid='clip')
    message = str(caught.value)
    assert f'cannot read {path}: {said}' in message
    assert 'expected a .npy array (seconds, D), an npz archive with "frames_features"' in message


# ------------------------------------------------------- --status of a moved protocol folder
def test_status_of_a_moved_protocol_folder_names_its_own_logs(tiny_crosstask, tmp_path):
    """Before: a Slurm protocol folder moved (or copied) elsewhere printed each unit's log at
    the old location (unit_state.json and the submission records keep absolute paths), and its
    units were no longer matched with their submitted tasks."""
    from test_protocol_slurm import uniform_protocol
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    from vpn_plugin.protocol.status import unit_statuses
    from vpn_plugin.protocol.unit_state import STATE_FILE
    protocol = uniform_protocol(tiny_crosstask)
    old_root, new_root = tmp_path / 'old', tmp_path / 'new'
    old = ProtocolRunner(protocol, old_root, batch_size=64)
    first, second = expand_units(protocol)
    old_work_dir = old.work_dir(second).absolute()
    old_log = old.root.absolute() / 'slurm' / '7_1_0_log.err'
    old_work_dir.mkdir(parents=True)
    (old_work_dir / STATE_FILE).write_text(json.dumps(dict(
        state='failed', attempts=1, job='7_1', log=str(old_log), error='ValueError: x')))
    old_log.parent.mkdir(parents=True)
    old_log.write_text('the log\n')
    (old_log.parent / 'submissions.jsonl').write_text(json.dumps(dict(array='7', tasks=[dict(
        job='7_1', log=str(old_log), units=[str(old_work_dir)])])) + '\n')
    old_root.rename(new_root)
    runner = ProtocolRunner(protocol, new_root, batch_size=64)
    status = unit_statuses(runner, [first, second], queue=lambda jobs: {})[1]
    new_log = runner.root.absolute() / 'slurm' / '7_1_0_log.err'
    assert status.log == str(new_log) and new_log.is_file()
    assert (status.state, status.job, status.why) == ('failed', '7_1', 'ValueError: x')

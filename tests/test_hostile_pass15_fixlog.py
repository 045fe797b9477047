"""Session 10, short round (fixlog): a refused run leaves nothing it made (the rule: a run
that exits non-zero writes nothing). Each test fails on 51a306c, except the guards that
what was there stays."""
import os
from pathlib import Path

import pytest
import torch

from tiny_configs import tiny_vpn_config
from tool_modules import load_tool

NO_CHECKPOINT = ['--cfg-options', 'default_hooks.checkpoint.save_last=False',
                 'default_hooks.checkpoint.interval=-1', 'default_hooks.checkpoint.save_best=None']


def refusal(tool: str, argv: list) -> str:
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main(argv)
    return ' '.join(str(stopped.value).split())


def listing(root: Path) -> list:
    return sorted(str(p.relative_to(root)) for p in root.rglob('*'))


# --------------------------------------------------------------- item 1: a refused test
def test_a_refused_test_leaves_no_lock_file_of_its_outputs(tiny_crosstask, tmp_path):
    """A test refused for its checkpoint (one that fits no planner of the config) left
    ``.<name>.lock`` beside ``--out`` / ``--out-metrics`` and the folders made for them."""
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    (tmp_path / 'ck').mkdir()
    torch.save({'state_dict': {}}, tmp_path / 'ck' / 'other.pth')
    message = refusal('test', [str(config), str(tmp_path / 'ck' / 'other.pth'),
                               '--out-metrics', str(tmp_path / 'new' / 'm.json'),
                               '--out', str(tmp_path / 'ck' / 'p.pkl')])
    assert 'does not fit the model ViterbiPlanNet' in message
    assert listing(tmp_path) == ['ck', 'ck/other.pth', 'vpn_tiny.py']


def test_a_test_refused_after_its_runner_was_built_leaves_no_log_folder(tiny_crosstask,
                                                                        tmp_path):
    """No checkpoint given for a trainable model: refused after the runner claimed its
    ``<work_dir>/<timestamp>/`` log folder (its log and vis_data/config.py stayed)."""
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    (tmp_path / 'w').mkdir()
    (tmp_path / 'w' / 'notes.txt').write_text('mine')
    message = refusal('test', [str(config), '--work-dir', str(tmp_path / 'w')])
    assert 'trainable parameters; pass the checkpoint to test' in message
    assert listing(tmp_path) == ['vpn_tiny.py', 'w', 'w/notes.txt']


# ---------------------------------------------------------- item 2: a refused training
def test_a_refused_training_leaves_no_lock_file(tiny_crosstask, tmp_path):
    """A training refused before its first epoch left ``.<work dir>.lock`` (and the folder
    made for it) beside the work dir it removed."""
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    message = refusal('train', [str(config), '--work-dir', str(tmp_path / 'runs' / 'work'),
                                *NO_CHECKPOINT])
    assert 'default_hooks.checkpoint saves no checkpoint' in message
    assert listing(tmp_path) == ['vpn_tiny.py']


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_a_model_refused_when_built_leaves_nothing(tiny_crosstask, tmp_path, tool):
    """A model refused by the runner's constructor (its text features file missing), after
    the runner claimed its log folder: the folder, the work dir and the lock stayed."""
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    argv = [str(config), '--work-dir', str(tmp_path / 'runs' / 'work'), '--cfg-options',
            f"model.text_embeddings.file={tmp_path / 'none.npy'}"]
    message = refusal(tool, argv + (['--out-metrics', str(tmp_path / 'm' / 'm.json')]
                                    if tool == 'test' else []))
    assert 'none.npy' in message and 'does not exist' in message
    assert listing(tmp_path) == ['vpn_tiny.py']


def test_a_refused_training_keeps_a_lock_file_that_was_there(tiny_crosstask, tmp_path):
    """Only what the run made goes: an earlier run's lock file stays."""
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    (tmp_path / '.work.lock').write_text('')
    refusal('train', [str(config), '--work-dir', str(tmp_path / 'work'), *NO_CHECKPOINT])
    assert listing(tmp_path) == ['.work.lock', 'vpn_tiny.py']


def test_a_lock_file_deleted_by_its_holder_is_not_locked_twice(tmp_path, monkeypatch):
    """Deleting a lock file (above) is safe: a process that opened it before its holder deleted
    it opens the path again once it holds the lock, instead of holding a lock on the deleted
    file while another process holds one on the file now at the path."""
    import fcntl
    from vpn_plugin import locks
    path = tmp_path / '.x.lock'
    stale = open(path, 'w')  # opened before its holder deleted it
    path.unlink()
    path.write_text('')  # made again by another process
    calls = []

    def stale_first(name, mode='r', *args, **kwargs):
        if not calls:
            calls.append(name)
            return os.fdopen(os.dup(stale.fileno()), 'r+')
        return open(name, mode, *args, **kwargs)
    monkeypatch.setattr(locks, 'open', stale_first, raising=False)
    with stale, locks.exclusive_lock(path, wait=False), open(path) as other:
        with pytest.raises(BlockingIOError):  # the file at the path is the one locked
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


# --------------------------------------------------- item 3: a refused feature extraction
def test_an_extraction_refused_for_a_name_collision_makes_no_out_folder(tmp_path):
    """vids/ok.avi and vids/ok.mp4 both -> ok.npz: refused, and the ``--out`` folder it made
    was left empty; an --out folder that was there stays."""
    (tmp_path / 'vids').mkdir()
    for name in ('ok.avi', 'ok.mp4'):
        (tmp_path / 'vids' / name).write_bytes(b'not decoded')
    for out in ('new/out', 'there'):
        message = refusal('extract_features', [str(tmp_path / 'vids'), '--out',
                                               str(tmp_path / out), '--random-weights',
                                               '--device', 'cpu', '--num-workers', '0'])
        assert 'would both write ok.npz' in message
        (tmp_path / 'there').mkdir(exist_ok=True)
    assert listing(tmp_path) == ['there', 'vids', 'vids/ok.avi', 'vids/ok.mp4']

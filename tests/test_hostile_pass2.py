"""Second hostile pass (issue 37, "Done means"): cases found on the merged main with the new
features (smoke runs and limits, plan.py --features, the Slurm launcher, ...), each failing on
the behaviour before its fix."""
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from test_datasets import toy_dataset, write_toy
from tool_modules import load_tool
from vpn_plugin.datasets.annotations import BadVideoError


# ------------------------------------------------------------ feature files that are no file
@pytest.mark.parametrize('kind', ['fifo', 'device'])
def test_a_feature_file_that_is_a_fifo_or_a_device_is_refused_not_read(tmp_path, kind):
    """Before: `plan.py --features FIFO` blocked for ever in open(); /dev/zero failed with an
    UnpicklingError of its bytes. Both now say what the path is."""
    from vpn_plugin.datasets.features import load_features, read_feature_record
    if kind == 'fifo':
        path = tmp_path / 'clip.npz'
        os.mkfifo(path)
        named = 'is a FIFO'
    else:
        path, named = '/dev/zero', 'is a character device'
    for read in (lambda: read_feature_record(path), lambda: load_features(path, 8)):
        with pytest.raises(BadVideoError, match=f'{path} {named}, not a regular file'):
            read()


def test_a_fifo_in_a_dataset_feature_folder_is_named(tmp_path):
    """A dataset reading its features meets the FIFO too: named, not waited on."""
    write_toy(tmp_path)
    path = tmp_path / 'feat' / '11_a1.npz'
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(Exception, match=r'11_a1.npz \(video a1\) is a FIFO'):
        toy_dataset(tmp_path)


# ------------------------------------------------------------ limits
@pytest.mark.parametrize('seed', [-1, 'x', float('nan'), 1.5, True])
def test_a_bad_limit_seed_is_named(tmp_path, seed):
    """Before: numpy's 'SeedSequence expects int ...' or 'expected non-negative integer',
    naming neither the dataset nor the field."""
    write_toy(tmp_path)
    with pytest.raises(ValueError, match=f'PlanningDataset: limit_seed={seed!r}; expected an '
                                         'integer >= 0'):
        toy_dataset(tmp_path, limit=1, limit_seed=seed)


def test_a_training_split_cut_by_limit_marks_the_run_shortened():
    """Before: `train.py --cfg-options train_dataloader.dataset.limit=10` trained on 10 windows
    and its checkpoints (and the metrics of their tests) were not marked shortened, while
    `train_cfg.max_epochs=N` below the config's is."""
    from mmengine.config import Config
    train = load_tool('train')
    config = 'configs/vpn_niv_t3.py'
    cfg = Config.fromfile(config)
    cfg.train_dataloader.dataset.limit = 10
    train.mark_fewer_epochs(cfg, SimpleNamespace(config=config, cfg_options={
        'train_dataloader.dataset.limit': 10, 'train_cfg.max_epochs': 2}))
    assert cfg.shortened == 'max_epochs=2 (config: 500); training split limit=10 windows'
    full = Config.fromfile(config)
    train.mark_fewer_epochs(full, SimpleNamespace(config=config, cfg_options={}))
    assert not full.get('shortened')


# ------------------------------------------------------------ Slurm submission refused
def test_sbatch_refusing_the_array_is_one_line_naming_its_reason():
    """Before: `--slurm-options foo=bar` ended in submitit's traceback (FailedJobError)."""
    from submitit.core.utils import FailedJobError
    from vpn_plugin.protocol.slurm import submit_array

    class RefusingExecutor:
        def map_array(self, function, items):
            raise FailedJobError("sbatch: unrecognized option '--foo=bar'\n"
                                 'Try "sbatch --help" for more information')
    with pytest.raises(ValueError, match=r"sbatch refused the job array \(sbatch: unrecognized "
                                         r"option '--foo=bar' Try .*nothing was submitted"):
        submit_array(RefusingExecutor(), print, [SimpleNamespace(units=['u'])])


# ------------------------------------------------------------ plan.py --features
def test_plan_from_features_notes_a_goal_read_at_the_last_second(tiny_crosstask, tmp_path,
                                                                  capsys):
    """Before: `plan.py --features` of a 5 s file with --goal-time 9 printed 'plan ... to the
    state at 9 s' and read the goal at second 4 without the note `--video` prints."""
    import torch
    from test_apis import tiny_vpn_config
    from tiny_configs import save_recorded
    from vpn_plugin.apis import init_planner
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    torch.manual_seed(0)
    save_recorded(init_planner(str(config)), tmp_path / 'tiny.pth', tiny_crosstask['test_dataset'])
    np.savez(tmp_path / 'f.npz', frames_features=np.random.default_rng(0).normal(
        size=(5, 512)).astype(np.float32))
    argv = [str(config), '--checkpoint', str(tmp_path / 'tiny.pth'), '--features',
            str(tmp_path / 'f.npz'), '--start-time', '1', '--goal-time']
    load_tool('plan').main(argv + ['9'])
    assert ("note: the goal time 9 s is at or past the end of the video's 5 s of features: the "
            'goal state is read at its last second (4 s)') in capsys.readouterr().out
    load_tool('plan').main(argv + ['4'])
    assert 'note: the goal time' not in capsys.readouterr().out


# ------------------------------------------------------------ LLM cache key of another user
@pytest.mark.skipif(not hasattr(os, 'geteuid') or os.geteuid() != 0,
                    reason='giving the key file to another user needs root')
def test_an_llm_cache_key_written_by_another_user_is_refused(tmp_path):
    """Before: whoever can write the cache folder (the shared or synced folder the keyed check
    guards) replaced `.cache_key` by a key of their own (mode 0600, their file) and forged
    entries with it: served as this cache's."""
    from vpn_plugin.baselines.llm.backends import ResponseCache
    ResponseCache(tmp_path)                   # this user's key: fine
    key_file = tmp_path / '.cache_key'
    key_file.unlink()
    key_file.write_text('ab' * 32)
    key_file.chmod(0o600)
    os.chown(key_file, 4321, -1)
    with pytest.raises(PermissionError, match=r'cache key .*\.cache_key belongs to user id '
                                              r'4321, not to this user \(0\)'):
        ResponseCache(tmp_path)


# ------------------------------------------------------------ a fixture with arrays removed
def test_a_fixture_array_removed_is_named_with_its_file(tmp_path):
    """Before: `check_reference.py` on a PDPP fixture without `ddim_final` ended in
    'error: ddim_final', and with an empty outputs.npz in a StopIteration traceback."""
    from vpn_plugin.oracles.compare import read_npz
    np.savez(tmp_path / 'outputs.npz', x_start=np.zeros(3))
    arrays = read_npz(tmp_path / 'outputs.npz')
    assert list(arrays) == ['x_start'] and arrays.get('ddim_final') is None
    with pytest.raises(KeyError, match=r"outputs.npz: no recorded array 'ddim_final' \(1 arrays "
                                       r"there\); expected the fixture's complete .npz"):
        arrays['ddim_final']

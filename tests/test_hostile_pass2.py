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


# ------------------------------------------------------------ third pass (hostile3)
@pytest.mark.parametrize('value', ['x', -1, None, True, 1.5])
def test_a_pkg_fixture_action_that_is_no_action_id_is_named(value):
    """Before: `check_reference.py` on a PKG folder whose inputs.json held 'x' / null / -1 in a
    legal_range said "invalid literal for int()", printed a TypeError traceback or "index 50 is
    out of bounds", naming no file; 1.5 and true were silently read as 1."""
    from vpn_plugin.oracles.kepp import pkg_graph
    inputs = {'action_list': [{'vid': 'h00', 'legal_range': [5, value, 6]}]}
    with pytest.raises(ValueError, match=r'inputs.json: action_list\[0\] \(vid .h00.\) '
                                         r'"legal_range"\[1\] = .*expected an action id'):
        pkg_graph(inputs, 'inputs.json')


def test_a_fixture_component_that_is_unknown_is_named(tmp_path):
    """Before: meta.json "component": "pkgx" on a PKG folder was answered with "missing fields
    num_actions, horizon, ..." (the full fixture's fields)."""
    from vpn_plugin.oracles.kepp import is_pkg_folder
    with pytest.raises(ValueError, match=r'meta.json: "component" = .pkgx.; expected one of'):
        is_pkg_folder(tmp_path, {'component': 'pkgx'})
    assert is_pkg_folder(tmp_path, {'component': 'pkg'})
    assert not is_pkg_folder(tmp_path, {'component': 'plan+step+pkg'})


def test_a_window_whose_video_has_another_tasks_windows_is_refused(tmp_path, shared_data):
    """Before: a window of task 0 whose "feature" names a video that the file's other windows
    give task 4 (jump_car_0001) was built and scored on that video's observations, without a
    word (an edited or merged window file)."""
    import json
    from vpn_plugin.datasets.annotations import read_window_file
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    niv = shared_data / 'niv'
    samples = json.loads((niv / 'splits/test_T3.json').read_text())
    other = next(s for s in samples if s['id']['task_id'] != samples[3]['id']['task_id'])
    samples[3]['id']['feature'] = other['id']['feature']
    path = tmp_path / 'test_T3.json'
    path.write_text(json.dumps(samples))
    windows, bad = read_window_file(path, load_taxonomy(niv / 'taxonomy.json'), 3)
    assert bad and len(windows) + len(bad) == len(samples)
    for error in bad:
        assert 'sample 3' in str(error) and 'expected one task per video' in str(error)


@pytest.mark.parametrize('seed', [float('nan'), 'x', None, -1, 1.5, True])
def test_cefito_negative_seed_must_be_an_integer(seed):
    """Before: model.negative_seed=nan built and trained (random.Random(hash(nan)): other
    negatives in every process), 'x' multiplied a string by the seed stride at the first
    step, 1.5 and True were other seeds than written."""
    from test_cefito import tiny_cefito
    with pytest.raises(ValueError, match=rf'negative_seed={seed!r}; expected an integer >= 0'):
        tiny_cefito(negative_seed=seed)


@pytest.mark.parametrize('successors', [{}, {0: {}, 1: {}}])
def test_a_released_graph_without_edges_is_refused(tmp_path, successors):
    """Before: an empty DiGraph (or nodes without edges) as model.released_graph was accepted:
    every (first, last) pair fell back to [s, .., e], the run scored a plan without a graph."""
    from test_hostile_silent import write_graph
    from vpn_plugin.models.kepp import released_graph
    path = write_graph(tmp_path / 'empty.pkl', successors)
    with pytest.raises(ValueError, match=r'empty.pkl: the graph has \d+ nodes and no edge'):
        released_graph(path, num_actions=48, horizon=4)


def test_a_folder_named_like_a_feature_file_is_named(tmp_path):
    """Before: a folder `<video>.npz` in the feature folder stopped the dataset with
    IsADirectoryError from the cache's digest (no video, no 'expected')."""
    write_toy(tmp_path)
    path = tmp_path / 'feat' / '11_a1.npz'
    path.unlink()
    path.mkdir()
    with pytest.raises(Exception, match=r'11_a1.npz \(video a1\) is a folder, not a regular '
                                        r'file'):
        toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')


def test_a_feature_dir_that_is_a_file_is_named(tmp_path):
    """Before: NotADirectoryError '<file>/<video>.npy' from the cache's digest."""
    from vpn_plugin.datasets.file_digests import NOT_A_FILE, file_digests
    write_toy(tmp_path)
    feat = tmp_path / 'feat'
    assert file_digests([feat, tmp_path / 'no' / 'x.npy']) == [NOT_A_FILE, 'missing']
    for path in feat.iterdir():
        path.unlink()
    feat.rmdir()
    feat.write_text('not a folder')
    with pytest.raises(NotADirectoryError, match=r'feature_dir .*feat is a file, not a folder'):
        toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')


def test_val_fraction_nan_in_both_splits_is_named_for_what_it_is():
    """Before: val_fraction=nan in both splits was refused as "train ... =nan but val ... =nan;
    both splits must give the same value" (they do; nan != nan); now the same-value check lets
    it through to the dataset's own "val_fraction=nan; expected ..."."""
    from vpn_plugin.datasets.planning_dataset import check_held_out_agrees
    nan = float('nan')
    check_held_out_agrees(dict(split='train', val_fraction=nan),
                          dict(split='val', val_fraction=nan), 'cfg.py')
    with pytest.raises(ValueError, match=r'val_fraction=nan but val_dataloader.dataset.'
                                         r'val_fraction=0.1'):
        check_held_out_agrees(dict(split='train', val_fraction=nan), dict(split='val'), 'cfg.py')


def test_kepp_step_checkpoint_not_used_by_a_loaded_checkpoint_is_said(monkeypatch):
    """Before: `test.py kepp CKPT --cfg-options model.step_checkpoint=OTHER.pth` scored the
    checkpoint's own step model and said nothing of the ignored option."""
    import vpn_plugin.models.kepp as kepp_module
    from test_kepp import tiny_kepp
    said = []
    monkeypatch.setattr(kepp_module, 'print_log', lambda message, *a, **k: said.append(message))
    trained = tiny_kepp()
    trained.step_ready.fill_(True)
    tiny_kepp(step_checkpoint='other_step_model.pth').load_state_dict(trained.state_dict())
    assert any("model.step_checkpoint='other_step_model.pth' is not used" in m for m in said)
    said.clear()
    tiny_kepp().load_state_dict(trained.state_dict())
    assert not any('step_checkpoint' in m for m in said)


@pytest.mark.parametrize('option', [dict(num_actions=float('nan')), dict(num_actions='x'),
                                    dict(num_actions=None), dict(num_actions=True),
                                    dict(horizon='x'), dict(horizon=None)])
def test_a_planner_count_that_is_no_integer_is_named(option):
    """Before: KEPP(num_actions=nan / None / 'x' / True) failed in torch.full ("must be tuple of
    ints") or in "'<' not supported between 'str' and 'int'", naming no option."""
    from test_kepp import tiny_kepp
    (name, value), = option.items()
    with pytest.raises(ValueError, match=rf'model.{name}={value!r}; expected an integer >= 1'):
        tiny_kepp(**option)

"""Eighth hostile pass (issue 37), the tools around training and the core math (hostile19).

Each test is a case that was wrong, silent or vague on b5995ac (case ids of
/tmp/hostile19_log.md; the seventh pass's leftovers keep their ids of /tmp/hostile15_log.md).
"""
import re
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from tool_modules import load_tool
from vpn_plugin.core import pkg

REPO = Path(__file__).resolve().parents[1]
PKG = pkg.build_pkg([[0, 1, 2, 3], [1, 2, 3, 0]], 4)


def user_error(tool: str, argv) -> str:
    """The message ``tool`` stops with (exit status 1 or argparse's 2, with a text)."""
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([str(a) for a in argv])
    assert stopped.value.code != 0, f'{tool}: exit code {stopped.value.code!r}'
    return str(stopped.value.code)


# ------------------------------------------------------------------- leftovers of pass 7
@pytest.mark.parametrize('call, pattern', [
    (lambda: pkg.edge_dropout(PKG, 0.5, seed=-1), r'edge_dropout seed=-1; expected an integer'),
    (lambda: pkg.weight_noise(PKG, 0.1, seed=1.5), r'weight_noise seed=1.5; expected an integer'),
    (lambda: pkg.subsample_sequences([[0, 1]], 0.5, seed=True), r'subsample_sequences seed=True'),
    (lambda: pkg.label_noise([[0, 1]], 0.5, [[0, 1]], seed='0'), r"label_noise seed='0'"),
])
def test_perturbation_seeds_are_named(call, pattern):
    """A56: edge_dropout(seed=-1) stopped with numpy's 'expected non-negative integer'."""
    with pytest.raises(ValueError, match=pattern):
        call()


def test_union_pkg_nested_list_pkg_says_how_to_give_a_pkg():
    """A61: a PKG as a nested list was 'a sequence collection; pass num_actions' only."""
    with pytest.raises(ValueError, match=r'source 0 \(a list\) is read as a sequence collection'
                                         r'.*give a PKG as a float \(N, N\) numpy array'):
        pkg.union_pkg(PKG.tolist())


def test_plan_features_with_the_checkpoint_as_only_positional_says_so(tmp_path, capsys):
    """E8: plan.py CKPT --features X said '--features needs --checkpoint CKPT', not that the
    .pth had been read as the config."""
    user_error('plan', [tmp_path / 'epoch_1.pth', '--features', tmp_path / 'x.npz',
                        '--start-time', '1', '--goal-time', '5'])
    message = capsys.readouterr().err
    assert re.search(r'--features needs --checkpoint CKPT \(the one positional, .*epoch_1.pth, '
                     r'is read as CONFIG', message), message


@pytest.fixture(scope='module')
def planner(tiny_crosstask, tmp_path_factory):
    from test_apis import tiny_vpn_config
    from vpn_plugin.apis import init_planner
    return init_planner(str(tiny_vpn_config(tiny_crosstask, tmp_path_factory.mktemp('cfg'))))


def test_meta_observations_and_none_tasks_are_named(planner):
    """F19: meta-device observations ended in 'Tensor.item() cannot be called on meta
    tensors'; F23: task=[None] in torch's 'Could not infer dtype of NoneType'."""
    from vpn_plugin.apis import plan_from_features
    dim = planner.feature_dim
    with pytest.raises(ValueError, match=r'start observations are on the meta device'):
        plan_from_features(planner, torch.zeros(dim, device='meta'), torch.zeros(dim))
    with pytest.raises(TypeError, match=r'task=\[None\]; expected a task index or 1 of them'):
        plan_from_features(planner, torch.zeros(dim), torch.zeros(dim), task=[None])


def test_authors_pkg_given_a_torch_checkpoint_says_so(tmp_path):
    """L4: --pkg = a .pth listed the archive's members ('authors/data.pkl', ...)."""
    from vpn_plugin.oracles.authors import read_pkg
    path = tmp_path / 'authors.pth'
    torch.save({'w': torch.zeros(2)}, path)
    with pytest.raises(ValueError, match=r'a torch checkpoint \(torch.save archive\), not a PKG'):
        read_pkg(path)


def test_location_variable_set_to_none_is_named(tmp_path):
    """M9: --cfg-options cache_dir=None: 'names a location variable the config does not
    define' (it is defined, as None)."""
    from vpn_plugin.data_paths import load_config
    with pytest.raises(ValueError, match=r'is built from cache_dir, which is None'):
        load_config(str(REPO / 'configs/vpn_niv_t3.py'), cfg_options={'cache_dir': None})


def test_two_synthetic_runs_into_one_folder_the_second_refused(tmp_path, shared_data):
    """B8: two make_synthetic_features runs into one folder both exited 0 (no lock: the files
    are the last writer's, and a mix of two seeds with one manifest was possible)."""
    from vpn_plugin.locks import exclusive_lock, lock_path_of
    out = tmp_path / 'out'
    holding, release = threading.Event(), threading.Event()

    def first_run():  # holds the folder's lock as a running first run does
        with exclusive_lock(lock_path_of(out / 'features')):
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=first_run)
    thread.start()
    holding.wait(10)
    try:  # the lock is re-entrant within a thread only: another thread is another holder
        message = user_error('make_synthetic_features', ['--dataset', 'niv', '--data-root',
                                                         shared_data, '--out', out])
    finally:
        release.set()
        thread.join()
    assert f'feature folder {out / "features"} is in use by another process' in message
    assert not (out / 'features').exists()


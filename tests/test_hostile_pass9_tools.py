"""Eighth hostile pass (issue 37), the tools around training and the core math (hostile19).

Each test is a case that was wrong, silent or vague on b5995ac (case ids of
/tmp/hostile19_log.md; the seventh pass's leftovers keep their ids of /tmp/hostile15_log.md).
"""
import re
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
    (lambda: pkg.edge_dropout(PKG, 0.5, seed=-1), r'edge_dropout\(\) argument seed=-1; expected an integer'),
    (lambda: pkg.weight_noise(PKG, 0.1, seed=1.5), r'weight_noise\(\) argument seed=1.5; expected an integer'),
    (lambda: pkg.subsample_sequences([[0, 1]], 0.5, seed=True), r'subsample_sequences\(\) argument seed=True'),
    (lambda: pkg.label_noise([[0, 1]], 0.5, [[0, 1]], seed='0'), r"label_noise\(\) argument seed='0'"),
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


def test_two_synthetic_runs_into_one_folder_the_second_refused(tmp_path, shared_data,
                                                               lock_held_elsewhere):
    """B8: two make_synthetic_features runs into one folder both exited 0 (no lock: the files
    are the last writer's, and a mix of two seeds with one manifest was possible)."""
    out = tmp_path / 'out'
    with lock_held_elsewhere(out / 'features'):  # as a running first run holds it
        message = user_error('make_synthetic_features', ['--dataset', 'niv', '--data-root',
                                                         shared_data, '--out', out])
    assert f'feature folder {out / "features"} is in use by another process' in message
    assert not (out / 'features').exists()



# ----------------------------------------------------------------------------- core math
def test_bootstrap_options_are_checked_not_coerced():
    """s2: num_resamples=True ran 1 resample; s6: (seeds, metrics) scores were flattened into
    one mean; s10: paired='no' was read as True; s1, s8: num_resamples 1.5 / '1000' in
    Python's TypeErrors."""
    from vpn_plugin.core import stats
    with pytest.raises(ValueError, match=r'num_resamples=True; expected an integer >= 1'):
        stats.bootstrap_ci([1, 2, 3], num_resamples=True)
    with pytest.raises(ValueError, match=r'num_resamples=1.5'):
        stats.bootstrap_ci([1, 2, 3], num_resamples=1.5)
    with pytest.raises(ValueError, match=r'scores has shape \(2, 2\); expected one score per'):
        stats.bootstrap_ci([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match=r"paired='no'; expected True or False"):
        stats.bootstrap_difference([1, 2, 3], [1, 2, 4], paired='no')


def test_stratified_sample_limit_and_tasks_are_integers():
    """s13: limit=True drew 1 window; s14: float tasks [0.5, 1.7, 1.2] were truncated to
    [0, 1, 1] (other strata); s12: limit 2.5 in a slice TypeError; s17: seed -1 numpy's."""
    from vpn_plugin.core import stats
    with pytest.raises(ValueError, match=r'stratified_sample\(\) argument limit=True; expected an integer'):
        stats.stratified_sample([0, 0, 1, 1, 2], True, keys=range(5))
    with pytest.raises(TypeError, match=r'tasks hold float64 values'):
        stats.stratified_sample([0.5, 1.7, 1.2], 2, keys=range(3))
    with pytest.raises(ValueError, match=r'stratified_sample\(\) argument limit=2.5'):
        stats.stratified_sample([0, 0, 1, 1, 2], 2.5, keys=range(5))
    with pytest.raises(ValueError, match=r'stratified_sample\(\) argument seed=-1'):
        stats.stratified_sample([0, 0, 1, 1, 2], 2, seed=-1, keys=range(5))


def test_diversity_refuses_what_is_no_distribution_or_group_size():
    """q4: js_divergence of an unnormalised p gave 1.5 bits (JS lies in [0, 1]); q5:
    entropy_bits of a negative probability gave -0.88 bits; q3: min_group_size=1.5 acted as
    2; q6: '2' in Python's TypeError."""
    from vpn_plugin.core import diversity
    with pytest.raises(ValueError, match=r'p has probabilities \[2.0\] \(sum 2.0\)'):
        diversity.js_divergence({(0,): 2.0}, {(1,): 1.0})
    with pytest.raises(ValueError, match=r'distribution has probabilities \[-0.5, 1.5\]'):
        diversity.entropy_bits({(0,): -0.5, (1,): 1.5})
    plans = [[0, 1], [0, 1]]
    for size in (1.5, '2'):
        with pytest.raises(ValueError, match=r'min_group_size='):
            diversity.decoding_diversity(plans, plans, min_group_size=size)
    assert diversity.decoding_diversity(plans, plans)['num_groups'] == 1


def test_beam_search_refuses_float_ids_and_nan_transitions():
    """b1: first=[1.7] was planned from action 1; b5: first=[True] from action 1; b3: NaN
    transitions gave a path scored NaN, exit 0; b2, b4, b6: Python's errors."""
    from vpn_plugin.core import beam_search
    log_a = pkg.pkg_log_transitions(PKG)
    with pytest.raises(TypeError, match=r'first actions have dtype torch.float32'):
        beam_search.pkg_beam_search(log_a, torch.tensor([1.7]), torch.tensor([3]), 3)
    with pytest.raises(TypeError, match=r'first actions have dtype torch.bool'):
        beam_search.pkg_beam_search(log_a, torch.tensor([True]), torch.tensor([3]), 3)
    with pytest.raises(ValueError, match=r'log_transitions holds NaN or \+inf'):
        beam_search.pkg_beam_search(log_a.clone().fill_diagonal_(float('nan')),
                                    torch.tensor([0]), torch.tensor([2]), 3)
    with pytest.raises(ValueError, match=r'horizon=2.5'):
        beam_search.pkg_beam_search(log_a, torch.tensor([0]), torch.tensor([2]), 2.5)
    with pytest.raises(TypeError, match=r'log_transitions is a ndarray'):
        beam_search.pkg_beam_search(log_a.numpy(), torch.tensor([0]), torch.tensor([2]), 3)
    paths, _ = beam_search.pkg_beam_search(log_a, torch.tensor([0]), torch.tensor([3]), 4)
    assert paths.tolist() == [[0, 1, 2, 3]]


@pytest.mark.parametrize('call, pattern', [
    (lambda: pkg.build_pkg({0: [0, 1]}, 3), r'sequences is a dict; expected an iterable'),
    (lambda: pkg.build_pkg(None, 3), r'sequences is a NoneType'),
    (lambda: pkg.build_pkg([3, 4], 5), r'sequence 0 is a int \(3\); expected a list'),
    (lambda: pkg.transition_counts([[0, 1]], '4'), r"num_actions='4'; expected an integer"),
    (lambda: pkg.check_pkg(torch.zeros(3, 3, device='meta')), r'pkg is on the meta device'),
])
def test_pkg_inputs_named(call, pattern):
    """p9, p10, p11b, p29, p19: Python's 'not iterable' / 'cannot be interpreted as an integer'
    / torch's 'Cannot copy out of meta tensor'."""
    with pytest.raises((TypeError, ValueError), match=pattern):
        call()


def test_metrics_meta_plans_named():
    """m4: meta-device plans ended in 'Cannot copy out of meta tensor; no data!'."""
    from vpn_plugin.core import metrics
    with pytest.raises(ValueError, match=r'pred is on the meta device'):
        metrics.planning_metrics(torch.zeros(1, 3, dtype=torch.long, device='meta'), [[0, 1, 2]])


# ----------------------------------------------------------------------------- tools
def test_egoper_feature_stem_with_an_extension_refused(tmp_path):
    """e5: --feature-stem '{vid}.npz' converted (exit 0) to names the loader reads as
    '<vid>.npz.npz' / '<vid>.npz.npy': every feature file missing at training."""
    from test_egoper import write_egoper
    write_egoper(tmp_path)
    message = user_error('convert_egoper', [tmp_path / 'annotation.json', '--split-dir',
                                            tmp_path / 'splits', '--out', tmp_path / 'out',
                                            '--errors', 'keep', '--feature-stem', '{vid}.npz'])
    assert "--feature-stem '{vid}.npz': ends with a file extension" in message
    assert not (tmp_path / 'out').exists()


def test_text_encoder_folder_without_a_model_is_named(tmp_path):
    """t8: --encoder an empty folder ended in transformers' tokenizer-conversion text
    ('sentencepiece or tiktoken') and advised model.text_embeddings.encoder only."""
    from vpn_plugin.models.text_embeddings import encode_texts
    with pytest.raises(FileNotFoundError, match=r'holds no config.json: not a transformers '
                                                r'model directory.*--encoder'):
        encode_texts(['a'], encoder=str(tmp_path))

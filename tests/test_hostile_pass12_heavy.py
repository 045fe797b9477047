"""Tenth hostile pass, part B (confirm2: PDPP / KEPP / CEFITO through the tools and apis): the
cases it found, each a test that fails on the code the cases ran on (d480dc8, main with meaning2)."""
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config

from vpn_plugin.apis.inference import _given_tasks


def _niv_model(shared_data, num_tasks=None):
    """A stand-in planner with init_planner's ``cfg`` (the NIV test split) and no task head
    (KEPP's case) unless ``num_tasks``."""
    dataset = dict(type='PlanningDataset', data_root=str(shared_data / 'niv'),
                   taxonomy='taxonomy.json', window_file='splits/test_T3.json', horizon=3)
    return SimpleNamespace(num_tasks=num_tasks, cfg=Config(dict(test_dataloader=dict(
        dataset=dataset))))


def test_task_of_a_planner_without_task_head_is_checked_against_its_taxonomy(shared_data):
    # I19: plan_from_features(KEPP on NIV, ..., task=99) kept given_task=99 without a word
    # (NIV has 5 tasks; KEPP has no num_tasks)
    with pytest.raises(ValueError, match=r'task=99; expected 1 task index\(es\) in 0\.\.4'):
        _given_tasks(_niv_model(shared_data), 99, 1)


def test_task_in_range_still_given_to_a_planner_without_task_head(shared_data):
    assert _given_tasks(_niv_model(shared_data), 4, 2).tolist() == [4, 4]
    # a model built by hand (no cfg) is not checked against a taxonomy it does not know
    assert _given_tasks(SimpleNamespace(num_tasks=None), 7, 1).tolist() == [7]
    assert _given_tasks(SimpleNamespace(num_tasks=None, cfg=None), 7, 1).tolist() == [7]


def _niv_pdpp_cfg(shared_data, extra_window_file):
    from vpn_plugin.data_paths import load_config
    extra = dict(type='PlanningDataset', data_root='{data_root}/niv', taxonomy='taxonomy.json',
                 window_file=extra_window_file, split='test', horizon=3)
    return load_config('configs/baselines/pdpp_niv_t3.py', {
        'model.decode': 'viterbi', 'model.pkg.extra_datasets': [extra],
        'data_root': str(shared_data)})


@pytest.mark.parametrize('window_file, warned', [('splits/test_T3.json', True),
                                                 ('splits/train_T3.json', False)])
def test_extra_pkg_dataset_of_test_videos_is_named(shared_data, window_file, warned,
                                                     monkeypatch):
    # TP17: model.pkg.extra_datasets=[the NIV test windows as a dataset dict] trained (PKG of
    # 110 edges, the test windows counted in) without a word; the 'test_dataloader.dataset'
    # key gets a WARNING (meaning2's T23), the same windows written out did not
    import mmengine.logging
    from vpn_plugin.data_paths import apply_horizon, resolve_paths
    from vpn_plugin.runner import warn_test_videos_in_pkg
    cfg = resolve_paths(apply_horizon(_niv_pdpp_cfg(shared_data, window_file)))
    seen = []
    monkeypatch.setattr(mmengine.logging, 'print_log', lambda msg, *a, **k: seen.append(msg))
    warn_test_videos_in_pkg(cfg, 0, cfg.model.pkg.extra_datasets[0])
    text = ' '.join(seen)
    if warned:
        assert 'model.pkg.extra_datasets[0] holds' in text and 'video(s) of the test split' in text
        assert 'oracle upper bound' in text
    else:
        assert text == ''


@pytest.mark.parametrize('key, value', [('observation', 'concat3'), ('window_policy', 'keep'),
                                        ('device_resident', False)])
def test_top_level_dataset_variable_given_late_is_refused(key, value):
    # E32: tools/test.py pdpp_niv_t3 P0/epoch_1.pth --cfg-options observation=concat3 exited 0
    # with the metrics of 'authors' observations: the datasets copied the variable when the
    # config file was read, the late option reached nothing
    from vpn_plugin.data_paths import load_config
    with pytest.raises(ValueError, match=rf'--cfg-options {key}=.* changes the top-level '
                                         rf'variable only.*test_dataloader\.dataset\.{key}='):
        load_config('configs/baselines/pdpp_niv_t3.py', {key: value})


def test_dataset_variables_set_where_they_act_still_load():
    from vpn_plugin.data_paths import load_config
    cfg = load_config('configs/baselines/pdpp_niv_t3.py', {'observation': 'authors'})
    assert cfg.test_dataloader.dataset.observation == 'authors'  # the same value: no effect lost
    cfg = load_config('configs/baselines/pdpp_niv_t3.py', {
        'train_dataloader.dataset.observation': 'concat3',
        'val_dataloader.dataset.observation': 'concat3',
        'test_dataloader.dataset.observation': 'concat3'})
    assert cfg.test_dataloader.dataset.observation == 'concat3'


def _graph_file(tmp_path, weight):
    import pickle
    import networkx as nx
    graph = nx.DiGraph()
    graph.add_edge(0, 1, weight=weight)
    path = tmp_path / 'graph.pkl'
    path.write_bytes(pickle.dumps(graph))
    return path


def test_released_graph_with_numpy_float32_probabilities_is_read(tmp_path):
    # G4: a released graph whose weights are np.float32(1.0) (a graph built from numpy arrays)
    # was refused with "weight np.float32(1.0) (float32); expected a float in [0, 1]"
    import numpy as np
    from vpn_plugin.models.kepp import released_graph
    graph = released_graph(_graph_file(tmp_path, np.float32(1.0)), 48, 4)
    assert graph.num_edges == 1


@pytest.mark.parametrize('weight', ['np.float32(2.0)', 'np.int64(1)', 'np.bool_(True)'])
def test_released_graph_numpy_values_still_checked(tmp_path, weight):
    import numpy as np
    from vpn_plugin.models.kepp import released_graph
    with pytest.raises(ValueError, match=r'expected a float in \[0, 1\]'):
        released_graph(_graph_file(tmp_path, eval(weight)), 48, 4)

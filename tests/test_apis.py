"""vpn_plugin.apis (init_planner, inference_planner) and tools/plan.py, their command line."""
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import DATASETS, MODELS
from test_pkg_builder import REPO, tiny_uniform_config
from vpn_plugin import core
from vpn_plugin.apis import build_split_dataset, inference_planner, init_planner
from tiny_configs import save_recorded, tiny_vpn_config
from tool_modules import load_tool


def test_init_planner_without_checkpoint_counts_the_training_pkg(tiny_crosstask, tmp_path):
    model = init_planner(str(tiny_uniform_config(tiny_crosstask, tmp_path)))
    train = DATASETS.build(tiny_crosstask['train_dataset'])
    expected = core.build_pkg(train.pkg_sequences('window'), 133, horizon=3)
    assert bool(model.pkg_ready) and not model.training
    np.testing.assert_allclose(model.pkg_probabilities(), expected, atol=1e-6)
    dataset = build_split_dataset(model.cfg, 'test')
    samples = inference_planner(model, dataset, [2, 0], batch_size=1)
    assert [int(s.sample_idx) for s in samples] == [2, 0]
    assert [s.gt_plan.tolist() for s in samples] == dataset.plans[[2, 0]].tolist()
    with pytest.raises(IndexError, match=f'sample index {len(dataset)} is out of range'):
        inference_planner(model, dataset, [len(dataset)])
    with pytest.raises(ValueError, match=r"build_split_dataset\(\) argument split='dev'; expected one of"):
        build_split_dataset(model.cfg, 'dev')


def test_plan_tool_prints_the_checkpoints_plans(tiny_crosstask, tmp_path, capsys):
    model = MODELS.build(dict(type='UniformEmissionPlanner', num_actions=133, horizon=3))
    model.set_pkg(np.roll(np.eye(133), 1, axis=1))  # only a -> a + 1
    save_recorded(model, tmp_path / 'chain.pth', tiny_crosstask['test_dataset'])
    load_tool('plan').main([str(tiny_uniform_config(tiny_crosstask, tmp_path)), str(tmp_path / 'chain.pth'),
               '--indices', '1', '4'])
    names = DATASETS.build(tiny_crosstask['test_dataset']).taxonomy.action_names
    ids_of = {}  # format_plan's column: 31 characters of a name (names repeat across tasks)
    for action, name in enumerate(names):
        ids_of.setdefault(name[:31], set()).add(action)
    printed = [line for line in capsys.readouterr().out.splitlines()
               if ' - mmengine - ' not in line  # the dataset's size, logged
               and 'records too little to compare' not in line]  # save_recorded: no cfg
    blocks = '\n'.join(printed).strip().split('\n\n')
    assert [b.splitlines()[0].split(' |')[0] for b in blocks] == ['sample 1', 'sample 4']
    for block in blocks:
        steps = [ids_of[line[7:39].rstrip()] for line in block.splitlines()[2:]
                 if not line.startswith('WARNING: step(s)')]  # the plan leaves its task
        assert len(steps) == 3
        assert any((a + 1) % 133 in steps[1] and (a + 2) % 133 in steps[2] for a in steps[0])


def test_video_observations_read_the_configs_recipe_at_the_given_seconds(tmp_path):
    """Oracle: the frames around each second, by hand (authors: t-1, t, t+1 concatenated, the
    last frame replayed past the end; mean3: the mean of the frames max(0, t-1)..min(t+1, L-1),
    as SCHEMA's loaders: an edge frame counted once)."""
    from mmengine.config import Config
    from vpn_plugin.apis import video_observations
    frames = np.arange(10 * 512, dtype=np.float32).reshape(10, 512)
    np.savez(tmp_path / 'new_video.npz', frames_features=frames)
    def config(observation):
        return Config(dict(test_dataloader=dict(dataset=dict(observation=observation,
                                                             frame_dim=512))))
    start, goal = video_observations(config('authors'), tmp_path / 'new_video.npz', 2.4, 12)
    torch.testing.assert_close(start, torch.from_numpy(frames[[1, 2, 3]].reshape(-1)))
    torch.testing.assert_close(goal, torch.from_numpy(frames[[8, 9, 9]].reshape(-1)))
    start, goal = video_observations(config('mean3'), tmp_path / 'new_video.npz', 0, 5)
    torch.testing.assert_close(start, torch.from_numpy(frames[[0, 1]].mean(0)))
    torch.testing.assert_close(goal, torch.from_numpy(frames[[4, 5, 6]].mean(0)))
    with pytest.raises(ValueError, match=r"new_video.npz: start_time=11, goal_time=12 s, read at "
                       r"seconds 11 and 12 .*; expected .* before the video's 10 seconds"):
        video_observations(config('authors'), tmp_path / 'new_video.npz', 11, 12)
    # issue 33: a goal far past the end was read at the last frame without a word
    with pytest.raises(ValueError, match=r"goal_time=1000000 s, .*; expected 0 <= start_time <= "
                                         r"goal_time <= 20 s"):
        video_observations(config('authors'), tmp_path / 'new_video.npz', 2, 10 ** 6)
    with pytest.raises(ValueError, match=r"video_observations\(\) argument start_time=nan; expected a finite"):
        video_observations(config('authors'), tmp_path / 'new_video.npz', float('nan'), 5)


def test_integer_observations_and_fractional_sample_indices_are_refused():
    """Today int64 features are cast to float and sample index 1.7 plans sample 1."""
    from vpn_plugin.apis import inference_planner, plan_from_features
    model = torch.nn.Module()
    model.feature_dim = 4
    with pytest.raises(TypeError, match='start observations have dtype torch.int64; expected '
                                        'floating-point'):
        plan_from_features(model, np.ones((2, 4), np.int64), np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match='goal observations hold 1 NaN/inf value'):
        plan_from_features(model, np.ones((2, 4), np.float32),
                           np.array([[1, 2, 3, np.nan]] + [[0] * 4], np.float32))
    for index in (1.7, True, '1'):
        with pytest.raises(TypeError, match=f'sample index {index!r} is a'):
            inference_planner(model, [None] * 3, [0, index])


def test_plan_from_a_new_videos_features_equals_the_dataset_path(tiny_crosstask, tmp_path,
                                                                 monkeypatch):
    """A user's own video (feature file + the first step's start / last step's end seconds)
    planned by plan_from_features = the same window planned from the dataset, from any CWD."""
    from vpn_plugin.apis import plan_from_features, video_observations
    from vpn_plugin.datasets.features import find_feature_file
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    model = init_planner(str(tiny_vpn_config(tiny_crosstask, tmp_path)))
    dataset = build_split_dataset(model.cfg, 'test')
    indices = [0, 7]
    expected = inference_planner(model, dataset, indices)
    starts, goals = [], []
    for i in indices:
        window = dataset.windows[i]
        feature_file = find_feature_file(tiny_crosstask['feature_dir'], window.feature)
        start, goal = video_observations(model.cfg, feature_file, window.times[0][0],
                                         window.times[-1][1])
        torch.testing.assert_close(start, dataset[i]['inputs']['start'])
        torch.testing.assert_close(goal, dataset[i]['inputs']['goal'])
        starts.append(start)
        goals.append(goal)
    planned = plan_from_features(model, torch.stack(starts), torch.stack(goals).numpy())
    assert [s.pred_plan.tolist() for s in planned] == [s.pred_plan.tolist() for s in expected]
    single = plan_from_features(model, starts[1], goals[1])
    assert len(single) == 1 and single[0].pred_plan.tolist() == expected[1].pred_plan.tolist()
    assert 'gt_plan' not in single[0]
    with pytest.raises(ValueError, match=r'start observations of shape \(1, 512\); expected '
                       r'\(B, 1536\)'):
        plan_from_features(model, torch.zeros(512), torch.zeros(512))
    # before: 'log_emissions holds NaN or +inf values' (an inner tensor, not the input)
    with pytest.raises(ValueError, match=r'log_emissions holds NaN .*: the model computed them '
                       r'from finite observations \(start, goal; largest \|value\| 1e\+30'):
        plan_from_features(model, starts[1] / starts[1].abs().max() * 1e30, goals[1])


def test_build_split_dataset_resolves_a_raw_config(tiny_crosstask, tmp_path, monkeypatch):
    """A Config read with Config.fromfile (placeholders unfilled) builds from any directory;
    a dataset built from it by hand says how to load it."""
    from mmengine.config import Config
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(str(REPO / 'configs/vpn_crosstask_t3.py'))
    with pytest.raises(ValueError, match=r"data_root='\{data_root\}/crosstask' still holds a "
                       'location placeholder.*load_config'):
        DATASETS.build(cfg.test_dataloader.dataset)
    cfg.feature_dir = 'my_features'  # a caller's value: read from the working directory
    with pytest.raises(FileNotFoundError, match=f"feature_dir {tmp_path / 'my_features'} does "
                       'not exist'):
        build_split_dataset(cfg, 'test')

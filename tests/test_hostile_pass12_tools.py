"""Tenth hostile pass, part B (issue 37), the tools around training (confirm3).

Each test is a case that was wrong or silent on 12d26a2 (case ids of /tmp/confirm3_log.md),
or one of part A's leftovers (meaning3's C2: plan.py on features of another scale).
"""
from pathlib import Path

import numpy as np
import pytest

from tool_modules import load_tool
from test_hostile_pass11_tools import recorded_uniform  # noqa: F401  (fixture)


@pytest.fixture
def recorded_with_statistics(recorded_uniform, tiny_crosstask):  # noqa: F811
    """(config, checkpoint) of ``recorded_uniform`` with the statistics of its training
    features in ``meta['feature_statistics']``, as a training records them."""
    import torch
    from mmaction.registry import DATASETS
    from vpn_plugin.engine.checkpoint import FEATURE_STATS_KEY
    config, path = recorded_uniform
    checkpoint = torch.load(path, weights_only=False)
    train = DATASETS.build(dict(tiny_crosstask['train_dataset']))
    checkpoint['meta'][FEATURE_STATS_KEY] = train.feature_statistics()
    torch.save(checkpoint, path)
    return config, path


def one_video(tiny_crosstask) -> Path:
    """A test video's feature file of the tiny CrossTask features."""
    return sorted(Path(tiny_crosstask['feature_dir']).glob('*.npz'))[0]


def test_c2_plans_from_features_of_another_scale_name_the_training_features(
        recorded_with_statistics, tiny_crosstask, tmp_path, capsys):
    """meaning3's C2: plan.py --features on a video's features x1000 planned without a word;
    init_planner keeps the training features' statistics, plan_from_features and
    inference_planner compare the features planned from as a test compares (one function,
    engine.checkpoint.feature_statistics_note). The same features are not named (no wolf)."""
    config, checkpoint = recorded_with_statistics
    video = one_video(tiny_crosstask)
    frames = np.load(video)['frames_features']
    np.save(tmp_path / 'scaled.npy', frames * 1000)
    plan = load_tool('plan')
    base = [str(config), '--checkpoint', str(checkpoint), '--start-time', '0',
            '--goal-time', str(len(frames) - 1)]
    plan.main(base + ['--features', str(video)])
    out = capsys.readouterr()
    assert 'have mean' not in out.out + out.err
    plan.main([str(config), str(checkpoint), '--indices', '0', '1'])
    out = capsys.readouterr()
    assert 'have mean' not in out.out + out.err
    plan.main(base + ['--features', str(tmp_path / 'scaled.npy')])
    out = capsys.readouterr()
    assert (f'WARNING: the features planned from have mean ' in out.out
            and f'{checkpoint} was trained on features of mean' in out.out)
    assert 'UserWarning' not in out.err


def test_c2_inference_planner_names_a_dataset_of_another_scale(recorded_with_statistics,
                                                                tiny_crosstask):
    """The API: a dataset whose features are x10 those of training is named in a UserWarning
    and in each sample's metainfo features_note; the test split itself is not."""
    import warnings
    from mmaction.registry import DATASETS
    from vpn_plugin.apis import inference_planner, init_planner
    config, checkpoint = recorded_with_statistics
    model = init_planner(str(config), str(checkpoint))
    test = DATASETS.build(dict(tiny_crosstask['test_dataset']))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        samples = inference_planner(model, test, [0])
    assert 'features_note' not in samples[0].metainfo
    test.start, test.goal = test.start * 10, test.goal * 10
    test._feature_statistics = None
    with pytest.warns(UserWarning, match='the features planned from have mean'):
        samples = inference_planner(model, test, [0])
    assert 'was trained on features of mean' in samples[0].metainfo['features_note']


def test_m10_two_runs_saving_features_to_one_new_file_keep_the_first(tmp_path):
    """M10: two plan.py --video runs of different videos with --save-features X (X new) at
    once both exited 0 and said "features: X"; X held the second video's features, the first
    run's replaced without a word (neither had --overwrite). The run that finds X written
    meanwhile now keeps it and fails naming it; a file there when the run began (an earlier
    --save-features, --overwrite) is replaced as before."""
    from types import SimpleNamespace
    plan = load_tool('plan')
    path = tmp_path / 'same.npz'
    s3d = SimpleNamespace(usable=True)
    plan.save_features(path, np.ones((6, 512), np.float32), s3d, '', existed=False)
    with pytest.raises(ValueError, match=r'--save-features .*same.npz: another process wrote '
                                         r'that file while this run extracted its features'):
        plan.save_features(path, np.zeros((4, 512), np.float32), s3d, '', existed=False)
    assert np.load(path)['frames_features'].shape == (6, 512)
    assert [p.name for p in tmp_path.iterdir()] == ['same.npz']  # no temporary left
    plan.save_features(path, np.zeros((4, 512), np.float32), s3d, '', existed=True)
    assert np.load(path)['frames_features'].shape == (4, 512)

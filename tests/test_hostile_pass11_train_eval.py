"""Tenth hostile pass (issue 37), scope: ViterbiPlanNet / SCHEMA / CompactPlanNet / baselines
through tools/train.py and tools/test.py. Each test names what the code of main at 1c6544e did."""
import logging

import numpy as np
import pytest
from mmengine.config import Config

import vpn_plugin.mm  # noqa: F401  (registration)
from tiny_configs import option_differences
from vpn_plugin.engine.checkpoint import (IRRELEVANT, NAMED, SAME, TRAINING_OPTIONS,
                                          feature_statistics_note, training_option_differences)

RUN_CFG = """model = dict(type='ViterbiPlanNet', num_actions=48, num_tasks=5, horizon=3,
    loss_weight=1.0, decode='viterbi')
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=0.001))
param_scheduler = [dict(type='MultiStepLR', milestones=[20], gamma=0.65)]
randomness = dict(seed=0)
train_dataloader = dict(batch_size=32, dataset=dict(type='PlanningDataset', horizon=3,
    observation='authors', val_fraction=0.1, feature_dir='/data/niv/features'))
val_dataloader = dict(batch_size=32, dataset=dict(type='PlanningDataset', horizon=3,
    observation='authors', split='val', feature_dir='/data/niv/features'))
val_cfg = dict(type='ValLoop')
test_dataloader = dict(batch_size=32, dataset=dict(type='PlanningDataset', horizon=3,
    observation='authors', split='test', feature_dir='/data/niv/features'))
train_cfg = dict(max_epochs=50)
"""


def differences(change: dict, purpose: str):
    return option_differences(RUN_CFG, purpose, change=change)


@pytest.mark.parametrize('change, purpose, refused, named', [
    # SAME at resume, NAMED at test: the resumed training split observed otherwise (before:
    # the resume compared model and optimiser options only; the data digest said 'another
    # training set' without naming the option)
    ({'train_dataloader.dataset.observation': 'concat3'}, 'resume',
     ["train_dataloader.dataset.observation: 'authors' in the run, 'concat3' here"], []),
    ({'test_dataloader.dataset.observed_steps': 1}, 'test',
     [], ['test_dataloader.dataset.observed_steps: 0 in training, 1 here']),
    # a cross-horizon test is allowed and named
    ({'test_dataloader.dataset.horizon': 4}, 'test',
     [], ['test_dataloader.dataset.horizon: 3 in training, 4 here']),
    # the run's seed changes no test (samplers draw with model.sampling_seed): no wolf
    ({'randomness.seed': 3}, 'test', [], []),
    ({'randomness.seed': 3}, 'resume', ['randomness.seed: 0 in the run, 3 here'], []),
    ({'model.decode': 'argmax'}, 'test',
     [], ["model.decode: 'viterbi' in training, 'argmax' here"]),
    ({'model.decode': 'argmax'}, 'resume',
     ["model.decode: 'viterbi' in the run, 'argmax' here"], []),
    # IRRELEVANT: the optimiser and schedule at test, the held-out fraction at test, a longer
    # schedule at resume (extending a run), moved features anywhere
    ({'optim_wrapper.optimizer.lr': 0.1}, 'test', [], []),
    ({'train_dataloader.batch_size': 8}, 'test', [], []),
    ({'train_cfg.max_epochs': 80}, 'resume', [], []),
    ({'train_dataloader.dataset.feature_dir': '/moved/niv/features'}, 'resume', [], []),
    ({'test_dataloader.dataset.feature_dir': '/moved/niv/features'}, 'test', [], []),
    ({'optim_wrapper.optimizer.lr': 0.1}, 'resume',
     ['optim_wrapper.optimizer.lr: 0.001 in the run, 0.1 here'], []),
    # before: exit 0; the validation of the resumed epochs observed 1 step (val SR 3.28 ->
    # 11.48) and save_best compared those scores with the run's best of 0 observed steps
    ({'val_dataloader.dataset.observed_steps': 1}, 'resume',
     ['val_dataloader.dataset.observed_steps: 0 in the run, 1 here'], []),
    ({'val_dataloader.dataset.observed_steps': 1}, 'test', [], []),
    ({'train_dataloader.dataset.val_fraction': 0.2}, 'resume',
     ['train_dataloader.dataset.val_fraction: 0.1 in the run, 0.2 here'], []),
])
def test_one_table_decides_each_option_at_resume_and_test(change, purpose, refused, named):
    found = differences(change, purpose)
    assert (found.refused, found.named) == (refused, named)
    assert differences({}, purpose) == ([], [])  # the run's own config: nothing


def test_every_table_entry_has_a_class_for_resume_and_test():
    classes = {SAME, NAMED, IRRELEVANT}
    assert all(len(rule) == 2 and set(rule) <= classes for rule in TRAINING_OPTIONS.values())
    # a checkpoint without a readable meta['cfg']: nothing to compare
    assert training_option_differences(None, Config(), 'test') == ([], [])


def test_a_test_row_names_the_changed_options_in_its_metrics(tmp_path):
    """Before: the override warning went to the log only; test_metrics.json held the numbers
    of a test with observed_steps=1 as if they were the checkpoint's."""
    import json
    from tool_modules import load_tool
    test = load_tool('test')
    path = tmp_path / 'm.json'
    test.write_metrics({'plan/success_rate': 12.5}, str(path), '',
                       dict(changed_from_training=['x: 0 in training, 1 here'],
                            feature_statistics=''))
    assert json.loads(path.read_text()) == {'plan/success_rate': 12.5,
                                            'changed_from_training': ['x: 0 in training, 1 here']}

    class Runner:
        changed_from_training = ['x: 0 in training, 1 here']
        feature_statistics_note = ''
    assert test.test_notes(Runner())['changed_from_training'] == ['x: 0 in training, 1 here']


def test_features_of_another_scale_are_named_and_the_other_split_is_not(tiny_crosstask):
    """Before: a checkpoint recorded nothing of its training features; a test on features
    ten times larger (or of another extractor with the same dimension) said nothing. The
    same synthetic features' train and test splits must not be named."""
    from mmaction.registry import DATASETS
    train = DATASETS.build(dict(tiny_crosstask['train_dataset']))
    test = DATASETS.build(dict(tiny_crosstask['test_dataset']))
    checkpoint = dict(meta=dict(feature_statistics=train.feature_statistics()))
    assert feature_statistics_note(checkpoint, 'c.pth', test.feature_statistics()) == ''
    scaled = dict(test.feature_statistics())
    scaled.update(mean=scaled['mean'] * 10, std=scaled['std'] * 10)
    note = feature_statistics_note(checkpoint, 'c.pth', scaled)
    assert note.startswith('the test features have mean') and 'c.pth was trained on' in note
    shifted = dict(test.feature_statistics(), mean=train.feature_statistics()['mean']
                   + train.feature_statistics()['std'])
    assert feature_statistics_note(checkpoint, 'c.pth', shifted)
    assert feature_statistics_note(dict(meta={}), 'c.pth', scaled) == ''  # nothing recorded


def test_a_wider_task_head_is_named(caplog):
    """Before: model.num_tasks=180 on NIV's 5 tasks trained without a word (allowed: a
    planner's head may be wider; now it says so)."""
    from mmengine.logging import MMLogger
    from vpn_plugin.models.pkg_hook import check_model_fits_data

    class Dataset:
        metainfo = dict(num_actions=48, num_tasks=5)
        tasks = np.array([0, 4, 2])
    logger = MMLogger.get_instance('meaning1_wider_head')
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger.addHandler(handler)
    try:
        check_model_fits_data(dict(num_actions=48, num_tasks=5), Dataset, 'c.py')
        assert lines == []  # the dataset's own count: nothing said
        check_model_fits_data(dict(num_actions=48, num_tasks=180), Dataset, 'c.py')
    finally:
        logger.removeHandler(handler)
    assert lines == ["c.py: model.num_tasks=180 is wider than the training dataset's 5 tasks: "
                     '175 task outputs are never trained (set model.num_tasks=5 unless that '
                     'is meant)']


def test_resume_true_in_an_empty_work_dir_says_it_starts_afresh(tmp_path):
    """Before: the config's resume=True (mmengine's auto-resume) in a work dir without a
    checkpoint started a new run without a word (tools/train.py --resume refuses it)."""
    from vpn_plugin.runner import PlanningRunner
    lines = []
    runner = object.__new__(PlanningRunner)
    runner.__dict__.update(_has_loaded=False, _resume=True, _load_from=None,
                           _distributed=False, testing=False, _work_dir=str(tmp_path), cfg={},
                           logger=type('Logger', (), {'info': lambda _, m: lines.append(m)})(),
                           write_config=lambda training: None)
    runner.load_or_resume()
    assert lines == [f'resume=True: the work dir {tmp_path} holds no checkpoint to resume '
                     "from; the run starts afresh (mmengine's auto-resume; tools/train.py "
                     '--resume refuses this case)']


def test_resume_auto_in_an_empty_work_dir_says_it_starts_afresh(tmp_path, capsys):
    """Before: `tools/train.py --resume auto` with nothing to resume started afresh silently
    (R_auto_empty)."""
    from tool_modules import load_tool
    train = load_tool('train')
    cfg = Config(dict(work_dir=str(tmp_path)))
    train.set_resume(cfg, 'auto')
    assert not cfg.resume
    assert f'--resume auto: {tmp_path} holds no checkpoint to resume from: the run starts ' \
        'afresh' in capsys.readouterr().err


def test_a_test_that_skipped_bad_videos_is_marked_shortened():
    """Before: skip_bad_videos=True on a feature folder missing 22 of NIV's test videos scored
    144 of 270 windows; test_metrics.json said nothing of it (a log INFO line counted them)."""
    from collections import Counter
    from tool_modules import load_tool
    test = load_tool('test')

    class Dataset:
        limited, skipped = None, Counter({'missing feature file': 22})

    class Runner:
        test_dataloader = type('Loader', (), {'dataset': Dataset})
    assert test.shortened_reasons(Runner()) == \
        'skip_bad_videos: test videos skipped (22 missing feature file)'
    Dataset.skipped = Counter()
    assert test.shortened_reasons(Runner()) == ''  # nothing skipped: no mark

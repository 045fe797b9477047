"""Tenth hostile pass, part B (issue 37's confirmation pass), scope: ViterbiPlanNet / SCHEMA /
CompactPlanNet / baselines through tools/train.py and tools/test.py. Each test names what the
code of main at 2ce44a1 did."""
import glob
import os

import numpy as np

import vpn_plugin.mm  # noqa: F401  (registration)
from tiny_configs import option_differences


def _short_features(source: str, target, seconds: int) -> str:
    """A copy of a feature folder whose videos keep their first ``seconds`` seconds."""
    os.makedirs(target, exist_ok=True)
    for path in glob.glob(os.path.join(source, '*.npz')):
        arrays = dict(np.load(path))
        arrays['frames_features'] = arrays['frames_features'][:seconds]
        np.savez(os.path.join(target, os.path.basename(path)), **arrays)
    return str(target)


def test_a_test_whose_windows_the_policy_dropped_names_them_in_its_metrics(
        tiny_crosstask, tmp_path):
    """Before: features of 5 s per video under window_policy='authors' dropped 267 of 270 NIV
    test windows; the test scored 3 and exited 0, test_metrics.json said nothing (an INFO
    log line counted them)."""
    from mmaction.registry import DATASETS
    from tool_modules import load_tool
    test = load_tool('test')

    def notes(feature_dir):
        dataset = DATASETS.build(dict(tiny_crosstask['test_dataset'], window_policy='authors',
                                      feature_dir=feature_dir, cache_dir=None))

        class Runner:
            test_dataloader = type('Loader', (), {'dataset': dataset})
        return test.test_notes(Runner()), len(dataset)

    whole, scored = notes(tiny_crosstask['feature_dir'])
    assert whole.get('test_windows', '') == '' and scored == 105  # nothing dropped: no mark
    short, scored = notes(_short_features(tiny_crosstask['feature_dir'], tmp_path / 'f', 20))
    assert scored < 105
    assert short['test_windows'].startswith("window_policy='authors': ")
    assert f'{105 - scored} dropped' in short['test_windows']
    assert 'of 105 windows' in short['test_windows'] and 'not scored' in short['test_windows']


def _niv_splits(shared_data, val_change: dict, selection=None):
    class Config(dict):
        filename = 'cfg.py'
    base = dict(type='PlanningDataset', data_root=str(shared_data / 'niv'),
                taxonomy='taxonomy.json', horizon=3, feature_dir='/nowhere')
    loaders = dict(
        train_dataloader=dict(dataset=dict(base, window_file='splits/train_T3.json')),
        val_dataloader=dict(dataset=dict(dict(base, split='val',
                                              window_file='splits/train_T3.json'), **val_change)),
        test_dataloader=dict(dataset=dict(base, split='test',
                                          window_file='splits/test_T3.json')))
    return Config(loaders, **({} if selection is None else dict(selection=selection)))


def test_validation_on_training_or_test_windows_is_refused_unless_authors_selection(
        shared_data):
    """Before: val_dataloader.dataset.split='test' on the training window file validated on all
    697 NIV training windows (the 636 trained on among them), and window_file=test_T3.json
    selected on 10% of the test videos; both trained with exit 0 and a test logged
    'model selection: unified (held-out training videos)'."""
    import pytest
    from vpn_plugin.datasets.planning_dataset import check_split_disjoint
    check_split_disjoint(_niv_splits(shared_data, {}))  # the configs' own: nothing said
    with pytest.raises(ValueError, match=r"cfg.py: val_dataloader.dataset.split='test' reads "
                       r"the training split's own source .* windows it was trained on"):
        check_split_disjoint(_niv_splits(shared_data, dict(split='test')))
    with pytest.raises(ValueError, match=r"video\(s\) are in both the validation and the "
                       r"test split"):
        check_split_disjoint(_niv_splits(shared_data, dict(window_file='splits/test_T3.json')))
    # the authors' selection validates on the test windows on purpose (configs/_base_/selection)
    check_split_disjoint(_niv_splits(shared_data, dict(split='test',
                                                       window_file='splits/test_T3.json'),
                                     selection='authors'))


RUN_CFG = """model = dict(type='ViterbiPlanNet', num_actions=48, num_tasks=5, horizon=3)
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=0.001))
train_dataloader = dict(batch_size=32, sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type='PlanningDataset', horizon=3, feature_dir='/data/niv/features'))
val_dataloader = dict(batch_size=32, dataset=dict(type='PlanningDataset', horizon=3,
    split='val', feature_dir='/data/niv/features'))
val_cfg = dict(type='ValLoop')
test_dataloader = dict(batch_size=32, dataset=dict(type='PlanningDataset', horizon=3,
    split='test', feature_dir='/data/niv/features'))
"""


def test_a_resume_that_shuffles_groups_or_validates_otherwise_is_refused():
    """Before: --resume with train_dataloader.sampler.shuffle=False or sampler.seed=5 continued
    the run in another window order, val_dataloader.dataset.limit=10 compared 10 validation
    windows with the run's best on 61 (save_best), each with exit 0 and no word;
    optim_wrapper.paramwise_cfg failed in torch's words ('a different number of parameter
    groups'); --auto-scale-lr (lr x2) trained on at the restored lr 9e-4. A test of the
    checkpoint is not concerned by any of them."""
    def found(change, purpose):
        return option_differences(RUN_CFG, purpose, change=change)
    assert found({}, 'resume') == ([], [])
    cases = [({'train_dataloader.sampler.shuffle': False},
              "train_dataloader.sampler: {'type': 'DefaultSampler', 'shuffle': True} in the "
              "run, {'type': 'DefaultSampler', 'shuffle': False} here"),
             ({'optim_wrapper.paramwise_cfg': dict(bias_lr_mult=2.0)},
              "optim_wrapper.paramwise_cfg: None in the run, {'bias_lr_mult': 2.0} here"),
             ({'auto_scale_lr': dict(enable=True, base_batch_size=16)},
              "auto_scale_lr: None in the run, {'enable': True, 'base_batch_size': 16} here"),
             ({'val_dataloader.dataset.limit': 10},
              'val_dataloader.dataset.limit: None in the run, 10 here')]
    for change, line in cases:
        assert found(change, 'resume').refused == [line]
        assert found(change, 'test') == ([], [])


def test_an_endless_training_sampler_in_an_epoch_loop_is_refused():
    """Before: train_dataloader.sampler.type='InfiniteSampler' (EpochBasedTrainLoop) trained
    past num_batch_per_epoch=2 ('Epoch(train) [2][110/2]', ETA '-1 day, 23:47:58') without end."""
    import pytest
    from vpn_plugin.runner import check_run_values

    def check(sampler, loop):
        check_run_values(dict(train_dataloader=dict(sampler=dict(type=sampler)),
                              train_cfg=loop), 'cfg.py')
    check('DefaultSampler', dict(max_epochs=2))
    check('InfiniteSampler', dict(type='IterBasedTrainLoop', max_iters=10))
    for loop in (dict(max_epochs=2), dict(type='EpochBasedTrainLoop', max_epochs=2)):
        with pytest.raises(ValueError, match=r"cfg.py: train_dataloader.sampler.type="
                           r"'InfiniteSampler' with train_cfg.type='EpochBasedTrainLoop': an "
                           'endless sampler never ends an epoch'):
            check('InfiniteSampler', loop)


def test_resume_flag_against_resume_false_is_refused():
    """Before: train.py --resume CKPT --cfg-options resume=False resumed CKPT, the option
    dropped without a word (the other flag/option pairs were already refused as contradicting)."""
    import pytest
    from tool_modules import load_tool
    train = load_tool('train')
    for flag in (['--resume'], ['--resume', 'auto'], ['--resume', '/x/epoch_1.pth']):
        args = train.parse_args(['cfg.py', *flag, '--cfg-options', 'resume=False'])
        with pytest.raises(SystemExit, match=r'--resume.* and --cfg-options resume=False '
                           'contradict each other'):
            train.check_resume_load_from(args)
    train.check_resume_load_from(train.parse_args(['cfg.py', '--resume', '--cfg-options',
                                                   'resume=True']))


def test_a_resume_that_adds_or_drops_an_ema_hook_is_refused():
    """Before: --resume with a config adding custom_hooks EMAHook started an EMA at the resumed
    epoch (exit 0, no word); only the options of a hook present in both runs were compared."""
    from vpn_plugin.engine.checkpoint import ema_hook_differences
    pkg, ema = dict(type='PKGHook'), dict(type='EMAHook', momentum=0.01)
    assert ema_hook_differences([pkg, ema], [pkg, ema]) == []
    assert ema_hook_differences([pkg], [pkg, ema]) == [
        "custom_hooks.EMAHook: none in the run, present here (an EMA started or dropped mid-run "
        "averages neither run's weights)"]
    assert ema_hook_differences([pkg, ema], [pkg])[0].startswith(
        'custom_hooks.EMAHook: present in the run, none here')


def test_a_checkpoint_pkg_without_any_edge_is_refused():
    """Before: log_transitions all -1e30 (each row 'no outgoing edge') loaded, and the test
    decoded through a graph with no edge at all (exit 0, SR 0, no word)."""
    import pytest
    import torch
    from vpn_plugin.engine.checkpoint import check_pkg_rows
    uniform = torch.full((4, 4), 0.25).log()
    check_pkg_rows({'log_transitions': uniform, 'pkg_ready': torch.tensor(True)}, 'a.pth')
    sparse = uniform.clone()
    sparse[1] = float('-inf')  # one action without a successor: allowed
    check_pkg_rows({'log_transitions': sparse, 'pkg_ready': torch.tensor(True)}, 'a.pth')
    with pytest.raises(ValueError, match=r'checkpoint a.pth: tensor log_transitions: '
                       'log_transitions holds no edge at all'):
        check_pkg_rows({'log_transitions': torch.full((4, 4), -1e30),
                        'pkg_ready': torch.tensor(True)}, 'a.pth')

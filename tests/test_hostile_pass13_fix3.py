"""Session 9 phase 1 (issue 37), fix3: one way to do each thing (closing8's review) and the
suite's time. Each test names what main at 230a96d did."""
import logging
import re
from types import SimpleNamespace

import pytest
from mmengine.config import Config

import vpn_plugin.mm  # noqa: F401  (registration)
from vpn_plugin.engine import checkpoint as checkpoint_module

RUN_CFG = """model = dict(type='ViterbiPlanNet', num_actions=48, num_tasks=5, horizon=3,
    loss_weight=1.0, decode='viterbi')
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=0.001))
randomness = dict(seed=0)
train_dataloader = dict(batch_size=32, dataset=dict(type='PlanningDataset', horizon=3,
    observation='authors', feature_dir='/data/niv/features'))
test_dataloader = dict(batch_size=32, dataset=dict(type='PlanningDataset', horizon=3,
    observation='authors', split='test', feature_dir='/data/niv/features'))
"""


def _config(change: dict) -> Config:
    cfg = Config.fromstring(RUN_CFG, '.py')
    cfg.merge_from_dict(change)
    return cfg


def _test_and_plan(cfg):
    """What a test (the runner) and a plan (init_planner) make of ``cfg`` against RUN_CFG:
    (the runner's changed_from_training, init_planner's option_differences), or the error."""
    from vpn_plugin.apis.inference import _option_differences
    from vpn_plugin.runner import PlanningRunner
    runner = SimpleNamespace(cfg=cfg, logger=logging.getLogger('fix3'))
    PlanningRunner.log_model_overrides(runner, {'meta': {'cfg': RUN_CFG}}, 'epoch_3.pth')
    with pytest.warns(UserWarning) if runner.changed_from_training else _no_warning():
        named = _option_differences({'meta': {'cfg': RUN_CFG}}, 'epoch_3.pth', cfg)
    return runner.changed_from_training, named


class _no_warning:
    def __enter__(self):
        import warnings
        self.caught = warnings.catch_warnings(record=True)
        self.list = self.caught.__enter__()
        warnings.simplefilter('always')

    def __exit__(self, *exc):
        self.caught.__exit__(*exc)
        assert not [w for w in self.list if 'trained with other options' in str(w.message)]


def test_test_and_plan_decide_options_through_one_function(monkeypatch):
    """Before: runner.log_model_overrides and apis.inference._option_differences each called
    training_option_differences(..., 'test') and raised / warned in their own words (a twin);
    engine.checkpoint had no check_test_options."""
    from vpn_plugin.engine.checkpoint import check_test_options
    named = check_test_options(RUN_CFG, _config({'model.decode': 'argmax'}), 'epoch_3.pth',
                               'test it')
    assert named == ["model.decode: 'viterbi' in training, 'argmax' here"]
    assert check_test_options(RUN_CFG, _config({}), 'epoch_3.pth', 'plan') == []
    assert check_test_options(None, _config({}), 'epoch_3.pth', 'plan') == []
    assert _test_and_plan(_config({'model.decode': 'argmax'})) == (named, named)
    assert _test_and_plan(_config({})) == ([], [])
    # an option the table refuses at a test: both callers raise the one message
    monkeypatch.setitem(checkpoint_module.TRAINING_OPTIONS, 'dataset.horizon',
                        (checkpoint_module.SAME, checkpoint_module.SAME))
    changed = _config({'test_dataloader.dataset.horizon': 4})
    expected = ('epoch_3.pth was trained with other options than this config: '
                'test_dataloader.dataset.horizon: 3 in training, 4 here; {} with the options '
                'it was trained with')
    with pytest.raises(ValueError) as raised:
        check_test_options(RUN_CFG, changed, 'epoch_3.pth', 'test it')
    assert str(raised.value) == expected.format('test it')
    with pytest.raises(ValueError) as raised:
        _test_and_plan(changed)
    assert str(raised.value) == expected.format('test it')  # the runner's, first
    from vpn_plugin.apis.inference import _option_differences
    with pytest.raises(ValueError) as raised:
        _option_differences({'meta': {'cfg': RUN_CFG}}, 'epoch_3.pth', changed)
    assert str(raised.value) == expected.format('plan')
    # both go through it: replaced, both see the replacement
    calls = []
    monkeypatch.setattr(checkpoint_module, 'check_test_options',
                        lambda *args: calls.append(args[2:]) or [])
    _test_and_plan(_config({'model.decode': 'argmax'}))
    assert [call[:2] for call in calls] == [('epoch_3.pth', 'test it'), ('epoch_3.pth', 'plan')]


def test_one_function_per_name_for_features_notes():
    """Before: two functions named features_note, protocol/provenance's (which feature folder
    rows were measured on) and apis.inference's (a planner's training feature statistics
    against the features planned from)."""
    import re
    from pathlib import Path

    import vpn_plugin
    from vpn_plugin.apis import inference
    package = Path(vpn_plugin.__file__).parent
    defined = sorted(str(path.relative_to(package)) for path in package.rglob('*.py')
                     if re.search(r'^def features_note\(', path.read_text(), re.M))
    assert defined == ['protocol/provenance.py']
    assert callable(inference.feature_scale_note) and not hasattr(inference, 'features_note')


def test_a_resume_reads_the_options_table_directly():
    """Before: engine.checkpoint.resume_option_differences, a one-line wrapper over
    training_option_differences(..., 'resume').refused with one caller (the runner)."""
    assert not hasattr(checkpoint_module, 'resume_option_differences')


@pytest.fixture
def kind_checks(monkeypatch):
    """The names each kind check (config_types.check_value) was asked about, in order."""
    from vpn_plugin import config_types, errors
    names, original = [], config_types.check_value

    def recorded(name, value, kind):
        names.append(name)
        return original(name, value, kind)
    monkeypatch.setattr(config_types, 'check_value', recorded)
    monkeypatch.setattr(errors, 'check_value', recorded)
    return names


def _checked_twice(names, prefixes) -> list:
    """The options of the ``prefixes`` (an __init__'s) whose kind was checked more than once."""
    ours = [name for name in names if name.startswith(prefixes)]
    return sorted({name for name in ours if ours.count(name) > 1})


def test_a_built_hook_model_or_dataset_checks_each_option_kind_once(kind_checks,
                                                                    tiny_crosstask):
    """Before: the __init__ bodies repeated the kinds their @checked_arguments annotations
    check (the EMA hooks' check_ema_settings, SCHEMA's check_sizes, PlanningDataset's
    check_numbers / check_bool / check_choice): 'PDPPEMAHook: decay' was checked twice."""
    from mmaction.registry import DATASETS, HOOKS, MODELS
    HOOKS.build(dict(type='PDPPEMAHook', decay=0.99, start_step=20, interval=10))
    HOOKS.build(dict(type='CEFITOEMAHook', decay=0.99, start_step=20, update_every=10))
    MODELS.build(dict(type='SCHEMA', num_actions=5, num_tasks=2, horizon=3, feature_dim=8,
                      text_dim=4, embed_dim=8, num_heads=2, num_layers=1, mlp_ratio=1,
                      dropout=0.1, input_dropout=0.1, no_state_task=True, decode='argmax'))
    DATASETS.build(dict(tiny_crosstask['test_dataset'], frame_dim=512, split_seed=0,
                        subset_seed=0, observed_steps=1, val_fraction=0.1,
                        skip_bad_videos=False, device_resident=False, observation='concat3',
                        window_policy='keep'))
    for name in ('PDPPEMAHook: decay', 'CEFITOEMAHook: update_every', 'SCHEMA model.dropout',
                 'SCHEMA model.num_heads', 'PlanningDataset: horizon',
                 'PlanningDataset: split_seed', 'PlanningDataset: device_resident'):
        assert name in kind_checks  # the annotation's check still runs
    assert _checked_twice(kind_checks, ('PDPPEMAHook: ', 'CEFITOEMAHook: ', 'SCHEMA model.',
                                        'PlanningDataset: ')) == []


@pytest.mark.parametrize('built, message', [
    (dict(type='PDPPEMAHook', decay=1.0), 'PDPPEMAHook: decay=1.0; expected'),
    (dict(type='CEFITOEMAHook', start_step=-1), 'CEFITOEMAHook: start_step=-1; expected'),
    (dict(type='CEFITOEMAHook', update_every=True), 'CEFITOEMAHook: update_every=True;'),
    (dict(type='PDPPEMAHook', start_step=15, interval=10), 'must be a positive multiple'),
])
def test_the_ema_hooks_still_refuse_bad_settings(built, message):
    from mmaction.registry import HOOKS
    with pytest.raises(ValueError, match=re.escape(message)):
        HOOKS.build(built)


def test_step_progress_can_stay_quiet_while_short():
    from vpn_plugin.progress import StepProgress
    now, lines = [0.0], []
    progress = StepProgress('search', 10, lines.append, unit='sequences', interval=5,
                            quiet=5, clock=lambda: now[0])
    for _ in range(4):  # 1 s per unit: nothing before 5 s
        now[0] += 1
        progress.update()
    assert lines == []
    now[0] += 1
    progress.update()  # 5 s: the first line, with its ETA
    assert lines == ['search: 5/10 sequences (50%), 0:00:05 elapsed, ETA 0:00:05']
    for _ in range(5):
        now[0] += 1
        progress.update()
    assert lines[-1] == 'search: 10/10 sequences (100%), 0:00:10 elapsed, ETA 0:00:00'
    assert len(lines) == 2  # 5 s, then 10 s (the interval and the last unit: one line)
    quick = []
    fast = StepProgress('search', 3, quick.append, quiet=5, clock=lambda: 0.0)
    fast.update(3)
    assert quick == []  # a search shorter than quiet says nothing, not even its end


@pytest.mark.parametrize('scorer', ['chunked', 'tree'])
def test_a_long_cefito_search_logs_its_progress_and_eta(monkeypatch, scorer):
    """Before: a CEFITO search='chunked' (or 'tree') batch of hours logged nothing until it
    ended (closing8); now a search longer than SEARCH_PROGRESS_SECONDS logs the (sample,
    sequence) pairs scored, elapsed and ETA, as the pre-stages do."""
    import torch
    from test_cefito import tiny_cefito
    from vpn_plugin.models import cefito
    model = tiny_cefito()  # A(c): 3, 3 and 2 actions at T=3
    lines = []
    monkeypatch.setattr(cefito, 'print_log', lambda text, **_: lines.append(text))
    start, goal, tasks = torch.randn(4, 12), torch.randn(4, 12), torch.tensor([0, 1, 2, 0])
    plans, _ = model.plan(start, goal, tasks, scorer=scorer, chunk_size=8)
    assert lines == []  # a short search stays silent (the default quiet time)
    monkeypatch.setattr(cefito, 'SEARCH_PROGRESS_SECONDS', 0.0)
    again, _ = model.plan(start, goal, tasks, scorer=scorer, chunk_size=8)
    assert torch.equal(plans, again)
    total = 2 * 3 ** 3 + 3 ** 3 + 2 ** 3  # 2 samples of task 0, one of tasks 1 and 2
    assert lines[0].startswith(f'CEFITO search ({scorer}, T=3): '
                               f'{8 if scorer == "chunked" else 54}/{total} sequences (')
    assert lines[-1].startswith(f'CEFITO search ({scorer}, T=3): {total}/{total} sequences '
                                '(100%), ') and lines[-1].endswith('ETA 0:00:00')
    counts = [int(line.split(': ')[1].split('/')[0]) for line in lines]
    assert counts == sorted(counts) and len(lines) > (2 if scorer == 'chunked' else 1)

"""Session 15, engineer fixnote: items the fifteenth hostile pass noticed (each test fails at
51a306c).

- An EMPTY (0 bytes) CEFITO text-feature cache was refused even with
  ``model.text_embeddings.allow_encode=True`` ("an unreadable text-feature cache
  (EOFError)"), while an edited one was encoded again with one warning: a damaged cache
  (empty, truncated, NaN, foreign) is now encoded again with one warning naming the file and
  what is wrong with it; with encoding off it is refused as before.
- ``--cfg-options model.pkg.recount=True`` (or ``=False``) was listed in test_metrics.json's
  ``changed_from_training`` (the whole ``model.pkg``) even when the recounted graph was the
  checkpoint's (same metrics): ``recount`` is no training option now (nor are PKGBuilder's
  defaults spelled out); PKGHook compares the recounted graph with the checkpoint's and names
  it only where they differ, with what differs.
- PDPP's ``plan_from_features`` drew x_T from torch's global stream, ``inference_planner`` and
  the test runner seed it by the window's sample index: another plan for the same window.
  ``plan_from_features(..., index=i)`` now gives the tested plan; both docstrings and the docs
  say so.
"""
from types import SimpleNamespace
from unittest import mock

import pytest
import torch


# ---------------------------------------------------------------------- damaged text cache
@pytest.mark.parametrize('content, what', [
    ('empty', r'an empty text-feature cache \(0 bytes'),
    ('truncated', r'an unreadable text-feature cache'),
    ('nan', r'holds NaN or infinite values')])
def test_a_damaged_text_cache_is_encoded_again_with_one_warning(tmp_path, content, what):
    from vpn_plugin.models import text_embeddings as te
    texts = ['a', 'b', 'c']
    cache = tmp_path / f"actions_{te.cache_key(te.DEFAULT_ENCODER, texts)}.pt"
    if content == 'empty':
        cache.write_bytes(b'')
    elif content == 'truncated':
        torch.save(torch.ones(3, 4), cache)
        cache.write_bytes(cache.read_bytes()[:100])
    else:
        torch.save(torch.full((3, 4), float('nan')), cache)
    with pytest.raises(ValueError, match=rf'{cache.name}: .*{what}.*delete it to encode'):
        te._cached_encoding(texts, 'actions', None, tmp_path, False, 'mean')
    encoded = torch.arange(12.).view(3, 4)
    with mock.patch.object(te, 'encode_texts', return_value=encoded) as encode, \
            mock.patch.object(te, 'print_log') as log:
        assert torch.equal(te._cached_encoding(texts, 'actions', None, tmp_path, True, 'mean'),
                           encoded)
    encode.assert_called_once()
    warnings = [c.args[0] for c in log.call_args_list if c.kwargs.get('level') == 30]
    assert len(warnings) == 1 and str(cache) in warnings[0], warnings
    assert __import__('re').search(what, warnings[0]) and 'encoded again' in warnings[0]
    # the rewritten cache is read as it is, without encoding or a warning
    with mock.patch.object(te, 'encode_texts') as encode, \
            mock.patch.object(te, 'print_log') as log:
        assert torch.equal(te._cached_encoding(texts, 'actions', None, tmp_path, False, 'mean'),
                           encoded)
    encode.assert_not_called()
    assert not log.call_args_list


# ---------------------------------------------------------------------- PDPP's seeded noise
class _Windows:
    """A dataset of 4 windows as PlanningDataset's items (inputs, data_samples with index)."""

    def __init__(self, start, goal):
        self.start, self.goal = start, goal

    def __len__(self):
        return len(self.start)

    def __getitem__(self, i):
        return {'inputs': {'start': self.start[i], 'goal': self.goal[i]},
                'data_samples': {'plan': torch.zeros(3, dtype=torch.long),
                                 'task': torch.tensor(0), 'index': torch.tensor(i)}}


def test_plan_from_features_gives_the_tested_plan_given_the_window_index():
    """Before: PDPP's ``inference_planner`` (as the test runner) seeded x_T by the window's
    sample index, ``plan_from_features`` drew it from torch's global stream: another plan for
    the same window, and no way to get the scored one (``index=`` was a TypeError)."""
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import MODELS
    from vpn_plugin.apis import inference_planner, plan_from_features
    torch.manual_seed(0)
    model = MODELS.build(dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=2, horizon=3,
                              dim=32, n_timesteps=20))
    model.diffusion.classifier_ready.fill_(True)
    model.set_pkg(torch.full((6, 6), 1 / 6, dtype=torch.float64))
    start = torch.randn(4, 8)
    goal = torch.randn(4, 8)
    windows = _Windows(start, goal)
    drawn = []  # x_T (B, T, C) of each call: the noise (the toy's scores barely depend on it)
    initial_noise = model.diffusion.initial_noise
    model.diffusion.initial_noise = lambda *a: drawn.append(initial_noise(*a)) or drawn[-1]
    tested = inference_planner(model, windows, [0, 1, 2, 3])
    one = plan_from_features(model, start[2], goal[2], index=2)[0]
    assert torch.equal(drawn[1][0], drawn[0][2])
    assert torch.equal(one.action_scores, tested[2].action_scores)
    batch = plan_from_features(model, start, goal, index=[0, 1, 2, 3])
    assert torch.equal(drawn[2], drawn[0])
    assert all(torch.equal(a.action_scores, b.action_scores) for a, b in zip(batch, tested))
    plan_from_features(model, start[2], goal[2])  # the global stream: another x_T
    assert not torch.equal(drawn[3][0], drawn[0][2])
    for bad in (-1, 1.5, [0, 1]):
        with pytest.raises(ValueError, match=r'index=.*; expected the dataset index'):
            plan_from_features(model, start[:3], goal[:3], index=bad)


# ---------------------------------------------------------------------- model.pkg.recount
class _Training:
    """A training split as PKGBuilder reads it: 6 actions, horizon 3, these sequences."""

    def __init__(self, sequences):
        self.taxonomy, self.horizon, self.sequences = SimpleNamespace(num_actions=6), 3, sequences

    def pkg_sequences(self, count_mode):
        return self.sequences


def _viterbi_pdpp(recount):
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import MODELS
    return MODELS.build(dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=2, horizon=3,
                             dim=32, n_timesteps=20, decode='viterbi',
                             pkg=dict(type='PKGBuilder', recount=recount)))


@pytest.mark.parametrize('recounted_on, added', [
    ([[0, 1, 2], [3, 4, 5]], None),
    ([[0, 1, 2], [3, 4, 5], [2, 0, 1]], "model.pkg.recount: the checkpoint's graph in training, "
                                        "recounted here: another graph than the checkpoint's: "
                                        "1 edge(s) added, 0 removed, largest probability "
                                        "change 1")])
def test_a_recount_is_named_only_where_it_counted_another_graph(recounted_on, added):
    from vpn_plugin.engine.checkpoint import model_option_differences
    from vpn_plugin.models.pkg_hook import PKGHook
    from mmengine.config import Config
    trained = _viterbi_pdpp(False)
    trained.build_pkg(_Training([[0, 1, 2], [3, 4, 5]]))
    tested = _viterbi_pdpp(True)
    tested.load_state_dict(trained.state_dict())
    assert not bool(tested.pkg_ready)
    other = 'model.decode_temperature: 1.0 in training, 2.0 here'
    runner = SimpleNamespace(model=tested, _train_dataloader=SimpleNamespace(
        dataset=_Training(recounted_on)), changed_from_training=[other])
    PKGHook.fill(runner)
    assert bool(tested.pkg_ready)
    if added is None:
        assert runner.changed_from_training == [other]
        assert torch.equal(tested.log_transitions, trained.log_transitions)
    else:
        assert runner.changed_from_training == [other, added]
    # the option itself is no training option (nor are PKGBuilder's defaults spelled out)
    text = Config(dict(model=dict(type='PDPP', pkg=dict(type='PKGBuilder')))).pretty_text
    assert model_option_differences(text, dict(type='PDPP', pkg=dict(
        type='PKGBuilder', smoothing=0.0, recount=True))) == []
    assert model_option_differences(text, dict(type='PDPP', pkg=dict(
        type='PKGBuilder', smoothing=1.0, recount=True)))[0].startswith('model.pkg: ')


def test_tools_test_with_a_recount_of_the_same_graph_names_no_change(tiny_crosstask, tmp_path):
    """The hostile pass's run: ``tools/test.py vpn ... epoch_1.pth --cfg-options
    model.pkg.recount=True`` wrote ``changed_from_training: ['model.pkg.recount: False in
    training, True here']`` beside the metrics of the unchanged test; a recount with
    ``smoothing=1`` is named with what differs."""
    import json
    import os
    from test_apis import tiny_vpn_config
    from tool_modules import load_tool
    os.environ.setdefault('LOCAL_RANK', '0')
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    load_tool('train').main([str(config), '--work-dir', str(tmp_path / 'run'), '--no-validate',
                             '--cfg-options', 'train_cfg.max_epochs=1'])

    def run_test(name, *options):
        out = tmp_path / f'{name}.json'
        load_tool('test').main([str(config), str(tmp_path / 'run' / 'epoch_1.pth'),
                                '--work-dir', str(tmp_path / name), '--out-metrics', str(out),
                                '--cfg-options', *options])
        return json.loads(out.read_text())

    plain = run_test('plain', 'model.pkg.recount=False')
    same = run_test('same', 'model.pkg.recount=True')
    assert 'changed_from_training' not in same, same
    assert same == plain
    assert 'changed_from_training' not in plain, plain  # before: the whole model.pkg named
    other = run_test('other', 'model.pkg.recount=True', 'model.pkg.smoothing=1.0')
    changed = other['changed_from_training']
    assert len(changed) == 2 and changed[0].startswith('model.pkg: '), changed
    assert changed[1].startswith("model.pkg.recount: the checkpoint's graph in training, "
                                 "recounted here: another graph than the checkpoint's: "), changed

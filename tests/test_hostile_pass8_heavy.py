"""Eighth hostile pass (issue 37, scope hostile16: PDPP / KEPP / CEFITO beyond the single-key
loops: contradicting options, pre-stage files, graphs, schedules; log /tmp/hostile16_log.md).
Each test is a case that was vague, silent or wrong before its fix (the docstring says what
happened on 69b959e)."""
import math
import os

import numpy as np
import pytest
import torch

from test_hostile_pass4_heavy import cefito_model_cfg  # noqa: F401  (a fixture)
from test_kepp import tiny_kepp
from tiny_configs import option_differences


# ---------------------------------------------------------------------- PDPP's lr schedule
def warmup_lr(**options):
    from mmaction.registry import PARAM_SCHEDULERS
    from vpn_plugin.engine import pdpp_training  # noqa: F401  (registers it)
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    return PARAM_SCHEDULERS.get('PDPPWarmupStepLR').build_iter_from_epoch(
        optimizer, epoch_length=4, **{'end': 1, **options})


@pytest.mark.parametrize('option, value', [
    ('total_steps', 1.5), ('total_steps', math.inf), ('total_steps', math.nan),
    ('total_steps', 'abc'), ('total_steps', True), ('total_steps', []),
    ('begin', -1), ('begin', 'abc'), ('begin', None), ('end', 'abc'), ('end', None),
    ('end', math.nan), ('by_epoch', 'abc')])
def test_the_pdpp_schedule_refuses_values_of_another_kind(option, value):
    """Before (``param_scheduler.0.<option>=<value>`` of a PDPP/KEPP config): total_steps=inf
    trained at lr 0 every step, exit 0; 1.5 / True a 1.5- / 1-step schedule; nan a NaN lr
    (the run stopped at a NaN loss naming no option); begin=-1 stretched the warm-up before
    the run; by_epoch='abc' read as True; 'abc', None, [] a TypeError or "invalid literal for
    int() with base 10: 'abcabcabcabc'"."""
    with pytest.raises(ValueError, match=rf'PDPPWarmupStepLR: {option}='):
        warmup_lr(**{option: value})


def test_the_pdpp_schedule_keeps_valid_settings():
    """No false alarm: the config's settings (end from the train loop), an explicit
    total_steps and mmengine's fractional epochs still build."""
    for options in ({}, dict(total_steps=10), dict(end=1.5), dict(begin=0.5, end=2)):
        assert warmup_lr(**options).total_steps >= 1


# ---------------------------------------------------------------------- PDPP's batch sampler
@pytest.mark.parametrize('option, value', [
    ('steps_per_epoch', 1.5), ('steps_per_epoch', 'abc'), ('steps_per_epoch', None),
    ('steps_per_epoch', True), ('drop_last', 'abc'), ('drop_last', 0), ('drop_last', None),
    ('drop_last', []), ('drop_last', math.nan)])
def test_the_steps_per_epoch_sampler_refuses_values_of_another_kind(option, value):
    """Before (``train_dataloader.batch_sampler.<option>``): drop_last 0 / None / [] read as
    False and 'abc' / nan as True, steps_per_epoch=True as 1 step, all without a word; 1.5,
    'abc' and None TypeErrors naming no option."""
    from mmengine.dataset import DefaultSampler
    from vpn_plugin.engine.pdpp_training import StepsPerEpochBatchSampler
    options = {**dict(batch_size=4, steps_per_epoch=3, drop_last=True), option: value}
    with pytest.raises(ValueError, match=rf'StepsPerEpochBatchSampler: {option}='):
        StepsPerEpochBatchSampler(DefaultSampler(list(range(20)), seed=0), **options)
    assert len(StepsPerEpochBatchSampler(DefaultSampler(list(range(20)), seed=0), 4, 3)) == 3


# ---------------------------------------------------------------------- pre-stage files
@pytest.mark.parametrize('content, reason', [
    (bytes(range(236, 256)) * 4, r'UnpicklingError: '),
    (b'', r'an empty or unreadable file'),
], ids=['random-bytes', 'empty'])
def test_an_unreadable_pre_stage_file_is_named_without_torchs_unsafe_advice(
        tmp_path, content, reason):
    """Before: random bytes as <work_dir>/task_classifier.pth were refused with torch's
    8-line text ("Re-running torch.load with weights_only set to False will likely succeed
    ... Please file an issue"), advice to unpickle a foreign file; an empty one with "()"."""
    from vpn_plugin.engine.pdpp_training import load_classifiers
    path = tmp_path / 'task_classifier.pth'
    path.write_bytes(content)
    with pytest.raises(ValueError) as err:
        load_classifiers(path, {}, {})
    assert str(err.value).startswith(f'{path}: not a task classifier saved by '
                                     'TaskClassifierHook (')
    assert 'weights_only' not in str(err.value) and 'file an issue' not in str(err.value)
    assert __import__('re').search(reason, str(err.value)) and '()' not in str(err.value)


def test_a_pre_stage_file_of_another_kind_is_named(tmp_path):
    """Before: a task_classifier.pth holding a tensor failed with AttributeError "'Tensor'
    object has no attribute 'get'", naming no file."""
    from vpn_plugin.engine.pdpp_training import load_classifiers
    path = tmp_path / 'task_classifier.pth'
    torch.save(torch.zeros(3), path)
    with pytest.raises(ValueError, match=r'task_classifier.pth: not a task classifier saved by '
                                         r"TaskClassifierHook: it holds a Tensor, without "
                                         r"\['state_dicts'\]"):
        load_classifiers(path, {}, {})


# ---------------------------------------------------------------------- KEPP's graph options
@pytest.mark.parametrize('pkg, match', [
    (dict(smoothing=0.5), r'model.pkg.smoothing=0.5; .* expected 0'),
    (dict(smoothing=1e-9), r'model.pkg.smoothing=1e-09'),
    (dict(union='mean', extra_datasets=[dict(type='PlanningDataset')]),
     r"union='mean' with extra_datasets"),
])
def test_kepp_refuses_graph_options_its_graph_ignores(pkg, match):
    """Before: KEPP built the same graph (max difference 0.0) with smoothing 0.5 as without,
    its log line saying "smoothing=0.5"; union='mean' pooled the extra datasets' videos while
    the line said "(mean)"."""
    with pytest.raises(ValueError, match=match):
        tiny_kepp(pkg=pkg)
    tiny_kepp(pkg=dict(smoothing=0.0, perturbations=[dict(type='DataFraction', fraction=0.5)]))


def test_kepp_refuses_pkg_perturbations_beside_a_released_graph(tmp_path):
    """Before: model.released_graph with model.pkg.perturbations=[DataFraction(0.5)] used the
    released file as it is, the perturbation ignored without a word."""
    with pytest.raises(ValueError, match=r'released_graph=.* with model.pkg.perturbations: '
                                         r'the released graph file is used as it is'):
        tiny_kepp(horizon=4, released_graph=str(tmp_path / 'graph.pkl'),
                  pkg=dict(perturbations=[dict(type='DataFraction', fraction=0.5)]))


# ---------------------------------------------------------------------- KEPP's step model file
@pytest.mark.parametrize('endpoints', [
    torch.full((4, 2), -1), torch.full((4, 2), 999), torch.full((4, 2), 2.0),
    torch.zeros(4, 3, dtype=torch.long)], ids=['minus-one', 'beyond-N', 'float', 'shape'])
def test_edited_endpoints_of_a_step_model_file_are_refused(tmp_path, endpoints):
    """Before: kepp_step_model.pth with its endpoints edited to -1 was reused and the plan model
    trained on the fallback paths [-1, -1, -1] (the last action by wrap-around), exit 0;
    999 failed with "index 999 is out of bounds for axis 2 with size 48"."""
    from vpn_plugin.engine.kepp_training import KEPPStepModelHook
    model = tiny_kepp(num_actions=6)
    saved = dict(endpoints=endpoints, settings=dict(sampling_seed=model.step.sampling_seed))
    path = tmp_path / 'kepp_step_model.pth'
    with pytest.raises(ValueError, match=r'kepp_step_model.pth: endpoints .* expected integer '
                                         r'action ids in 0..5 of shape \(4, 2\)'):
        KEPPStepModelHook().endpoints(None, model, [None] * 4, saved, path)
    kept = KEPPStepModelHook().endpoints(None, model, [None] * 4, dict(
        saved, endpoints=torch.full((4, 2), 5)), path)
    assert kept.tolist() == [[5, 5]] * 4


# ---------------------------------------------------------------------- official comparison
def test_an_out_folder_inside_the_official_checkout_is_refused_before_writing(tmp_path):
    """Before: ``compare_official_training.py --method kepp --official-dir KEPP --out
    KEPP/sub`` wrote synthetic features into the checkout, then copied the checkout into
    KEPP/sub/official_copy, which copied itself until the path was too long (106 MB of
    official_copy/sub/official_copy/... left in the checkout), and failed with a list of
    paths."""
    from official_stand_ins import kepp_stand_in, tool_error
    checkout = kepp_stand_in(tmp_path)
    before = sorted(p.relative_to(checkout) for p in checkout.rglob('*'))
    message = tool_error('--method', 'kepp', '--official-dir', checkout, '--epochs', 5,
                         '--horizon', 4, '--out', checkout / 'sub')
    assert f'--out {checkout / "sub"} is inside --official-dir {checkout}' in message
    assert sorted(p.relative_to(checkout) for p in checkout.rglob('*')) == before


# ---------------------------------------------------------------------- --cfg-options dict(...)
@pytest.mark.parametrize('item', [
    "model.pkg.perturbations=[dict(type='DataFraction',fraction=0.5)]",
    "custom_hooks=[dict(type='PKGHook'),dict(type='TaskClassifierHook')]"])
def test_a_dict_call_in_cfg_options_is_refused_naming_it(capsys, item):
    """Before: tools/train.py cefito ... --cfg-options "model.pkg.perturbations=[dict(...)]"
    ended in a RecursionError traceback inside mmengine's parser; "custom_hooks=[dict(...),
    ...]" became the strings "dict(type='PKGHook')", and tools/test.py failed with
    AttributeError "'str' object has no attribute 'get'"."""
    import argparse
    from vpn_plugin.data_paths import add_cfg_options
    parser = argparse.ArgumentParser()
    add_cfg_options(parser, 'overrides')
    with pytest.raises(SystemExit):
        parser.parse_args(['--cfg-options', item])
    assert 'not dict(...): set the keys one by one' in capsys.readouterr().err
    assert parser.parse_args(['--cfg-options', 'model.dim_mults=[1,2]']).cfg_options == {
        'model.dim_mults': [1, 2]}


# ---------------------------------------------------------------------- test.py on a pre-stage file
@pytest.mark.parametrize('name, what', [
    ('task_classifier.pth', 'the task classifier'), ('kepp_step_model.pth', "KEPP's step model")])
def test_a_pre_stage_file_given_as_checkpoint_is_named(tmp_path, name, what):
    """Before: ``tools/test.py pdpp_niv_t3.py <work_dir>/task_classifier.pth`` failed with
    "error: state_dict" (a KeyError in mmengine's EMA hook); kepp_step_model.pth with a list
    of 328 missing keys. (The runner calls this check first in ``load_checkpoint``; checked
    by hand with tools/test.py.)"""
    from vpn_plugin.runner import check_not_pre_stage
    saved = dict(identity=dict(horizon=3), settings={}, state_dicts={})
    with pytest.raises(ValueError, match=rf'{name} is a pre-stage file, {what} .*, not a '
                                         r'checkpoint of a run: give an epoch_<n>.pth'):
        check_not_pre_stage(saved, str(tmp_path / name))
    check_not_pre_stage(dict(meta={}, state_dict={}, identity=None), 'epoch_1.pth')


# ---------------------------------------------------------------------- --resume with other options
RUN_CFG = """model = dict(type='PDPP', n_timesteps=50, text=dict(cache_dir='/a/cache', pooling='mean'),
             taxonomy='/a/niv/taxonomy.json')
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=0.0003, weight_decay=0.0))
custom_hooks = [dict(type='PKGHook'), dict(type='TaskClassifierHook', lr=0.0001),
                dict(type='PDPPEMAHook', decay=0.995, start_step=400, interval=10)]
"""


def test_a_resume_names_the_options_it_cannot_honour():
    """Before: ``tools/train.py pdpp_niv_t3.py --resume --cfg-options
    optim_wrapper.optimizer.lr=1e-3`` trained on at the run's lr 3e-4 (mmengine restores the
    optimiser state; the same lr 7.5e-5 at epoch 3 as the unchanged resume), exit 0 without a
    word; ``model.n_timesteps=20`` failed with a traceback loading the EMA's state dict. The
    runner now refuses with this list (checked by hand: R2n/R3n in the log)."""
    assert option_differences(RUN_CFG, 'resume') == ([], [])
    moved = RUN_CFG.replace('/a/', '/b/')  # data and caches moved
    assert option_differences(RUN_CFG, 'resume', moved) == ([], [])
    changed = RUN_CFG.replace('lr=0.0003', 'lr=0.001').replace('n_timesteps=50', 'n_timesteps=20')
    assert option_differences(RUN_CFG, 'resume', changed).refused == [
        'model.n_timesteps: 50 in the run, 20 here',
        'optim_wrapper.optimizer.lr: 0.0003 in the run, 0.001 here']


def test_a_resume_names_a_changed_ema_decay():
    """Before: ``--resume --cfg-options custom_hooks.2.decay=0.9`` (PDPPEMAHook) went on
    averaging with decay 0.9 after 0.995, exit 0 without a word (epoch 3's metrics differed
    from the unchanged resume). The classifier's lr (its head comes from the checkpoint) is
    not an EMA option and is not named."""
    changed = RUN_CFG.replace('decay=0.995', 'decay=0.9').replace('lr=0.0001', 'lr=0.0002')
    assert option_differences(RUN_CFG, 'resume', changed).refused == [
        'custom_hooks.PDPPEMAHook.decay: 0.995 in the run, 0.9 here']


# ---------------------------------------------------------------------- CEFITO's text cache
@pytest.mark.parametrize('content, match', [
    ('nan', 'holds NaN or infinite values'), ('short', r'holds torch.float32 \(2, 4\); expected '
                                                      r'a float tensor \(3, D\)'),
    ('dict', 'holds a dict'), ('truncated', 'an unreadable text-feature cache')])
def test_an_edited_text_feature_cache_is_refused_naming_it(tmp_path, content, match):
    """Before: CEFITO's stand-in text features read from an edited cache file
    (model.text_embeddings.cache_dir) as they were: a NaN entry stopped training at a NaN loss
    at iteration 1, blaming "a NaN or negative loss weight, a learning rate so large ..."; a
    short, dict or truncated cache failed later or as torch's error."""
    from vpn_plugin.models.text_embeddings import (DEFAULT_ENCODER, _cached_encoding, _write_cache,
                                                   cache_key)
    texts = ['a', 'b', 'c']
    cache = tmp_path / f"actions_{cache_key(DEFAULT_ENCODER, texts)}.pt"
    good = torch.ones(3, 4)
    value = {'nan': good.clone().fill_(math.nan), 'short': torch.ones(2, 4), 'dict': {'a': 1}}
    if content == 'truncated':
        torch.save(good, cache)
        cache.write_bytes(cache.read_bytes()[:100])
    else:
        torch.save(value[content], cache)
    names = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ValueError, match=match):
        _cached_encoding(texts, 'actions', None, tmp_path, False, 'mean')
    _write_cache(cache, good)  # as an encoding writes it: signed with the folder's key
    names = sorted(p.name for p in tmp_path.iterdir())
    assert torch.equal(_cached_encoding(texts, 'actions', None, tmp_path, False, 'mean'), good)
    assert sorted(p.name for p in tmp_path.iterdir()) == names


# ---------------------------------------------------------------------- features regenerated in place
def test_a_pre_stage_of_features_regenerated_in_place_is_refused(tmp_path):
    """Before: tools/train.py pdpp ... --feature-dir F trained and saved task_classifier.pth;
    make_synthetic_features.py --out F --seed 1 --overwrite rewrote the features in the same
    folder; tools/train.py --overwrite in that work dir reused the classifier trained on the
    old features ("reused ... (not retrained)"), exit 0: the file recorded the folder's path
    only. A file saved before the fingerprint was recorded is still reused."""
    import numpy as np
    from vpn_plugin.engine.pre_stage import DATA_KEYS, check_identity, data_identity
    features = tmp_path / 'features'
    features.mkdir()
    np.savez(features / 'v1.npz', frames=np.zeros((4, 2), np.float32))

    class Dataset:
        feature_dir, windows = str(features), []

    saved = data_identity(Dataset, horizon=3)
    check_identity('task_classifier.pth', 'a task classifier', saved, data_identity(
        Dataset, horizon=3), DATA_KEYS)
    np.savez(features / 'v1.npz', frames=np.ones((5, 2), np.float32))  # regenerated
    with pytest.raises(ValueError, match=r'features_fingerprint=.*, but this run is .*'
                                         r'features_fingerprint='):
        check_identity('task_classifier.pth', 'a task classifier', saved,
                       data_identity(Dataset, horizon=3), DATA_KEYS)
    older = {k: v for k, v in saved.items() if k != 'features_fingerprint'}
    check_identity('task_classifier.pth', 'a task classifier', older,
                   data_identity(Dataset, horizon=3), DATA_KEYS)


# ---------------------------------------------------------------------- CEFITO's negatives
def test_cefito_refuses_a_negative_seed_the_global_stream_ignores(cefito_model_cfg):
    """Before: model.negative_rng='global' with model.negative_seed=3 built and trained; the
    global stream follows the run's seed, so negative_seed was ignored without a word."""
    from mmaction.registry import MODELS
    with pytest.raises(ValueError, match=r"negative_seed=3 with negative_rng='global'"):
        MODELS.build(dict(cefito_model_cfg, negative_rng='global', negative_seed=3))
    MODELS.build(dict(cefito_model_cfg, negative_rng='global'))
    MODELS.build(dict(cefito_model_cfg, negative_rng='per_sample', negative_seed=3))


def test_a_zero_padded_text_feature_file_is_not_called_clip(tmp_path):
    """Before: model.text_embeddings.file=<(48, 384) .npy> with pad_to=512 trained and logged
    "text features: CLIP text features" (results rows unmarked): a padded file is narrower
    than the paper's 512-d CLIP features, so it is a stand-in."""
    from vpn_plugin.models.text_embeddings import load_action_features, stand_in_label
    label = stand_in_label(dict(file='/x/minilm_actions.npy', pad_to=512, taxonomy=None), 384)
    assert label == "file minilm_actions.npy zero-padded to 512-d, not the paper's CLIP"
    assert stand_in_label(dict(file='/x/clip_actions.npy', pad_to=None)) is None
    narrow, full = tmp_path / 'minilm.npy', tmp_path / 'clip.npy'
    np.save(narrow, np.ones((4, 384), np.float32))
    np.save(full, np.ones((4, 512), np.float32))
    assert stand_in_label(dict(file=str(narrow), pad_to=512)).startswith('file minilm.npy zero')
    # a file already 512 wide is not padded: CLIP's kind, no cry of wolf
    assert stand_in_label(dict(file=str(full), pad_to=512)) is None
    assert load_action_features(file=str(full), pad_to=512).shape == (4, 512)

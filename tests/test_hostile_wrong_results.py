"""Exit-0 wrong results of issue 37 (items 3-5): a stale or edited observation cache, a
checkpoint that carries nothing to check it by, text features swapped at test time."""
import json
import logging
import os

import numpy as np
import pytest

from test_datasets import frames_for, toy_dataset, write_toy


# ------------------------------------------------------------------ item 3: observation cache
def rewrite_keeping_size_and_mtime(path, frames) -> None:
    """What `cp -p`, `rsync -a` or `touch -r` leave: new content, same size, old mtime."""
    stat = os.stat(path)
    np.savez(path, frames_features=frames)
    assert os.stat(path).st_size == stat.st_size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def warnings_of(monkeypatch) -> list:
    import vpn_plugin.datasets.planning_dataset as module
    logged = []
    monkeypatch.setattr(module, 'print_log', lambda message, logger=None, level=logging.INFO:
                        logged.append(message) if level == logging.WARNING else None)
    return logged


def test_a_feature_file_rewritten_with_its_size_and_mtime_kept_misses_the_cache(tmp_path):
    """Today the cache key is (path, size, mtime_ns): the old observations are served."""
    write_toy(tmp_path)
    cached = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    rewrite_keeping_size_and_mtime(tmp_path / 'feat/11_a1.npz', -frames_for(20))
    again = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    fresh = toy_dataset(tmp_path)  # no cache: read from the files
    np.testing.assert_array_equal(again.start, fresh.start)
    np.testing.assert_array_equal(again.goal, fresh.goal)
    assert not np.array_equal(again.start, cached.start)


def test_an_edited_observation_cache_is_discarded_and_rebuilt(tmp_path, monkeypatch):
    """Today a cache file edited with the same shapes (start and goal swapped) is used as is."""
    write_toy(tmp_path)
    first = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    [cache] = (tmp_path / 'cache').glob('obs_*.npz')
    with np.load(cache) as data:
        arrays = {name: data[name] for name in data.files}
    arrays['start'], arrays['goal'] = arrays['goal'], arrays['start']
    np.savez(cache, **arrays)
    logged = warnings_of(monkeypatch)
    again = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    assert any(f'observation cache {cache} is corrupt' in m and 'digest' in m for m in logged)
    np.testing.assert_array_equal(again.start, first.start)
    np.testing.assert_array_equal(again.goal, first.goal)
    other = tmp_path / 'cache' / 'obs_00000000000000000000.npz'  # a cache file copied over
    cache.rename(other)                                      # another's name: another key
    toy_dataset(tmp_path, cache_dir=tmp_path / 'cache', window_policy='authors')
    [built] = set((tmp_path / 'cache').glob('obs_*.npz')) - {other, cache}
    other.unlink()
    built.rename(cache)
    toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    assert any('its key differs' in m for m in logged)


def test_unchanged_feature_files_are_not_read_again_to_find_the_cache(tmp_path, monkeypatch):
    """The content key costs one hash per changed file (the digest memo), not one per start."""
    write_toy(tmp_path)
    first = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    memo = json.loads((tmp_path / 'cache' / 'feature_digests.json').read_text())
    assert len(memo) == 3  # the videos of T=3 windows (b2 has 2 steps)
    import vpn_plugin.datasets.file_digests as digests
    import vpn_plugin.datasets.planning_dataset as module

    def no_reading(*args, **kwargs):
        raise AssertionError('a file was read although nothing changed')
    monkeypatch.setattr(digests, 'sha256_of', no_reading)
    monkeypatch.setattr(module, 'load_features', no_reading)
    np.testing.assert_array_equal(toy_dataset(tmp_path, cache_dir=tmp_path / 'cache').start,
                                  first.start)
    os.utime(tmp_path / 'feat/22_b1.npz')  # touched: its ctime changes, it is hashed again
    with pytest.raises(AssertionError, match='although nothing changed'):
        toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')


# ---------------------------------------------- items 4-5: what a checkpoint records
REPO = __import__('pathlib').Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def trained_vpn(tiny_crosstask, shared_data, tmp_path_factory):
    """(config, checkpoint) of one epoch of ViterbiPlanNet on the tiny CrossTask, trained by
    tools/train.py (the checkpoint records what PlanningRunner records)."""
    import torch
    from tool_modules import load_tool
    folder = tmp_path_factory.mktemp('trained_vpn')
    config = folder / 'vpn_tiny.py'
    splits = ''.join(f"{split}_dataloader = dict(batch_size=64, dataset=dict(_delete_=True, "
                     f"**{dict(tiny_crosstask[f'{split}_dataset'], observation='mean3')!r}))\n"
                     for split in ('train', 'val', 'test'))
    config.write_text(f"_base_ = [{str(REPO / 'configs/vpn_crosstask_t3.py')!r}]\n" + splits
                      + "model = dict(feature_dim=512)\ntrain_cfg = dict(max_epochs=1, "
                      "val_interval=1)\n")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        load_tool('train').main([str(config), '--work-dir', str(folder / 'work')])
    finally:
        torch.set_num_threads(threads)
    return config, folder / 'work' / 'epoch_1.pth'


def stripped(checkpoint, folder, how: str):
    """The checkpoint with what it records removed, as a hostile user hands it over."""
    import torch
    import vpn_plugin.compat
    with torch.serialization.safe_globals(vpn_plugin.compat.mmengine_checkpoint_globals()):
        saved = torch.load(checkpoint, map_location='cpu', weights_only=True)
    state = saved['state_dict']
    meta = dict(saved['meta'])
    if how == 'bare state dict':
        content = state
    elif how == 'no meta':
        content = {'state_dict': state}
    elif how == 'no dataset_meta':
        content = {'state_dict': state, 'meta': {k: v for k, v in meta.items()
                                                 if k != 'dataset_meta'}}
    elif how == 'no action names':
        content = {'state_dict': state, 'meta': dict(meta, dataset_meta={
            k: v for k, v in meta['dataset_meta'].items() if k != 'action_names'})}
    else:  # 'no text features'
        content = {'state_dict': state, 'meta': {k: v for k, v in meta.items()
                                                 if k != 'text_features'}}
    path = folder / f"{how.replace(' ', '_')}.pth"
    torch.save(content, path)
    return path


def tool_error(tool, argv) -> str:
    from tool_modules import load_tool
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([str(a) for a in argv])
    return str(stopped.value.code)


STRIPPED = ('bare state dict', 'no meta', 'no dataset_meta', 'no action names',
            'no text features')


def test_a_checkpoint_that_records_nothing_is_refused_by_test_plan_and_init_planner(
        trained_vpn, tmp_path, monkeypatch):
    """Today a bare state dict (or one without meta / meta.dataset_meta) of another taxonomy is
    scored without a word (issue 37: SR 0.00 where the right model gets 57.14)."""
    from vpn_plugin.apis import init_planner
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    config, checkpoint = trained_vpn
    init_planner(str(config), str(checkpoint))  # what training saved: checked, loads
    for how in STRIPPED:
        bad = stripped(checkpoint, tmp_path, how)
        metrics = tmp_path / f'{how}.json'
        message = tool_error('test', [config, bad, '--work-dir', tmp_path / 'w',
                                      '--out-metrics', metrics])
        assert f'checkpoint {bad} records no ' in message and 'unchecked_checkpoint=True' in \
            message, (how, message)
        assert not metrics.exists()
        with pytest.raises(ValueError, match='records no meta'):
            init_planner(str(config), str(bad))
        assert 'records no meta' in tool_error('plan', [config, bad, '--indices', '0'])


def test_mmaction2s_own_test_tool_refuses_it_too(trained_vpn, tmp_path, monkeypatch):
    """MMAction2's tools/test.py builds the config's PlanningRunner: the same loader."""
    import runpy
    import sys
    from test_data_paths import mmaction2_tool
    from vpn_plugin.engine.checkpoint import CheckpointMismatchError
    config, checkpoint = trained_vpn
    bare = stripped(checkpoint, tmp_path, 'no dataset_meta')
    monkeypatch.setattr(sys, 'argv', ['test.py', str(config), str(bare), '--work-dir',
                                      str(tmp_path / 'wd')])
    with pytest.raises(CheckpointMismatchError, match='records no meta.dataset_meta'):
        runpy.run_path(str(mmaction2_tool('test')), run_name='__main__')


def test_unchecked_checkpoint_scores_it_and_says_so(trained_vpn, tmp_path, capsys):
    from tool_modules import load_tool
    from vpn_plugin.apis import init_planner
    config, checkpoint = trained_vpn
    bare = stripped(checkpoint, tmp_path, 'bare state dict')
    metrics = tmp_path / 'metrics.json'
    load_tool('test').main([str(config), str(bare), '--work-dir', str(tmp_path / 'w'),
                            '--out-metrics', str(metrics), '--cfg-options',
                            'unchecked_checkpoint=True'])
    assert json.loads(metrics.read_text())['checkpoint/unchecked'] == 1.0
    load_tool('test').main([str(config), str(checkpoint), '--work-dir', str(tmp_path / 'w'),
                            '--out-metrics', str(metrics), '--cfg-options',
                            'unchecked_checkpoint=True'])
    assert 'checkpoint/unchecked' not in json.loads(metrics.read_text())  # it was checked
    model = init_planner(str(config), str(bare), unchecked=True)
    assert model.unchecked_checkpoint == ['meta']
    load_tool('plan').main([str(config), str(bare), '--indices', '0', '--cfg-options',
                            'unchecked_checkpoint=True'])
    assert f'*** UNCHECKED checkpoint {bare}: it records no meta' in capsys.readouterr().out


def test_the_protocol_marks_rows_of_an_unchecked_run():
    from vpn_plugin.protocol.runner import config_variant
    config = str(REPO / 'configs/vpn_crosstask_t3.py')
    assert 'unchecked_checkpoint' not in config_variant(config, {})
    assert config_variant(config, {'unchecked_checkpoint': True})['unchecked_checkpoint'] is True


def swapped_rows(source, path):
    """The same text features with two actions' rows swapped (same shape, same statistics)."""
    array = np.load(source)
    array[[0, 1]] = array[[1, 0]]
    np.save(path, array)
    return path


def test_text_features_swapped_at_test_time_are_refused(trained_vpn, tmp_path, shared_data,
                                                        monkeypatch):
    """Today `--cfg-options model.text_embeddings.file=OTHER` is scored and logged as "CLIP text
    features". The same features at another path are fine."""
    import shutil
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    config, checkpoint = trained_vpn
    original = shared_data / 'crosstask/state_features_clip_133.npy'
    other = swapped_rows(original, tmp_path / 'other.npy')
    message = tool_error('test', [config, checkpoint, '--work-dir', tmp_path / 'w',
                                  '--cfg-options', f'model.text_embeddings.file={other}'])
    assert 'was trained for another setting than the config: text features: trained with ' \
           f'CLIP text features from file {original}' in message
    assert f'the config gives CLIP text features from file {other}' in message
    moved = shutil.copy(original, tmp_path / 'moved.npy')
    from tool_modules import load_tool
    load_tool('test').main([str(config), str(checkpoint), '--work-dir', str(tmp_path / 'w'),
                            '--cfg-options', f'model.text_embeddings.file={moved}'])


def small_planners(tmp_path) -> dict:
    """name -> (model config with text features from a file, its text-feature file)."""
    import torch
    rng = np.random.default_rng(0)
    state = tmp_path / 'state.npy'
    np.save(state, rng.normal(size=(6, 6, 6)).astype(np.float32))
    actions = tmp_path / 'actions.npy'
    np.save(actions, rng.normal(size=(7, 16)).astype(np.float32))
    return {
        'ViterbiPlanNet': (dict(type='ViterbiPlanNet', num_actions=6, num_tasks=2, horizon=3,
                                feature_dim=8, text_dim=6, embed_dim=8,
                                text_embeddings=dict(file=str(state))), state),
        'SCHEMA': (dict(type='SCHEMA', num_actions=6, num_tasks=2, horizon=3, feature_dim=8,
                        text_dim=6, embed_dim=8, num_heads=2,
                        text_embeddings=dict(file=str(state))), state),
        'CEFITO': (dict(type='CEFITO', feature_dim=12, num_actions=7, num_tasks=3, horizon=3,
                        taxonomy={0: (0, 1, 2), 1: (5, 3, 4), 2: (6, 2)}, text_dim=16,
                        hidden_dim=12, depth=2, num_heads=2, num_negatives=4,
                        text_embeddings=dict(file=str(actions))), actions),
    }


@pytest.mark.parametrize('name', ['ViterbiPlanNet', 'SCHEMA', 'CEFITO'])
def test_every_method_with_text_features_refuses_other_ones(name, tmp_path):
    from mmaction.registry import MODELS
    from vpn_plugin.engine.checkpoint import (CheckpointMismatchError, load_weights,
                                              recorded_setting)
    cfg, features = small_planners(tmp_path)[name]
    model = MODELS.build(cfg)
    checkpoint = {'state_dict': model.state_dict(), 'meta': recorded_setting(model, None)}
    assert checkpoint['meta']['text_features']['kind'] == 'CLIP text features'
    swapped = MODELS.build(dict(cfg, text_embeddings=dict(
        file=str(swapped_rows(features, tmp_path / 'swapped.npy')))))
    with pytest.raises(CheckpointMismatchError, match=r'text features: trained with CLIP text '
                       r'features from file .*(state|actions)\.npy .*the config gives CLIP '
                       r'text features from file .*swapped\.npy'):
        load_weights(swapped, checkpoint, 'c.pth')
    load_weights(MODELS.build(cfg), checkpoint, 'c.pth')  # the same features: fine
    load_weights(swapped, checkpoint, 'c.pth', partial=True)  # fine-tuning: an opt-in


def test_the_protocol_marks_rows_of_a_cefito_without_text_features():
    """Before: CEFITO configured with text_embeddings=None trained on zero text features with a
    log WARNING only; its rows looked like the paper's CEFITO."""
    from vpn_plugin.protocol.runner import config_variant
    config = str(REPO / 'configs/baselines/cefito_crosstask_t3.py')
    clip_file = {'model.text_embeddings': dict(file='clip_action_names.npy')}
    assert 'text_features' not in config_variant(config, clip_file)
    assert config_variant(config, {'model.text_embeddings': None})['text_features'] == \
        'none given (zeros)'
    vpn = str(REPO / 'configs/vpn_crosstask_t3.py')  # its text features are optional
    assert 'text_features' not in config_variant(vpn, {'model.text_embeddings': None})

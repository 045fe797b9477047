"""Checkpoints as a hostile user hands them over (issue 25, items 1, 8, 9): a checkpoint that
does not fit the config stops the run naming the keys and shapes; a failed save leaves no
partial checkpoint; the authors' converter reads their plain .npy transition matrix."""
import errno
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import MODELS
from vpn_plugin.apis import init_planner
from vpn_plugin.data_paths import load_config
from reference_fixtures import reference_dir
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def tiny_vpn_config(tiny_crosstask, tmp_path_factory) -> Path:
    """configs/vpn_crosstask_t3.py (ViterbiPlanNet, T=3, N=133) on the tiny CrossTask subset."""
    config = tmp_path_factory.mktemp('vpn_cfg') / 'vpn_tiny.py'
    splits = ''.join(f"{split}_dataloader = dict(batch_size=64, dataset=dict(_delete_=True, "
                     f"**{tiny_crosstask[f'{split}_dataset']!r}))\n"
                     for split in ('train', 'val', 'test'))
    config.write_text(f"_base_ = [{str(REPO / 'configs/vpn_crosstask_t3.py')!r}]\n" + splits)
    return config


def saved_model(model, path: Path, seed: int = 0, data_meta=None, record=True) -> Path:
    """``model`` with a filled (random, row-stochastic) PKG saved as an mmengine checkpoint
    that records what training records (``data_meta``: default, the tiny CrossTask's; not
    ``record``: nothing, a bare state dict whose tensors alone must be refused)."""
    from vpn_plugin.engine.checkpoint import recorded_setting
    rng = np.random.default_rng(seed)
    pkg = rng.random((model.num_actions, model.num_actions))
    model.set_pkg(pkg / pkg.sum(1, keepdims=True))
    meta = recorded_setting(model, data_meta or tiny_meta(model.num_actions)) if record else {}
    torch.save({'state_dict': model.state_dict(), 'meta': meta}, path)
    return path


def tiny_meta(num_actions: int) -> dict:
    """The metainfo of CrossTask's taxonomy (133 actions) or NIV's (48), 1536-d observations."""
    from vpn_plugin.datasets.planning_dataset import dataset_metainfo
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    from conftest import SHARED_DATA
    taxonomy = {133: 'crosstask/taxonomy_133.json', 48: 'niv/taxonomy.json'}[num_actions]
    return dataset_metainfo(load_taxonomy(SHARED_DATA / taxonomy), 3, 1536)


def build_model(config, **options):
    cfg = load_config(str(config), horizon=options.pop('horizon', None))
    cfg.model.update(options)
    return MODELS.build(cfg.model)


def other_checkpoints(config, tmp_path) -> dict:
    """name -> (checkpoint that does not fit ``config``, what the error must name)."""
    toy = tmp_path / 'unrelated.pth'
    torch.save({'state_dict': {'backbone.weight': torch.zeros(2, 2)}}, toy)
    compact = MODELS.build(dict(type='CompactPlanNet', feature_dim=1536, num_actions=133,
                                num_tasks=18, horizon=3, loss_weights=dict(align=0.0)))
    no_pkg = build_model(config)
    state = no_pkg.state_dict()
    del state['log_transitions'], state['pkg_ready']
    torch.save({'state_dict': state}, tmp_path / 'no_pkg.pth')
    return {
        'other horizon': (saved_model(build_model(config, horizon=4), tmp_path / 't4.pth',
                                      record=False),
                          [r'emission_head\.\S+: \(532, 256\) in the checkpoint, \(399, 256\)']),
        'other actions': (saved_model(build_model(REPO / 'configs/vpn_niv_t3.py'),
                                      tmp_path / 'niv.pth', record=False),
                          [r'log_transitions: \(48, 48\) in the checkpoint, \(133, 133\)']),
        'unrelated keys': (toy, [r'missing .*log_transitions', r'unexpected .*backbone\.weight']),
        'CompactPlanNet': (saved_model(compact, tmp_path / 'compact.pth'), [r'missing', r'unexpected']),
        'no PKG buffer': (tmp_path / 'no_pkg.pth', [r'missing .*log_transitions']),
    }


TOOL_CASES = ('other horizon', 'CompactPlanNet')  # through tools/test.py; the rest directly


def test_test_py_refuses_a_checkpoint_that_does_not_fit_the_config(tiny_vpn_config, tmp_path,
                                                                  monkeypatch):
    """Today mmengine loads non-strictly, warns, and test.py scores what is left (exit 0)."""
    from vpn_plugin.engine.checkpoint import load_weights, read_checkpoint
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    test = load_tool('test')
    model = build_model(tiny_vpn_config)
    for name, (checkpoint, expected) in other_checkpoints(tiny_vpn_config, tmp_path).items():
        metrics = tmp_path / f'{name}.json'
        if name in TOOL_CASES:
            with pytest.raises(SystemExit) as stopped:
                test.main([str(tiny_vpn_config), str(checkpoint), '--work-dir',
                           str(tmp_path / 'w'), '--out-metrics', str(metrics)])
            message = str(stopped.value.code)
        else:
            with pytest.raises(ValueError) as stopped:
                load_weights(model, read_checkpoint(checkpoint), str(checkpoint))
            message = 'error: ' + str(stopped.value)
        assert message.startswith('error: checkpoint ') and str(checkpoint) in message, name
        for pattern in expected:
            assert re.search(pattern, message), (name, pattern, message)
        if name == 'other horizon':  # the shapes, not also "missing"
            assert 'missing' not in message and 'unexpected' not in message, message
        assert 'load_partial=True' in message and not metrics.exists(), name


def test_a_fitting_checkpoint_loads_and_partial_loading_is_an_explicit_opt_in(
        tiny_vpn_config, tmp_path):
    model = build_model(tiny_vpn_config)
    checkpoint = saved_model(model, tmp_path / 'fits.pth', seed=1)
    loaded = init_planner(str(tiny_vpn_config), str(checkpoint))
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    t4 = saved_model(build_model(tiny_vpn_config, horizon=4), tmp_path / 't4.pth', seed=2,
                     record=False)
    with pytest.raises(ValueError, match=r'does not fit the model.*emission_head'):
        init_planner(str(tiny_vpn_config), str(t4))
    with pytest.raises(SystemExit, match='load_partial=True is for starting a fine-tuning'):
        load_tool('test').main([str(tiny_vpn_config), str(t4), '--cfg-options',
                                'load_partial=True'])
    partial = init_planner(str(tiny_vpn_config), str(t4), partial=True)
    reference = torch.load(t4, weights_only=True)['state_dict']
    assert torch.equal(partial.log_transitions, reference['log_transitions'])
    assert partial.emission_head[-1].weight.shape == (399, 256)  # kept from the config


# ----------------------------------------------------------------------- item 8: saving
def toy_config_text(work_dir) -> str:
    runtime = REPO / 'configs/_base_/default_runtime.py'
    return (f"_base_ = [{str(runtime)!r}]\n"
            "custom_imports = dict(imports=['vpn_plugin.mm', 'toy_plugin'], "
            "allow_failed_imports=False)\n"
            "model = dict(type='ToyCompatModel', dim=4)\n"
            "train_dataloader = dict(batch_size=8, num_workers=0, "
            "collate_fn=dict(type='default_collate'), sampler=dict(type='DefaultSampler', "
            "shuffle=True), dataset=dict(type='ToyCompatDataset', num_samples=16))\n"
            "train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=2)\n"
            "optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1))\n"
            f"work_dir = {str(work_dir)!r}\nlog_level = 'WARNING'\n"
            # mmengine keeps one MessageHub per experiment name (config name + second): a
            # second runner of the same name in the same second would inherit its state
            f"experiment_name = {work_dir.parent.name!r}\n")


@pytest.mark.parametrize('fault', [errno.ENOSPC, errno.EROFS])
def test_a_failed_checkpoint_save_leaves_no_partial_checkpoint(tmp_path, monkeypatch, fault):
    """The disk fills up (or the work dir turns read-only) while epoch 2 is saved: one clear
    message, and no file that --resume or test.py could take for a checkpoint."""
    from mmengine.fileio.backends.local_backend import LocalBackend
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    monkeypatch.setenv('LOCAL_RANK', '0')
    config = tmp_path / 'toy.py'
    work_dir = tmp_path / 'work'
    config.write_text(toy_config_text(work_dir))
    original = LocalBackend.put

    def failing_put(self, obj, filepath):
        if 'epoch_2.pth' in str(filepath):
            with open(filepath, 'wb') as handle:  # half of it reaches the disk
                handle.write(obj[:len(obj) // 2])
            raise OSError(fault, os.strerror(fault), str(filepath))
        return original(self, obj, filepath)

    monkeypatch.setattr(LocalBackend, 'put', failing_put)
    with pytest.raises(SystemExit) as stopped:
        load_tool('train').main([str(config)])
    message = str(stopped.value.code)
    assert message.startswith('error: cannot save checkpoint') and 'epoch_2.pth' in message
    assert os.strerror(fault) in message and 'Traceback' not in message
    left = sorted(p.name for p in work_dir.iterdir() if p.is_file())
    assert 'epoch_1.pth' in left and not [n for n in left if 'epoch_2' in n], left
    latest = (work_dir / 'last_checkpoint').read_text()
    assert latest.endswith('epoch_1.pth') and torch.load(latest, weights_only=False)


# ----------------------------------------------------------------------- item 9: converter
def test_converter_reads_the_authors_plain_npy_transition_matrix(shared_data, tmp_path):
    """Their main.py saves T3_transition_matrix.npy with np.save: a plain (N, N) array. (The
    NIV config reads the real text features: skipped without ../shared/data.)"""
    config = REPO / 'configs/vpn_niv_t3.py'
    model = build_model(config)
    from vpn_plugin.oracles.authors import authors_names
    names = dict(zip((n for n, _ in model.named_parameters()), authors_names(model)))
    authors = {names[name]: torch.randn_like(value) for name, value in model.named_parameters()}
    torch.save(authors, tmp_path / 'T3_model_best_viterbi.pth')
    counts = np.random.default_rng(0).integers(0, 5, (48, 48)).astype(np.float64)
    np.save(tmp_path / 'T3_transition_matrix.npy', counts / counts.sum(1, keepdims=True))
    out = tmp_path / 'converted.pth'
    load_tool('convert_authors_checkpoint').main([
        str(tmp_path / 'T3_model_best_viterbi.pth'), str(out), '--config', str(config),
        '--pkg', str(tmp_path / 'T3_transition_matrix.npy')])
    converted = init_planner(str(config), str(out))
    expected = torch.log(torch.as_tensor(counts / counts.sum(1, keepdims=True))).float()
    assert torch.allclose(converted.log_transitions, expected)
    for name, value in converted.named_parameters():
        assert torch.equal(value, authors[names[name]]), name



# ------------------------------------------------- issue 33, item 3: the recorded setting
def recorded_meta(horizon=3, num_actions=6, num_tasks=2, **data) -> dict:
    """A checkpoint's ``meta`` as mmengine's Runner writes it: the training set's metainfo."""
    return {'epoch': 1, 'dataset_meta': dict(horizon=horizon, num_actions=num_actions,
                                             num_tasks=num_tasks, **data)}


SMALL_MODELS = {  # every trainable method with a checkpoint, small; T=4 in the config
    'PDPP': dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=2, horizon=4, dim=32,
                 n_timesteps=10),
    'PKG beam search': dict(type='PKGBeamSearchPlanner', feature_dim=8, num_actions=6,
                            horizon=4),
    'CompactPlanNet': dict(type='CompactPlanNet', feature_dim=8, num_actions=6, num_tasks=2,
                           horizon=4, loss_weights=dict(align=0.0)),
}


@pytest.mark.parametrize('name', list(SMALL_MODELS))
def test_a_checkpoint_recorded_for_another_horizon_is_refused_for_every_method(name, tmp_path):
    """The tensors of these models do not depend on T (or happen to fit): only the recorded
    meta tells a T=3 checkpoint from a T=4 one."""
    from vpn_plugin.engine.checkpoint import CheckpointMismatchError, load_weights
    model = MODELS.build(SMALL_MODELS[name])
    checkpoint = {'state_dict': model.state_dict(), 'meta': recorded_meta(horizon=3)}
    with pytest.raises(CheckpointMismatchError, match=r"^checkpoint t3\.pth was trained for "
                       r"another setting than the config: horizon=3 in the checkpoint, 4 in "
                       r"the config's model"):
        load_weights(model, checkpoint, 't3.pth')
    data = dict(feature_dim=8, action_names=list('abcdef'), task_names=['x', 'y'])
    renamed = dict(data, action_names=list('abcdeZ'))
    checkpoint['meta'] = recorded_meta(horizon=4, **renamed)
    with pytest.raises(CheckpointMismatchError, match=r"action_names: entry 5 is 'Z' vs 'f' in "
                                                      r"the checkpoint and the config's data"):
        load_weights(model, checkpoint, 'other.pth', data_meta=dict(data, horizon=4))
    for extra in ({'num_tasks': 3}, {'num_actions': 7}):
        with pytest.raises(CheckpointMismatchError, match=next(iter(extra))):
            load_weights(model, dict(checkpoint, meta=recorded_meta(horizon=4, **dict(
                data, **extra))), 'c.pth', data_meta=dict(data, horizon=4, num_tasks=2,
                                                          num_actions=6))
    checkpoint['meta'] = recorded_meta(horizon=4, **data)
    load_weights(model, checkpoint, 'fits.pth', data_meta=dict(data, horizon=3))  # test T'=3
    load_weights(model, dict(checkpoint, meta=recorded_meta(horizon=3)), 't3.pth',
                 partial=True)  # fine-tuning from it: an explicit opt-in


def test_test_py_refuses_a_schema_checkpoint_of_another_horizon(tiny_crosstask, tmp_path,
                                                                monkeypatch):
    """Today: configs/baselines/schema_*_t4.py with a T=3 SCHEMA checkpoint exits 0 with T=4
    metrics (the tensors fit). The same checkpoint with its config scores."""
    from mmaction.registry import DATASETS
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    configs = {}
    for horizon in (3, 4):
        config = tmp_path / f'schema_tiny_t{horizon}.py'
        splits = ''.join(
            f"{split}_dataloader = dict(batch_size=64, dataset=dict(_delete_=True, "
            f"**{dict(tiny_crosstask[f'{split}_dataset'], horizon=horizon)!r}))\n"
            for split in ('train', 'val', 'test'))
        config.write_text(f"_base_ = [{str(REPO / 'configs/baselines/schema_crosstask_t3.py')!r}]"
                          f"\nhorizon = {horizon}\n" + splits)
        configs[horizon] = config
    model = build_model(configs[3])
    train = DATASETS.build(tiny_crosstask['train_dataset'])
    checkpoint = saved_model(model, tmp_path / 'schema_t3.pth')
    from vpn_plugin.engine.checkpoint import recorded_setting
    torch.save({'state_dict': torch.load(checkpoint, weights_only=True)['state_dict'],
                'meta': recorded_setting(model, train.metainfo)}, checkpoint)
    assert train.metainfo['horizon'] == 3
    test = load_tool('test')
    metrics = tmp_path / 'metrics.json'
    with pytest.raises(SystemExit) as stopped:
        test.main([str(configs[4]), str(checkpoint), '--work-dir', str(tmp_path / 'w4'),
                   '--out-metrics', str(metrics)])
    assert str(stopped.value.code).startswith(f'error: checkpoint {checkpoint} was trained for '
                                              'another setting than the config: horizon=3')
    assert not metrics.exists()
    assert test.main([str(configs[3]), str(checkpoint), '--work-dir', str(tmp_path / 'w3'),
                      '--out-metrics', str(metrics)])
    assert metrics.exists()


@pytest.mark.parametrize('content', [b'{"state_dict": {}}\n', b'not a checkpoint'])
def test_a_json_or_text_file_as_checkpoint_names_it_without_unsafe_advice(tmp_path, content):
    """Today torch's own text is shown, advising to load with weights_only=False (which could
    run the file's code)."""
    from vpn_plugin.engine.checkpoint import read_checkpoint
    path = tmp_path / 'model.pth'
    path.write_bytes(content)
    with pytest.raises(Exception) as raised:
        read_checkpoint(path)
    message = str(raised.value)
    assert message.startswith(f'cannot load checkpoint {path}: it does not unpickle')
    assert 'expected a torch checkpoint' in message and 'weights_only' not in message


@pytest.mark.parametrize('key, poison', [('step_model.0.weight', float('nan')),
                                         ('log_transitions', float('nan')),
                                         ('step_model.0.bias', float('inf'))])
def test_nan_weights_or_pkg_in_a_checkpoint_are_named(key, poison):
    """Today the error names `log_emissions` deep inside the model, not the checkpoint."""
    from vpn_plugin.engine.checkpoint import load_weights
    model = MODELS.build(SMALL_MODELS['PKG beam search'])
    state = model.state_dict()
    state[key] = state[key].clone()
    state[key].view(-1)[0] = poison
    with pytest.raises(ValueError, match=rf'^checkpoint bad.pth: tensor {re.escape(key)} .* '
                                         r'holds 1 NaN/inf value\(s\)'):
        load_weights(model, {'state_dict': state}, 'bad.pth')
    state[key] = model.state_dict()[key]
    state['log_transitions'] = torch.full((6, 6), -math.inf)  # no edge at all: legal
    load_weights(model, {'state_dict': state}, 'fine.pth')


class RunsCommand:
    def __reduce__(self):
        return os.system, ('true',)


def test_convert_authors_checkpoint_names_a_payload_file(tmp_path, monkeypatch):
    """Today torch's text (advising weights_only=False) without the file name."""
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    payload = tmp_path / 'theirs.pth'
    torch.save({'layer.weight': RunsCommand()}, payload)
    with pytest.raises(SystemExit) as stopped:
        load_tool('convert_authors_checkpoint').main([
            str(payload), str(tmp_path / 'out.pth'), '--config',
            str(REPO / 'configs/vpn_niv_t3.py'), '--pkg', str(tmp_path / 'T3.npy')])
    message = str(stopped.value.code)
    assert f'{payload}: cannot load it as the authors\' checkpoint' in message, message
    assert 'posix.system' in message and 'weights_only' not in message
    assert not (tmp_path / 'out.pth').exists()


def test_an_edited_pkg_in_a_checkpoint_is_named_with_its_file():
    """Today a checkpoint whose filled PKG was zeroed (rows summing to N) loads, and decoding
    then says 'log_transitions row 0 has probabilities summing to 6' without the file."""
    from vpn_plugin.engine.checkpoint import load_weights
    model = MODELS.build(SMALL_MODELS['PKG beam search'])
    state = model.state_dict()
    state['pkg_ready'] = torch.tensor(True)
    state['log_transitions'] = torch.zeros(6, 6)
    with pytest.raises(ValueError, match=r'^checkpoint edited.pth: tensor log_transitions: '
                                         r'log_transitions row 0 has probabilities summing '
                                         r'to 6;.*model\.pkg\.recount=True'):
        load_weights(model, {'state_dict': dict(state)}, 'edited.pth')
    state['pkg_ready'] = torch.tensor(False)  # the unfilled placeholder: PKGHook fills it
    load_weights(model, {'state_dict': dict(state)}, 'unfilled.pth')
    state['pkg_ready'] = torch.tensor(True)
    state['log_transitions'] = torch.full((6, 6), -math.log(6))  # uniform rows: a PKG
    load_weights(model, {'state_dict': dict(state)}, 'uniform.pth')


@pytest.mark.parametrize('pkg, message', [
    (np.full((5, 5), 0.2), r'pkg.npy: a PKG of shape \(5, 5\); the config\'s model has 133 '
                           r'actions: expected \(133, 133\)'),
    (np.zeros((133, 133)), r'pkg.npy: the PKG has no edge \(every entry is 0\)'),
])
def test_convert_authors_checkpoint_refuses_a_pkg_of_another_size_or_without_edges(
        tmp_path, pkg, message):
    """Fourth hostile pass: a 5x5 PKG of row sums 1 was refused only by set_pkg, a 5x5 of
    other sums as 'row 0 sums to 5.0' (its size never named); an all-zero PKG was written into
    the checkpoint, exit 0, every plan of two or more steps then impossible."""
    from test_hostile_tools import user_error
    np.save(tmp_path / 'pkg.npy', pkg)
    state = reference_dir('authors_crosstask_t3') / 'authors_state_dict.npz'
    text = user_error('convert_authors_checkpoint', [
        state, tmp_path / 'out.pth', '--config', REPO / 'configs/vpn_crosstask_t3.py',
        '--pkg', tmp_path / 'pkg.npy'])
    assert re.search(message, text), text
    assert not (tmp_path / 'out.pth').exists()


def test_convert_authors_checkpoint_names_a_missing_source(tmp_path):
    """Before: '[Errno 2] No such file or directory: ...'."""
    from test_hostile_tools import user_error
    text = user_error('convert_authors_checkpoint', [
        tmp_path / 'nope.pth', tmp_path / 'out.pth', '--config',
        REPO / 'configs/vpn_crosstask_t3.py'])
    assert f'the official state dict (SRC) {tmp_path / "nope.pth"} does not exist' in text

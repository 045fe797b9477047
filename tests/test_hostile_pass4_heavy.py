"""Fourth hostile pass (issue 37), half B: feature conversion, window export, the heavy methods,
extraction and the checker. Each test is a case that was silent, wrong or vague before its fix
(the docstring says what happened)."""
from pathlib import Path

import numpy as np
import pytest

from test_hostile_tools import no_traceback, user_error  # noqa: F401  (an autouse fixture)
from tool_modules import load_tool
from vpn_plugin.datasets.provenance import feature_provenance, write_provenance


# ---------------------------------------------------------------------- convert_features.py
def feature_folder(folder: Path, stems=('a', 'b'), suffix='.npy', value=1.0) -> Path:
    folder.mkdir(parents=True)
    for stem in stems:
        frames = np.full((3, 4), value, np.float32)
        if suffix == '.npz':
            np.savez(folder / f'{stem}.npz', frames_features=frames)
        else:
            np.save(folder / f'{stem}.npy', frames)
    return folder


def convert(src, dst, *flags):
    return [str(a) for a in ('--src', src, '--dst', dst, '--frame-dim', 4, *flags)]


@pytest.mark.parametrize('kind', ['random-weights', 'synthetic', None])
def test_converting_into_a_folder_of_other_features_is_refused(tmp_path, kind):
    """Before: --dst onto a folder of random-weights (or synthetic, or user) features kept its
    files and replaced its provenance.json by 'converted from --src (user features)', exit 0:
    the UNUSABLE mark was gone from every row trained there."""
    src = feature_folder(tmp_path / 'src')
    dst = feature_folder(tmp_path / 'dst', ('a', 'b', 'c'), '.npz', value=2.0)
    if kind:
        write_provenance(dst, dict(kind=kind))
    label = feature_provenance(dst)['label']
    message = user_error('convert_features', convert(src, dst, '--overwrite'))
    assert f'--dst {dst} already holds 3 feature file(s) (e.g. a.npz)' in message
    assert 'nothing was written' in message
    assert feature_provenance(dst)['label'] == label
    assert float(np.load(dst / 'a.npz')['frames_features'][0, 0]) == 2.0


def test_converting_again_from_the_same_source_resumes(tmp_path, capsys):
    src = feature_folder(tmp_path / 'src')
    dst = tmp_path / 'dst'
    assert load_tool('convert_features').main(convert(src, dst)) == 0
    assert load_tool('convert_features').main(convert(str(src) + '/', dst)) == 0
    assert 'converted 0 files, kept 2 existing .npz' in capsys.readouterr().out


def test_two_feature_files_of_one_video_are_refused(tmp_path):
    """Before: v.npy and v.npz in --src: v.npy was converted to v.npz, then v.npz was counted
    'kept existing' (the one this run had just written): v.npz's features were dropped."""
    src = feature_folder(tmp_path / 'src', ('v',))
    np.savez(src / 'v.npz', frames_features=np.zeros((3, 4), np.float32))
    message = user_error('convert_features', convert(src, tmp_path / 'dst'))
    assert 'v.npy and v.npz (both would become v.npz)' in message
    assert not (tmp_path / 'dst').exists()


def test_converting_into_the_source_folder_is_refused(tmp_path):
    """Before: --dst = --src wrote v.npz beside every v.npy (the datasets then refuse both)
    and a provenance.json saying the folder was converted from itself."""
    src = feature_folder(tmp_path / 'src')
    message = user_error('convert_features', convert(src, tmp_path / 'src' / '.' ))
    assert 'that is an input of this command (the --src folder)' in message
    assert sorted(p.name for p in src.iterdir()) == ['a.npy', 'b.npy']


def test_subfolders_and_dangling_links_of_the_source_are_counted(tmp_path, capsys):
    """Before: a dangling b.npy link and a subfolder of feature files were left out without a
    word (only files not named .npy/.npz were listed as skipped)."""
    src = feature_folder(tmp_path / 'src', ('a',))
    (src / 'b.npy').symlink_to(tmp_path / 'gone.npy')
    feature_folder(src / 'task1', ('c',))
    assert load_tool('convert_features').main(convert(src, tmp_path / 'dst')) == 0
    assert ('skipped 2 entries that are not files (a subfolder is not read; a dangling link '
            f'or a loop of links has no file): b.npy (a symbolic link to {tmp_path}/gone.npy, '
            'which leads to no file (a dangling link)), task1/'
            ) in capsys.readouterr().out


@pytest.mark.parametrize('what', ['missing', 'file'])
def test_a_source_that_is_no_folder_is_named(tmp_path, what):
    """Before: a missing --src, or a file, was 'no feature files there'."""
    src = tmp_path / 'src'
    if what == 'file':
        src.write_text('x')
    expected = 'does not exist' if what == 'missing' else 'is a regular file, not a folder'
    assert f'--src {src}: {expected}' in user_error('convert_features',
                                                    convert(src, tmp_path / 'dst'))


@pytest.mark.parametrize('below', ['', 'x'])
def test_a_destination_that_is_a_file_is_named(tmp_path, below):
    """Before: '[Errno 17] File exists' / '[Errno 20] Not a directory' (no flag, no reason)."""
    src = feature_folder(tmp_path / 'src')
    (tmp_path / 'dst').write_text('mine')
    dst = tmp_path / 'dst' / below if below else tmp_path / 'dst'
    message = user_error('convert_features', convert(src, dst))
    assert f'--dst {dst}' in message and 'Errno' not in message
    assert (tmp_path / 'dst').read_text() == 'mine'


# ---------------------------------------------------------------------- export_windows.py
def test_export_windows_has_no_feature_dir_it_would_ignore(tmp_path, shared_data):
    """Before: --feature-dir DIR was accepted and ignored (the window file named the layout's
    folder); the folder a window file names is --feature-prefix."""
    out = tmp_path / 'w.json'
    with pytest.raises(SystemExit) as stopped:
        load_tool('export_windows').main(['--dataset', 'niv', '--data-root', str(shared_data),
                                          '--split', 'test', '--horizon', '3', '--out', str(out),
                                          '--feature-dir', str(tmp_path)])
    assert stopped.value.code == 2 and not out.exists()


def test_export_windows_counts_the_bad_videos_it_skips(tmp_path, shared_data, capsys):
    """Before: a config with skip_bad_videos=True exported 263 of 270 NIV windows and said
    only '263 windows of 41 videos': the skipped video was not counted."""
    import json
    import shutil
    root = tmp_path / 'data'
    shutil.copytree(shared_data / 'niv', root / 'niv')
    windows_file = root / 'niv' / 'splits' / 'test_T3.json'
    windows = json.loads(windows_file.read_text())
    windows[0]['id']['legal_range'][0][2] = 9999
    windows_file.write_text(json.dumps(windows))
    config = tmp_path / 'skip.py'
    from vpn_plugin.data_paths import REPO_ROOT
    config.write_text(f"_base_ = ['{REPO_ROOT}/configs/baselines/pdpp_niv_t3.py']\n"
                      'test_dataloader = dict(dataset=dict(skip_bad_videos=True))\n')
    assert load_tool('export_windows').main(['--config', str(config), '--data-root', str(root),
                                             '--split', 'test', '--horizon', '3', '--out',
                                             str(tmp_path / 'w.json')]) == 0
    err = capsys.readouterr().err
    assert '1 bad videos skipped (skip_bad_videos=True) (first: ' in err
    assert 'action id 9999 is outside the taxonomy' in err


def test_export_windows_config_without_the_split_is_named(tmp_path):
    """Before: 'error: test_dataloader' (a KeyError)."""
    from vpn_plugin.data_paths import REPO_ROOT
    config = REPO_ROOT / 'configs/_base_/default_runtime.py'
    message = user_error('export_windows', ['--config', config, '--split', 'test', '--horizon',
                                            3, '--out', tmp_path / 'w.json'])
    assert 'no test_dataloader.dataset; expected a training config or a dataset config' in message


# ---------------------------------------------------------------------- CEFITO options, pre-stage hooks
@pytest.fixture(scope='module')
def cefito_model_cfg(shared_data):
    import vpn_plugin.mm  # noqa: F401  (registration)
    from vpn_plugin.data_paths import load_config
    model = load_config('configs/baselines/cefito_niv_t3.py').model
    model.update(text_embeddings=None, hidden_dim=12, num_heads=2, depth=1)  # small, no text
    return model


@pytest.mark.parametrize('option, value, expected', [
    ('causal', 0, 'model.causal=0; expected True or False'),
    ('causal', 'x', "model.causal='x'; expected True or False"),
    ('causal', None, 'model.causal=None; expected True or False'),
    ('loss_weights', 0, 'model.loss_weights=0; expected a dict'),
    ('loss_weights', 1.5, 'model.loss_weights=1.5; expected a dict'),
    ('action_embeddings', [1], 'model.action_embeddings=[1]; expected a float tensor (48, 512)'),
    ('taxonomy', None, 'model.taxonomy=None; expected the taxonomy JSON file'),
    ('pkg', dict(type='PKGBuilder', extra_datasets='x'), "model.pkg.extra_datasets='x'; expected a list"),
    ('pkg', dict(type='PKGBuilder', perturbations=None), 'model.pkg.perturbations=None; expected a list'),
    ('mlp_ratio', 1e9, 'model.mlp_ratio=1000000000.0; expected a finite number > 0 and <= 64'),
    ('depth', 10 ** 9, 'model.depth=1000000000; expected an integer >= 1 and <= 64'),
    ('hidden_dim', 10 ** 9, 'model.hidden_dim=1000000000; expected an integer >= 1 and <= 4096'),
    ('feature_dim', 10 ** 9, 'model.feature_dim=1000000000; expected an integer >= 1 and <= 16384'),
])
def test_cefito_options_are_named_when_built(cefito_model_cfg, option, value, expected):
    """Before: causal 0 / 'x' / None (and -1, nan, 1.5, [1]) built a model by truth value;
    loss_weights=0 read as None (the default weights); pkg.extra_datasets='x' built (a list of
    one character); the others were TypeError / AttributeError / torch allocation errors."""
    from mmaction.registry import MODELS
    cfg = dict(cefito_model_cfg, **{option: value})
    with pytest.raises(ValueError) as err:
        MODELS.build(cfg)
    assert expected in str(err.value)


@pytest.mark.parametrize('hook, option, value', [
    ('TaskClassifierHook', 'lr', float('inf')), ('TaskClassifierHook', 'lr', 0),
    ('TaskClassifierHook', 'weight_decay', float('nan')),
    ('TaskClassifierHook', 'max_epochs', 0), ('TaskClassifierHook', 'batch_size', 0),
    ('TaskClassifierHook', 'batch_size', True), ('TaskClassifierHook', 'max_iters', 1.5),
    ('KEPPStepModelHook', 'lr', 0), ('KEPPStepModelHook', 'max_iters', 0),
    ('KEPPStepModelHook', 'weight_decay', -1),
])
def test_pre_stage_hook_options_are_checked(hook, option, value):
    """Before: every value built. batch_size=0 / lr=0 / max_iters=0 fell back to the loader's
    batch size, the optimiser's lr, the run's steps without a word; max_epochs=0 marked an
    untrained task head ready; lr=inf trained NaN weights."""
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import HOOKS
    with pytest.raises(ValueError, match=rf'{hook}: {option}={value!r}; expected'):
        HOOKS.build(dict(type=hook, **{option: value}))


# ---------------------------------------------------------------------- shared-EMA checkpoints
def test_an_ema_state_dict_stripped_of_its_shared_list_is_refused(tmp_path):
    """Before: a checkpoint whose ema_state_dict_shared list was removed (a tool keeping only
    the keys it knows) was read as it was: ema_state_dict held only the tensors that differ,
    and mmengine's EMA hooks load it with strict=False, so a resume started the others from
    the model's initial weights without a word."""
    import torch
    from vpn_plugin.engine.checkpoint import read_checkpoint, share_ema_tensors
    weight = torch.ones(2, 2)
    checkpoint = dict(meta={}, state_dict=dict(w=weight, b=torch.zeros(2)),
                      ema_state_dict={'steps': torch.tensor(3), 'module.w': weight.clone(),
                                      'module.b': torch.ones(2)})
    share_ema_tensors(checkpoint)
    assert checkpoint['ema_state_dict_shared'] == ['w']
    torch.save(checkpoint, tmp_path / 'kept.pth')
    assert set(read_checkpoint(tmp_path / 'kept.pth')['ema_state_dict']) == {
        'steps', 'module.w', 'module.b'}
    del checkpoint['ema_state_dict_shared']
    torch.save(checkpoint, tmp_path / 'stripped.pth')
    with pytest.raises(ValueError, match=r'stripped.pth: ema_state_dict lacks 1 of the 2 '
                                         r'state_dict tensors \(e.g. module.w\)'):
        read_checkpoint(tmp_path / 'stripped.pth')


# ---------------------------------------------------------------------- SCHEMA options
@pytest.mark.parametrize('option, value, expected', [
    ('init_visual_from', 0, 'SCHEMA model.init_visual_from=0; expected a non-empty string (or None)'),
    ('init_visual_from', True, 'SCHEMA model.init_visual_from=True; expected a non-empty string'),
    ('text_embeddings', 'x', "model.text_embeddings='x'; expected a dict"),
    ('text_embeddings', 0, 'model.text_embeddings=0; expected a dict'),
])
def test_schema_options_are_named_when_built(shared_data, option, value, expected):
    """Before: init_visual_from=0 built a SCHEMA without the pre-trained encoder (read as None),
    True / 1.5 were mmengine's 'True can not be found.'; text_embeddings that is no dict was a
    TypeError ('argument after ** must be a mapping')."""
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import MODELS
    from vpn_plugin.data_paths import load_config
    model = load_config('configs/baselines/schema_niv_t3.py').model
    with pytest.raises(ValueError) as err:
        MODELS.build(dict(model, **{option: value}))
    assert expected in str(err.value)


# ---------------------------------------------------------------------- check_reference.py
@pytest.mark.parametrize('value', ['x', None, 1.5])
def test_a_pkg_fixture_query_horizon_that_is_no_integer_is_named(tmp_path, value):
    """Before: queries[0].horizon = 'x' in a copy of kepp_small_t3/pkg/inputs.json was a bare
    TypeError traceback ("'<' not supported between instances of 'str' and 'int')."""
    import json
    import shutil
    from vpn_plugin.data_paths import REPO_ROOT
    source = REPO_ROOT.parent / 'shared' / 'reference' / 'kepp_small_t3' / 'pkg'
    if not source.is_dir():
        pytest.skip(f'{source} not found')
    fixture = tmp_path / 'pkg'
    shutil.copytree(source, fixture)
    inputs = json.loads((fixture / 'inputs.json').read_text())
    inputs['queries'][0]['horizon'] = value
    (fixture / 'inputs.json').write_text(json.dumps(inputs))
    message = user_error('check_reference', [fixture])
    assert f'queries[0] field "horizon" = {value!r}; expected an integer >= 0' in message

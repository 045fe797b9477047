"""Tenth hostile pass (issue 37), the tools around training (meaning3).

Each test is a case that was wrong, silent or vague on 1c6544e (case ids of
/tmp/meaning3_log.md; the ninth pass's leftovers are named by what they were).
"""
import fcntl
import os
from pathlib import Path

import numpy as np
import pytest

from tool_modules import load_tool


def user_error(tool: str, argv) -> str:
    """The message ``tool`` stops with (exit status 1 or argparse's 2, with a text)."""
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([str(a) for a in argv])
    assert stopped.value.code != 0, f'{tool}: exit code {stopped.value.code!r}'
    return str(stopped.value.code)


def feature_folder(folder: Path, count: int = 2) -> Path:
    folder.mkdir()
    for index in range(count):
        np.save(folder / f'1_v{index}.npy', np.full((4, 512), index, np.float32))
    return folder


# ------------------------------------------------------------------- leftovers of pass 9
def test_a_killed_conversions_temporary_file_is_removed_by_the_rerun(tmp_path, capsys):
    """hostile22: a killed convert_features left .<stem>.npz.partial-<host>-<pid> in --dst;
    the rerun neither read nor removed it (a hidden file of the size of a feature file)."""
    src, dst = feature_folder(tmp_path / 'src'), tmp_path / 'dst'
    assert load_tool('convert_features').main(['--src', str(src), '--dst', str(dst)]) == 0
    (dst / '1_v1.npz').unlink()  # the file in flight when the run was killed
    stale = dst / '.1_v1.npz.partial-somehost-12345'
    stale.write_bytes(b'PK\x03\x04 half an archive')
    capsys.readouterr()
    assert load_tool('convert_features').main(['--src', str(src), '--dst', str(dst)]) == 0
    out = capsys.readouterr().out
    assert 'removed 1 temporary file(s) that a stopped conversion left in' in out
    assert '.1_v1.npz.partial-somehost-12345' in out
    assert sorted(p.name for p in dst.iterdir()) == ['1_v0.npz', '1_v1.npz', 'provenance.json']
    assert np.load(dst / '1_v1.npz')['frames_features'][0, 0] == 1


def test_two_conversions_into_one_dst_take_turns(tmp_path):
    """hostile22: two convert_features into one new --dst had no lock (a race window of
    milliseconds); the second is refused naming the process holding --dst."""
    from vpn_plugin.locks import lock_path_of
    src, dst = feature_folder(tmp_path / 'src'), tmp_path / 'dst'
    with open(lock_path_of(dst), 'a+') as held:  # a first conversion, running
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write('4242\n')
        held.flush()
        message = user_error('convert_features', ['--src', src, '--dst', dst])
    assert f'--dst {dst} (a conversion) is in use by another process (pid 4242' in message
    assert not dst.exists()  # nothing written by the refused one
    assert load_tool('convert_features').main(['--src', str(src), '--dst', str(dst)]) == 0


def test_one_device_check_for_the_tools_and_the_api():
    """hostile22: benchmark_dvl.check_device and extract.checked_device gave two messages for
    one mistake; both tools now use errors.checked_device."""
    from vpn_plugin import errors
    assert not hasattr(load_tool('benchmark_dvl'), 'check_device')
    assert load_tool('extract_features').checked_device is errors.checked_device
    for tool in ('benchmark_dvl', 'benchmark_extract'):
        message = user_error(tool, ['--device', 'banana'])
        assert message.splitlines()[0] == ("error: --device 'banana' is not a torch device; "
                                           'expected cpu, cuda or cuda:N'), (tool, message)
    assert 'a meta device holds no data' in user_error('benchmark_dvl', ['--device', 'meta'])


PATH_FUNCTIONS = [
    ('vpn_plugin.datasets.features', 'read_feature_record', 'path', {}),
    ('vpn_plugin.datasets.features', 'load_features', 'path', dict(frame_dim=512)),
    ('vpn_plugin.datasets.features', 'find_feature_file', 'feature_dir', dict(stem='x')),
    ('vpn_plugin.datasets.taxonomy', 'load_taxonomy', 'path', {}),
    ('vpn_plugin.datasets.annotations', 'read_crosstask_tasks', 'path', {}),
    ('vpn_plugin.datasets.provenance', 'read_record', 'folder', {}),
    ('vpn_plugin.datasets.provenance', 'feature_provenance', 'folder', {}),
    ('vpn_plugin.baselines.llm.anchors', 'load_anchor_predictions', 'path',
     dict(num_samples=None)),
    ('vpn_plugin.protocol.plots', 'read_success', 'per_sample_file', {}),
]


@pytest.mark.parametrize('value', [b'/tmp/x.npy', 3, '', 'a\x00b', Path('x').parts])
@pytest.mark.parametrize('module, function, name, others', PATH_FUNCTIONS,
                         ids=[f[1] for f in PATH_FUNCTIONS])
def test_a_path_argument_of_another_kind_is_refused_naming_it(module, function, name, others,
                                                               value):
    """hostile22 F5: read_feature_record(b'path') gave pathlib's TypeError "argument should be
    a str object or an os.PathLike object returning str, not <class 'bytes'>" naming no
    argument; a file descriptor number or '' were read as a path too."""
    import importlib
    target = getattr(importlib.import_module(module), function)
    with pytest.raises(ValueError) as error:
        target(**{name: value}, **others)
    assert str(error.value) == (
        f'{function}() argument {name}={value!r}; expected a path (a non-empty str or a '
        'pathlib.Path; bytes and file descriptors are not read)')


def test_a_path_kind_lets_str_and_pathlike_through(tmp_path):
    from vpn_plugin.config_types import PathLike, conforms
    from vpn_plugin.datasets.features import read_feature_record

    class Named(os.PathLike):
        def __fspath__(self):
            return str(tmp_path / 'a.npy')

    class BytesNamed(os.PathLike):
        def __fspath__(self):
            return b'a.npy'

    np.save(tmp_path / 'a.npy', np.zeros((2, 3), np.float32))
    for value in (str(tmp_path / 'a.npy'), tmp_path / 'a.npy', Named()):
        assert read_feature_record(value)['frames_features'].shape == (2, 3)
    assert not conforms(BytesNamed(), PathLike)
    assert conforms(None, PathLike | None) and not conforms(None, PathLike)


# ------------------------------------------------------------------- the pass's cases
def test_a3_a_rerun_with_another_frame_dim_refuses_the_kept_files(tmp_path, capsys):
    """A3: a rerun with --frame-dim 1024 into a --dst converted at 512 'kept 3 existing' and
    exited 0: the folder held 512-d features where 1024 was asked."""
    src, dst = feature_folder(tmp_path / 'src', 3), tmp_path / 'dst'
    assert load_tool('convert_features').main(['--src', str(src), '--dst', str(dst)]) == 0
    capsys.readouterr()
    assert load_tool('convert_features').main(
        ['--src', str(src), '--dst', str(dst), '--frame-dim', '1024']) == 1
    out = capsys.readouterr().out
    assert 'refused (kept file of another dimension): 3 files' in out
    assert f'{dst}/1_v0.npz: kept from an earlier run, holds frames of shape (4, 512); ' \
           '--frame-dim 1024 expects (seconds, 1024)' in out
    assert load_tool('convert_features').main(['--src', str(src), '--dst', str(dst)]) == 0


def test_a4_a_converted_file_whose_source_is_gone_is_named(tmp_path, capsys):
    """A4: after a source file was removed, the rerun kept its .npz in --dst (labelled
    'converted from --src') without a word."""
    src, dst = feature_folder(tmp_path / 'src', 3), tmp_path / 'dst'
    assert load_tool('convert_features').main(['--src', str(src), '--dst', str(dst)]) == 0
    (src / '1_v2.npy').unlink()
    capsys.readouterr()
    assert load_tool('convert_features').main(['--src', str(src), '--dst', str(dst)]) == 0
    assert (f'warning: {dst} holds 1 feature file(s) with no source in --src any more (e.g. '
            '1_v2.npz)') in capsys.readouterr().out


def test_a10_a_dst_that_is_a_dangling_link_is_made_at_its_target(tmp_path):
    """A10: --dst a symlink to a folder not made yet stopped in "[Errno 17] File exists"."""
    src = feature_folder(tmp_path / 'src')
    (tmp_path / 'link').symlink_to(tmp_path / 'real')
    assert load_tool('convert_features').main(['--src', str(src), '--dst',
                                               str(tmp_path / 'link')]) == 0
    assert sorted(p.name for p in (tmp_path / 'real').iterdir()) == [
        '1_v0.npz', '1_v1.npz', 'provenance.json']


@pytest.fixture
def recorded_uniform(tiny_crosstask, tmp_path):
    """(config, checkpoint): a uniform-emission planner saved with its PKG and its training
    config (meta['cfg']), as a training saves it."""
    import torch
    from mmaction.registry import MODELS
    from vpn_plugin.data_paths import load_config
    import vpn_plugin.mm  # noqa: F401  (registration)
    from test_pkg_builder import tiny_uniform_config
    from tiny_configs import save_recorded
    config = tiny_uniform_config(tiny_crosstask, tmp_path)
    model = MODELS.build(dict(type='UniformEmissionPlanner', num_actions=133, horizon=3))
    model.set_pkg(np.roll(np.eye(133), 1, axis=1))
    path = save_recorded(model, tmp_path / 'chain.pth', tiny_crosstask['test_dataset'])
    checkpoint = torch.load(path, weights_only=False)
    checkpoint['meta']['cfg'] = load_config(str(config)).pretty_text  # as the runner's cfg
    torch.save(checkpoint, path)
    return config, path


def test_c5_plans_name_the_options_that_differ_from_training(recorded_uniform, capsys):
    """C5, C24, C29: plan.py / init_planner with test_dataloader.dataset.observation='concat3'
    (the same 1536 dims as 'authors'), observed_steps=1 or another window_policy planned from a
    checkpoint trained otherwise without a word (test.py names them)."""
    import warnings
    from vpn_plugin.apis import init_planner
    config, checkpoint = recorded_uniform
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        model = init_planner(str(config), str(checkpoint))
    assert model.option_differences == [] and not [
        w for w in caught if 'trained with other options' in str(w.message)]  # no wolf
    with pytest.warns(UserWarning, match=r"test_dataloader.dataset.observed_steps: 0 in "
                                         r"training, 1 here; the plans use the config's"):
        model = init_planner(str(config), str(checkpoint),
                             cfg_options={'test_dataloader.dataset.observed_steps': 1})
    assert model.option_differences == [
        'test_dataloader.dataset.observed_steps: 0 in training, 1 here']
    capsys.readouterr()
    load_tool('plan').main([str(config), str(checkpoint), '--indices', '0', '--cfg-options',
                            'test_dataloader.dataset.window_policy=authors'])
    out = capsys.readouterr()
    assert (f"WARNING: {checkpoint} was trained with other options: test_dataloader.dataset."
            "window_policy: 'keep' in training, 'authors' here") in out.out
    assert 'UserWarning' not in out.err


def test_c25_plans_from_a_checkpoints_pkg_against_another_configs_pkg_are_refused(
        recorded_uniform):
    """C25: plan.py --cfg-options model.pkg.smoothing=1.0 decoded with the checkpoint's graph
    (smoothing 0) without a word; test.py refuses it (check_loaded_pkg)."""
    from vpn_plugin.apis import init_planner
    config, checkpoint = recorded_uniform
    with pytest.raises(ValueError, match=r"carries the PKG its training counted, and this "
                                         r"config's model.pkg asks for another graph "
                                         r"\(smoothing: 0.0 in training, 1.0 here\)"):
        init_planner(str(config), str(checkpoint), cfg_options={'model.pkg.smoothing': 1.0})


def test_d1_a_synthetic_rerun_with_other_settings_says_what_it_replaced(tmp_path, capsys):
    """D1: make_synthetic_features --seed 1 into a folder of seed 0 rewrote its 141 files
    under the same names without a word (a checkpoint trained on them no longer matches)."""
    shared = Path(__file__).resolve().parents[1] / '..' / 'shared' / 'data'
    tool = load_tool('make_synthetic_features')
    argv = ['--dataset', 'niv', '--data-root', str(shared), '--out', str(tmp_path / 'syn')]
    tool.main(argv)
    capsys.readouterr()
    tool.main(argv + ['--seed', '1'])
    assert (f"{tmp_path / 'syn' / 'features'}: replaced the features of the earlier run (seed "
            "0 -> 1); checkpoints trained on the earlier ones no longer match these"
            ) in capsys.readouterr().out
    tool.main(argv + ['--seed', '1'])
    assert 'replaced' not in capsys.readouterr().out


def test_e8_both_text_sources_are_said_to_exclude_each_other(capsys):
    """E8: --action-names with --state-descriptions was answered "give --state-descriptions
    or --action-names" (both had been given)."""
    with pytest.raises(SystemExit):
        load_tool('make_text_features').main(['--taxonomy', 'x.json', '--out', 'x.npy',
                                              '--action-names', '--state-descriptions', 'y'])
    assert '--action-names (CEFITO: (N, Dt) action names) exclude each other' in \
        capsys.readouterr().err


def test_h8_plan_checks_the_configs_entries_before_planning(recorded_uniform, tmp_path):
    """H8: plan.py --features with test_dataloader.dataset.window_policy='drop' (no such
    policy) planned without a word: --features builds no dataset, whose check refuses it."""
    config, checkpoint = recorded_uniform
    np.save(tmp_path / 'video.npy', np.zeros((30, 512), np.float32))
    message = user_error('plan', [config, checkpoint, '--features', tmp_path / 'video.npy',
                                  '--start-time', '2', '--goal-time', '20', '--cfg-options',
                                  'test_dataloader.dataset.window_policy=drop'])
    assert "test_dataloader.dataset.window_policy='drop'; expected one of 'keep', 'authors'" \
        in message

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

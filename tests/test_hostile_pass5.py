"""Fifth hostile pass, part A (issue 37): disk full, 2-rank heavy methods, resume from edited
EMA checkpoints. Each test fails on the behaviour before its fix (main e2e1c6d)."""
import pytest
import torch

from vpn_plugin.engine.checkpoint import read_checkpoint, share_ema_tensors


def shared_checkpoint() -> dict:
    """A checkpoint as the EMA hooks save it: ``w`` shared (equal in the EMA), ``b`` not."""
    weight = torch.ones(2, 2)
    checkpoint = dict(meta={}, state_dict=dict(w=weight, b=torch.zeros(2), v=weight * 2),
                      ema_state_dict={'steps': torch.tensor(3), 'module.w': weight.clone(),
                                      'module.b': torch.ones(2), 'module.v': weight * 2})
    share_ema_tensors(checkpoint)
    assert checkpoint['ema_state_dict_shared'] == ['w', 'v']
    return checkpoint


@pytest.mark.parametrize('edit, expected', [
    # before: read as it was; mmengine's EMA hooks load ema_state_dict with strict=False, so a
    # resume started the unlisted tensors from the model's initial weights without a word
    (lambda c: c.__setitem__('ema_state_dict_shared', ['v']),
     r'ema_state_dict lacks 1 of the 3 state_dict tensors \(e.g. module.w\) and '
     r'ema_state_dict_shared does not list them'),
    (lambda c: c.__setitem__('ema_state_dict_shared', []),
     r'ema_state_dict lacks 2 of the 3 state_dict tensors'),
    # before: the EMA's update count reset to 0 on resume: its next update a copy of the model
    (lambda c: c['ema_state_dict'].pop('steps'), r'ema_state_dict holds no "steps"'),
    # before: mmengine's swap stopped with "error: nosuch" (a bare KeyError)
    (lambda c: c['ema_state_dict'].__setitem__('module.nosuch', torch.zeros(1)),
     r"ema_state_dict holds 1 key\(s\) of no state_dict tensor \(\['module.nosuch'\]\)"),
])
def test_an_edited_shared_ema_checkpoint_is_refused(tmp_path, edit, expected):
    checkpoint = shared_checkpoint()
    edit(checkpoint)
    torch.save(checkpoint, tmp_path / 'edited.pth')
    with pytest.raises(ValueError, match=r'edited.pth: ' + expected):
        read_checkpoint(tmp_path / 'edited.pth')


def test_a_complete_shared_ema_checkpoint_still_reads(tmp_path):
    """No wolf: the file the hooks write (duplicates in the list included) reads back whole."""
    checkpoint = shared_checkpoint()
    torch.save(checkpoint, tmp_path / 'kept.pth')
    checkpoint['ema_state_dict_shared'] *= 2
    torch.save(checkpoint, tmp_path / 'dup.pth')
    for name in ('kept', 'dup'):
        ema = read_checkpoint(tmp_path / f'{name}.pth')['ema_state_dict']
        assert set(ema) == {'steps', 'module.w', 'module.b', 'module.v'}
        assert torch.equal(ema['module.b'], torch.ones(2))


@pytest.mark.usefixtures('single_thread')
def test_a_resume_refuses_nan_ema_weights(tiny_crosstask, tmp_path):
    """Before: a checkpoint whose state_dict (the EMA weights: mmengine swaps them into the
    EMA copy on resume) held a NaN resumed with exit 0 (only the raw weights were checked);
    the EMA then averaged NaN into every later checkpoint. tools/test.py refused it already."""
    from tiny_configs import write_tiny_pdpp_ema_config
    from tool_modules import load_tool
    config = write_tiny_pdpp_ema_config(tmp_path, tiny_crosstask)
    train = load_tool('train').main
    train([str(config), '--work-dir', str(tmp_path / 'run'),
           '--cfg-options', 'train_cfg.max_epochs=1'])
    checkpoint = read_checkpoint(tmp_path / 'run/epoch_1.pth')
    key = next(k for k in checkpoint['state_dict'] if k.startswith('diffusion.unet.')
               and checkpoint['state_dict'][k].is_floating_point())
    checkpoint['state_dict'][key].view(-1)[0] = float('nan')
    (tmp_path / 'resumed').mkdir()
    torch.save(checkpoint, tmp_path / 'resumed/nan.pth')
    with pytest.raises(SystemExit, match=rf'nan.pth \(EMA weights\): tensor {key} .* holds 1 '
                                         'NaN/inf value'):
        train([str(config), '--work-dir', str(tmp_path / 'resumed'),
               '--resume', str(tmp_path / 'resumed/nan.pth')])


def test_a_full_disk_leaves_no_truncated_synthetic_feature_file(tmp_path, monkeypatch):
    """Before: tools/make_synthetic_features.py wrote each file in place; on a full disk
    (a 20 MiB tmpfs) it stopped with "error: [Errno 28] No space left on device" (no file
    named) and left cpr_0003.npz truncated (147,456 of 441,956 bytes) among complete files."""
    import errno
    import numpy as np
    from vpn_plugin.datasets import synthetic
    from vpn_plugin.datasets.annotations import VideoAnnotation
    from vpn_plugin.errors import OutputWriteError

    def savez_until_full(file, **arrays):
        handle = open(file, 'wb') if isinstance(file, (str, bytes)) or hasattr(
            file, '__fspath__') else file
        handle.write(b'PK' + b'\0' * 100)  # part of the archive, then the disk is full
        handle.flush()
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(np, 'savez', savez_until_full)
    video = VideoAnnotation(vid='cpr_0003', task=0, feature='cpr_0003',
                            steps=[(0.0, 1.0, 1), (2.0, 3.0, 2)])
    path = tmp_path / 'cpr_0003.npz'
    with pytest.raises(OutputWriteError, match=r'cannot write the synthetic features '
                       r'.*cpr_0003.npz: No space left on device; nothing was written there'):
        synthetic.save_video_features(path, np.zeros((4, 8), np.float32), video, 'npz', 'niv')
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_a_conversion_stopped_by_a_full_disk_resumes(tmp_path, monkeypatch):
    """Before: tools/convert_features.py wrote its provenance record after the last file; a
    full disk stopped it part-way ("free disk space and run again to resume"), and the run
    again was refused: "--dst already holds 43 feature file(s) and the record of user
    features, not an earlier conversion of --src"."""
    import numpy as np
    from tool_modules import load_tool
    from vpn_plugin.errors import OutputWriteError
    src, dst = tmp_path / 'src', tmp_path / 'dst'
    src.mkdir()
    for stem in ('a_1', 'b_2', 'c_3'):
        np.save(src / f'{stem}.npy', np.full((4, 8), 0.5, np.float32))
    tool = load_tool('convert_features')
    real, calls = tool.convert_file, []

    def full_after_one(source, out, frame_dim):
        calls.append(source.name)
        if len(calls) == 2:
            raise OutputWriteError(f'cannot write the feature file {out}: No space left on '
                                   'device; it was not written')
        return real(source, out, frame_dim)

    monkeypatch.setattr(tool, 'convert_file', full_after_one)
    args = ['--src', str(src), '--dst', str(dst), '--frame-dim', '8']
    with pytest.raises(SystemExit, match='No space left on device'):
        tool.main(args)
    assert sorted(p.name for p in dst.glob('*.npz')) == ['a_1.npz']
    monkeypatch.setattr(tool, 'convert_file', real)
    assert tool.main(args) == 0  # resumed: a_1 kept, b_2 and c_3 converted
    assert sorted(p.name for p in dst.glob('*.npz')) == ['a_1.npz', 'b_2.npz', 'c_3.npz']
    for stem in ('a_1', 'b_2', 'c_3'):
        assert np.array_equal(np.load(dst / f'{stem}.npz')['frames_features'],
                              np.full((4, 8), 0.5, np.float32))


def test_a_full_disk_error_names_the_file_being_written(tmp_path):
    """Before: tools/test.py --work-dir on a full disk ended "error: [Errno 28] No space left
    on device" (mmengine's config dump into the log dir: write/close name no file)."""
    import errno
    from vpn_plugin.errors import explained_errors

    def dump(file):
        with open(file, 'w'):
            raise OSError(errno.ENOSPC, 'No space left on device')

    with pytest.raises(SystemExit) as stopped:
        with explained_errors():
            dump(str(tmp_path / 'config.py'))
    assert str(stopped.value).startswith(
        f'error: [Errno 28] No space left on device (writing {tmp_path}/config.py); free disk '
        'space or choose another output folder')


def test_a_full_disk_leaves_no_empty_figure(tmp_path, monkeypatch):
    """Before: tools/plots.py on a full disk left a 0-byte fig.png (matplotlib writes in
    place), which the next run refused to replace as a file it had not written, and the
    error named no file ("[Errno 28] No space left on device")."""
    import errno
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.figure
    from vpn_plugin.errors import OutputWriteError
    from vpn_plugin.protocol.plots import save_figure

    def savefig_until_full(self, file, **kwargs):
        handle = open(file, 'wb') if isinstance(file, (str, bytes)) or hasattr(
            file, '__fspath__') else file
        handle.write(b'\x89PNG')
        handle.flush()
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(matplotlib.figure.Figure, 'savefig', savefig_until_full)
    with pytest.raises(OutputWriteError, match=r'cannot write the figure .*fig.png: No space '
                                               'left on device; nothing was written there'):
        save_figure(matplotlib.figure.Figure(), tmp_path / 'fig')
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_during_a_pre_stage_save_is_named_and_leaves_nothing(tmp_path, monkeypatch):
    """Before: PDPP's task classifier saved on a full disk (20 MiB tmpfs) ended in a traceback,
    torch's zip writer's "RuntimeError: [enforce fail at inline_container.cc:672] unexpected
    pos", and left a 20 MB .task_classifier.pth.<pid>.partial in the work dir."""
    import errno
    import io
    import os
    import torch
    from vpn_plugin.engine import pre_stage
    from vpn_plugin.errors import OutputWriteError
    real_save = torch.save

    def zip_writer_save(obj, f, *args, **kwargs):  # torch's writer given a path
        if isinstance(f, (str, os.PathLike)):
            with open(f, 'wb') as handle:
                handle.write(b'PK\x03\x04' + b'\0' * 64)
            raise RuntimeError('[enforce fail at inline_container.cc:672] . unexpected pos 704 '
                               'vs 598')
        return real_save(obj, f, *args, **kwargs)

    class FullDisk(io.BufferedWriter):
        def write(self, data):
            super().write(bytes(data)[:10])
            self.flush()
            raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(torch, 'save', zip_writer_save)
    monkeypatch.setattr(pre_stage, 'open', lambda path, mode: FullDisk(io.FileIO(path, 'w')),
                        raising=False)
    path = tmp_path / 'task_classifier.pth'
    with pytest.raises(OutputWriteError, match=r'cannot save the pre-stage file '
                                               r'.*task_classifier.pth: No space left on device'):
        pre_stage.save_pre_stage(path, dict(weights=torch.zeros(3)))
    assert list(tmp_path.iterdir()) == []

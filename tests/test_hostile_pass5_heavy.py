"""Fifth hostile pass (issue 37), part B: named vague leftovers of the earlier passes, 2-rank
extraction and the checker's fixture corners. Each test is a case that was vague, silent or
wrong before its fix (the docstring says what happened)."""
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from test_hostile_pass4_heavy import cefito_model_cfg  # noqa: F401  (a fixture)
from test_hostile_tools import no_traceback  # noqa: F401  (an autouse fixture)
from vpn_plugin.data_paths import REPO_ROOT


# ---------------------------------------------------------------------- a peer rank that dies
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def test_rank_0_says_in_one_line_that_another_process_stopped(tmp_path):
    """Before: when rank 1 of a torchrun run died (SIGKILL, out of memory) while rank 0 waited
    in a collective, rank 0 printed gloo's ~38-line "Connection closed by peer" traceback before
    torchrun's summary."""
    script = tmp_path / 'two_ranks.py'
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(REPO_ROOT)!r})
        import torch, torch.distributed as dist
        from vpn_plugin.errors import tool_main

        @tool_main
        def main():
            dist.init_process_group('gloo')
            if dist.get_rank() == 1:
                time.sleep(1)
                os.kill(os.getpid(), signal.SIGKILL)
            # torchrun's SIGTERM could end rank 0 before it says anything (a race under load)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            dist.all_reduce(torch.ones(1))

        main()
    """))
    env = dict(os.environ, OMP_NUM_THREADS='1')
    env.pop('VPN_TRACEBACK', None)
    done = subprocess.run(
        [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2',
         '--master_addr', '127.0.0.1', '--master_port', str(free_port()), str(script)],
        capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert 'error: another process of this distributed run stopped, so rank 0' in output, output
    assert '[rank0]: Traceback' not in output and 'pair.cc' not in output


def test_a_lost_peer_outside_a_distributed_run_keeps_its_traceback(monkeypatch):
    from vpn_plugin.errors import explained_message
    error = RuntimeError('[pair.cc:553] Connection closed by peer [127.0.0.1]:1')
    monkeypatch.setenv('WORLD_SIZE', '1')
    assert explained_message(error) is None
    monkeypatch.setenv('WORLD_SIZE', '2')
    monkeypatch.setenv('RANK', '1')
    assert explained_message(error).startswith('another process of this distributed run '
                                               'stopped, so rank 1 could not go on')
    assert explained_message(RuntimeError('CUDA out of memory')) is None


# ---------------------------------------------------------------------- feature values
def test_a_float64_value_beyond_float32_is_named_as_such(tmp_path):
    """Before: a float64 feature value of 1e300 became inf when read as float32 and was
    reported as "NaN/inf values" (with numpy's overflow RuntimeWarning)."""
    from vpn_plugin.datasets.features import BadVideoError, load_features
    frames = np.zeros((3, 4))
    frames[1, 2] = 1e300
    np.save(tmp_path / 'v.npy', frames)
    with pytest.raises(BadVideoError) as err:
        load_features(tmp_path / 'v.npy', frame_dim=4)
    message = str(err.value)
    assert 'values beyond float32 range' in message and 'in frames [1] (1 frames)' in message
    assert '1e+300' in message and 'NaN/inf' not in message


def test_a_float64_inf_is_still_named_inf(tmp_path):
    from vpn_plugin.datasets.features import BadVideoError, load_features
    frames = np.zeros((3, 4))
    frames[2, 0] = np.inf
    np.save(tmp_path / 'v.npy', frames)
    with pytest.raises(BadVideoError, match=r'NaN/inf values in frames \[2\]'):
        load_features(tmp_path / 'v.npy', frame_dim=4)


# ---------------------------------------------------------------------- model sizes
@pytest.mark.parametrize('option, expected', [
    ('num_negatives', 'model.num_negatives=1000000000; expected an integer >= 1 and <= 10000'),
    ('top_k', 'model.top_k=1000000000; expected an integer >= 1 and <= 10000'),
    ('horizon', 'model.horizon=1000000000; expected an integer >= 1 and <= 1024'),
])
def test_cefito_sizes_of_a_billion_are_refused_when_built(cefito_model_cfg, option, expected):
    """Before: num_negatives and top_k of 10**9 built (and failed allocating, or searched for
    hours, later); horizon 10**9 was a torch allocation error."""
    from mmaction.registry import MODELS
    with pytest.raises(ValueError) as err:
        MODELS.build(dict(cefito_model_cfg, **{option: 10 ** 9}))
    assert expected in str(err.value)


def test_a_missing_pretrained_encoder_names_the_option(shared_data, tmp_path):
    """Before: SCHEMA init_visual_from='x' stopped with mmengine's "x can not be found."."""
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import MODELS
    from vpn_plugin.data_paths import load_config
    model = load_config('configs/baselines/schema_niv_t3.py').model
    with pytest.raises(FileNotFoundError, match=r"SCHEMA: model.init_visual_from='x' does not "
                                                r"exist; expected the path of a planner"):
        MODELS.build(dict(model, init_visual_from='x'))
    with pytest.raises(OSError, match=r'model.init_visual_from .* is a folder, not a regular'):
        MODELS.build(dict(model, init_visual_from=str(tmp_path)))


def test_a_rank_stopped_from_outside_is_not_blamed_on_torchrun():
    """Before: rank 1 of dist_extract.sh 2 stopped by a `kill` (SIGTERM) from outside was
    summarised 'stopped by torchrun then: rank 0 (SIGTERM), rank 1 (SIGTERM)', as if nothing
    had gone wrong but torchrun."""
    from types import SimpleNamespace
    from tool_modules import load_tool
    summary = load_tool('dist_run').failure_summary
    failures = {0: SimpleNamespace(exitcode=-15), 1: SimpleNamespace(exitcode=-15)}
    assert summary(failures) == ('no rank failed on its own: a SIGTERM from outside the run '
                                 '(a kill, the job scheduler) stopped one, then torchrun the '
                                 'others: rank 0 (SIGTERM), rank 1 (SIGTERM)')


# ---------------------------------------------------------------------- extraction
def test_a_video_name_that_is_no_readable_file_is_listed_and_failed_by_name(tmp_path):
    """Before: tools/extract_features.py (and dist_extract.sh 2) on a folder holding a dangling
    link y.mp4 (or a FIFO z.mp4) beside its videos left it out without a word and exited 0."""
    from vpn_plugin.video import list_videos
    from vpn_plugin.video.decode import UnreadableVideoError, probe_video
    (tmp_path / 'a.mp4').write_bytes(b'x')
    (tmp_path / 'y.mp4').symlink_to(tmp_path / 'gone.mp4')
    os.mkfifo(tmp_path / 'z.mp4')
    (tmp_path / 'x.mp4').mkdir()  # a folder named like a video is searched, not listed
    (tmp_path / 'x.mp4' / 'b.mp4').write_bytes(b'x')
    listed = list_videos([tmp_path])
    assert [p.relative_to(tmp_path).as_posix() for p in listed] == [
        'a.mp4', 'x.mp4/b.mp4', 'y.mp4', 'z.mp4']
    with pytest.raises(UnreadableVideoError, match='y.mp4: a symbolic link to .*gone.mp4, '
                       'which leads to no file'):
        probe_video(tmp_path / 'y.mp4')
    with pytest.raises(UnreadableVideoError, match=r'z.mp4: not a regular file \(a FIFO\)'):
        probe_video(tmp_path / 'z.mp4')


def test_torchrun_stopped_by_a_signal_ends_in_one_line(tmp_path):
    """Before: SIGTERM to a dist_extract.sh run (kill, the job scheduler) ended it with
    torch's ~20-line SignalException traceback of the launcher."""
    import signal
    import time
    script = tmp_path / 'wait.py'
    # each worker marks that it runs: the launcher then has its signal handlers (a fixed wait
    # sent the signal before they were set on a loaded machine: killed, exit status -15)
    script.write_text('import os, pathlib, time\n'
                      f'pathlib.Path({str(tmp_path)!r}, os.environ["RANK"]).touch()\n'
                      'time.sleep(120)\n')
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=str(REPO_ROOT))
    launcher = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / 'tools' / 'dist_run.py'), '--nproc_per_node', '2',
         '--master_addr', '127.0.0.1', '--master_port', str(free_port()), str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while not all((tmp_path / rank).exists() for rank in '01'):
        assert launcher.poll() is None and time.monotonic() < deadline, 'workers never started'
        time.sleep(0.2)
    launcher.send_signal(signal.SIGTERM)
    _, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == 128 + signal.SIGTERM, stderr
    assert f'{script}: torchrun was stopped by SIGTERM' in stderr
    assert 'Traceback' not in stderr and 'SignalException' not in stderr


def test_a_fixture_given_as_its_meta_file_names_the_folder(tmp_path):
    """Before: check_reference.py FIXTURE/meta.json said '.../meta.json/meta.json: no
    meta.json'."""
    from vpn_plugin.oracles.compare import read_fixture_meta
    (tmp_path / 'meta.json').write_text('{}')
    with pytest.raises(NotADirectoryError, match=rf'fixture {tmp_path}/meta.json is a regular '
                                                 rf'file; expected the fixture folder .*{tmp_path}\)'):
        read_fixture_meta(tmp_path / 'meta.json')


def test_an_out_folder_below_a_file_names_the_file(tmp_path):
    """Before: dist_extract.sh 2 ... --out afile/x stopped with "[Errno 20] Not a directory:
    'afile/x'" (no flag, nor which part is a file)."""
    from vpn_plugin.video import FrameRecipe, extract_videos
    (tmp_path / 'afile').write_text('x')
    with pytest.raises(NotADirectoryError, match=rf'--out {tmp_path}/afile/x/y: '
                                                 rf'{tmp_path}/afile is a regular file, not a'):
        extract_videos(None, [], tmp_path / 'afile' / 'x' / 'y', FrameRecipe(size=16))


def test_a_second_naming_into_one_folder_is_refused(tmp_path):
    """Before: dist_extract.sh 2 VIDEOS --out F, then the same with --naming parent_stem into F,
    wrote every video a second time (a.npz and v_a.npz side by side), exit 0."""
    import json
    from types import SimpleNamespace
    from tool_modules import load_tool
    from vpn_plugin.video import FrameRecipe
    from vpn_plugin.video.extract import MANIFEST, check_manifest, write_manifest

    def settings(naming):
        args = SimpleNamespace(weights=None, random_weights=True, naming=naming)
        return load_tool('extract_features').settings_of(args, FrameRecipe(size=16))
    check_manifest(tmp_path, settings('stem'))
    write_manifest(tmp_path, settings('stem'))
    check_manifest(tmp_path, settings('stem'))  # a resume
    with pytest.raises(ValueError, match=r"extraction.json: the features in .* were extracted "
                                         r"with other settings .*\(naming: 'stem' there, "
                                         r"'parent_stem' asked now\)"):
        check_manifest(tmp_path, settings('parent_stem'))
    old = {k: v for k, v in settings('stem').items() if k != 'naming'}
    (tmp_path / MANIFEST).write_text(json.dumps(old))  # recorded before naming was
    check_manifest(tmp_path, settings('stem'))


def test_a_video_replaced_under_its_name_is_not_counted_done(tmp_path):
    """Before: a video replaced by another under the same name (a re-encode, a re-download of
    another clip) kept the features of the old one on resume: "3 already there", exit 0."""
    import torch
    from test_extract_features import write_video
    from vpn_plugin.apis import init_s3d
    from vpn_plugin.video import FrameRecipe, extract_videos
    video, out = tmp_path / 'a.mp4', tmp_path / 'out'
    write_video(video, 16)
    torch.manual_seed(0)
    s3d = init_s3d(random_weights=True)
    recipe = FrameRecipe(size=16)
    assert extract_videos(s3d, [video], out, recipe, num_workers=0).done == ['a']
    assert extract_videos(s3d, [video], out, recipe, num_workers=0).skipped == ['a']
    write_video(video, 40, seed=3)
    with pytest.raises(ValueError, match=r'a.npz: already there, but not a complete feature '
                                         r'file of this extraction \(made from .*a.mp4 when it '
                                         r'had \d+ bytes; .*a.mp4 has \d+ now'):
        extract_videos(s3d, [video], out, recipe, num_workers=0)

"""vpn_plugin.video and tools/extract_features.py on tiny videos written by opencv, with S3D
built with random weights at a small input size (the network's function is checked against
the official fixture in test_s3d.py; here: frames, rows, padding, files, failures, resuming,
sharding over two processes, and tools/plan.py --video end to end)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from vpn_plugin.apis import init_s3d
from vpn_plugin.datasets.features import load_features, read_feature_record
from vpn_plugin.video import (FrameRecipe, decode_video, extract_videos, frames_to_chunks,
                              list_videos, shard)

REPO = Path(__file__).resolve().parents[1]
SIZE = 16  # frame side: the smallest S3D input these tests need (16 px -> 1 x 1 at mixed_5c)
RECIPE = FrameRecipe(size=SIZE)
FRAMES = {'forty': 40, 'one': 1, 'ten': 10, 'thirty_two': 32}  # at 16 fps


def write_video(path: Path, frames: int, width: int = 40, height: int = 30, seed: int = 0):
    import cv2
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), 16, (width, height))
    rng = np.random.default_rng(seed)
    for _ in range(frames):  # flat colours: survive the codec, differ between frames
        writer.write(np.full((height, width, 3), rng.integers(0, 256, 3), np.uint8))
    writer.release()


@pytest.fixture(scope='module')
def videos(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp('videos')
    for seed, (name, frames) in enumerate(FRAMES.items()):
        write_video(folder / f'{name}.mp4', frames, seed=seed)
    return folder


@pytest.fixture(scope='module')
def s3d():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield init_s3d(random_weights=True)
    torch.set_num_threads(threads)


def rows_by_hand(s3d, frames: np.ndarray) -> np.ndarray:
    """Each 16-frame chunk alone (the last padded with black frames by hand) through S3D."""
    rows = []
    for begin in range(0, len(frames), 16):
        chunk = np.zeros((16,) + frames.shape[1:], np.uint8)
        part = frames[begin:begin + 16]
        chunk[:len(part)] = part
        video = torch.from_numpy(chunk).permute(3, 0, 1, 2)[None].float() / 255
        with torch.no_grad():
            rows.append(s3d(video)['video_embedding'][0].numpy())
    return np.stack(rows)


def test_decoding_gives_the_frame_count_and_the_recipe_size(videos):
    for name, frames in FRAMES.items():
        decoded = decode_video(videos / f'{name}.mp4', RECIPE)
        assert decoded.shape == (frames, SIZE, SIZE, 3) and decoded.dtype == np.uint8
    # 8 fps halves the frames; the file's own rate keeps them
    assert len(decode_video(videos / 'forty.mp4', FrameRecipe(size=SIZE, fps=8))) == 20
    assert len(decode_video(videos / 'forty.mp4', FrameRecipe(size=SIZE, fps=None))) == 40
    # the default JPEG round trip changes the pixels a little, and only a little
    raw = decode_video(videos / 'forty.mp4', FrameRecipe(size=64, jpeg_quality=None))
    jpeg = decode_video(videos / 'forty.mp4', FrameRecipe(size=64))
    difference = np.abs(raw.astype(int) - jpeg.astype(int))
    assert difference.max() > 0 and difference.mean() < 3


def test_the_centre_square_is_cropped_whatever_the_orientation(tmp_path):
    """Three bands of colour across the long side: only the middle one survives the centre
    crop of side min(w, h), the whole frame without crop."""
    import cv2
    colours = np.array([[0, 0, 255], [0, 255, 0], [255, 0, 0]], np.uint8)  # BGR: red green blue
    for name, (height, width) in (('landscape', (32, 96)), ('portrait', (96, 32))):
        frame = np.zeros((height, width, 3), np.uint8)
        for band in range(3):
            if width > height:
                frame[:, band * 32:(band + 1) * 32] = colours[band]
            else:
                frame[band * 32:(band + 1) * 32] = colours[band]
        writer = cv2.VideoWriter(str(tmp_path / f'{name}.avi'), cv2.VideoWriter_fourcc(*'MJPG'),
                                 16, (width, height))
        for _ in range(4):
            writer.write(frame)
        writer.release()
        centre = decode_video(tmp_path / f'{name}.avi', FrameRecipe(size=16, jpeg_quality=None))
        assert centre.shape == (4, 16, 16, 3)
        np.testing.assert_allclose(centre[..., 1].mean(), 255, atol=8)  # green only
        assert centre[..., [0, 2]].mean() < 8
        whole = decode_video(tmp_path / f'{name}.avi',
                             FrameRecipe(size=48, crop='none', jpeg_quality=None))
        assert whole[..., 0].max() > 200 and whole[..., 2].max() > 200  # red and blue too


def test_the_last_chunk_is_padded_with_black_frames():
    frames = np.arange(20 * 4 * 4 * 3, dtype=np.int64).reshape(20, 4, 4, 3) % 251 + 1
    chunks = frames_to_chunks(frames.astype(np.uint8), 16)
    assert chunks.shape == (2, 3, 16, 4, 4)
    assert torch.equal(chunks[1, :, 4:], torch.zeros(3, 12, 4, 4))
    assert torch.equal(chunks[1, :, :4], torch.from_numpy(frames[16:]).permute(3, 0, 1, 2)
                       .float() / 255)
    assert (chunks[1, :, :4] > 0).all()


def test_extraction_writes_one_row_per_chunk_equal_to_s3d_per_chunk(videos, s3d, tmp_path):
    result = extract_videos(s3d, list_videos([videos]), tmp_path, RECIPE, num_workers=0,
                            batch_chunks=2, extra=dict(usable=np.bool_(False)))
    assert sorted(result.done) == sorted(FRAMES) and not result.failed
    for name, frames in FRAMES.items():
        features = load_features(tmp_path / f'{name}.npz', 512, name)  # the datasets' reader
        assert features.shape == (-(-frames // 16), 512)
        expected = rows_by_hand(s3d, decode_video(videos / f'{name}.mp4', RECIPE))
        np.testing.assert_allclose(features, expected, rtol=0, atol=1e-5)
        record = read_feature_record(tmp_path / f'{name}.npz')
        assert int(record['num_frames']) == frames and not bool(record['usable'])
        assert json.loads(str(record['recipe']))['fps'] == 16
    assert not list(tmp_path.glob('.*partial*')) and not (tmp_path / 'failures.tsv').exists()


def test_a_bad_file_among_good_ones_is_listed_and_the_rest_resumes(videos, s3d, tmp_path):
    from vpn_plugin.video import merge_failures
    folder = tmp_path / 'in'
    folder.mkdir()
    for name in ('one', 'ten'):
        (folder / f'{name}.mp4').write_bytes((videos / f'{name}.mp4').read_bytes())
    (folder / 'corrupt.mp4').write_bytes(b'\x00\x00\x00\x18ftypmp42 not really a video')
    half = (videos / 'forty.mp4').read_bytes()
    (folder / 'truncated.mp4').write_bytes(half[:len(half) // 3])
    out = tmp_path / 'out'
    result = extract_videos(s3d, list_videos([folder]), out, RECIPE, num_workers=1)
    assert sorted(result.done) == ['one', 'ten']
    assert sorted(Path(v).name for v in result.failed) == ['corrupt.mp4', 'truncated.mp4']
    lines = merge_failures(out, 1)
    assert [line.split('\t')[0] for line in lines] == [str(folder / 'corrupt.mp4'),
                                                      str(folder / 'truncated.mp4')]
    assert all(line.split('\t')[1] for line in lines)
    assert (out / 'failures.tsv').read_text().count('\n') == 2
    assert sorted(p.name for p in out.iterdir()) == ['extraction.json', 'failures.tsv',
                                                    'one.npz', 'ten.npz']
    # resumed: only the missing video is extracted
    (out / 'ten.npz').unlink()
    (out / '.ten.npz.partial-host-1').write_bytes(b'left by a killed run')
    (folder / 'corrupt.mp4').unlink()
    (folder / 'truncated.mp4').unlink()
    again = extract_videos(s3d, list_videos([folder]), out, RECIPE, num_workers=0)
    assert again.done == ['ten'] and again.skipped == ['one'] and not again.failed
    assert not merge_failures(out, 1) and not (out / 'failures.tsv').exists()
    assert not list(out.glob('.*partial*'))
    with pytest.raises(ValueError, match=r'extraction\.json.*another --out folder'):
        extract_videos(s3d, list_videos([folder]), out, FrameRecipe(size=SIZE, fps=8),
                       num_workers=0)


class DiesAtCall(torch.nn.Module):
    """S3D that dies (as a killed process would stop) at its ``n``-th call."""

    def __init__(self, s3d, n: int):
        super().__init__()
        self.s3d, self.n, self.calls = s3d, n, 0

    def forward(self, video):
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt('killed')
        return self.s3d(video)


def test_a_killed_run_loses_only_the_video_in_flight(videos, s3d, tmp_path):
    """forty (3 chunks, 3 calls at batch 1) is written, one (1 call) too; the run dies inside
    ten; thirty_two never started. The next run extracts exactly ten and thirty_two."""
    order = list_videos([videos])  # forty, one, ten, thirty_two
    with pytest.raises(KeyboardInterrupt):
        extract_videos(DiesAtCall(s3d, 5), order, tmp_path, RECIPE, num_workers=0,
                       batch_chunks=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['extraction.json', 'forty.npz',
                                                         'one.npz']
    again = extract_videos(s3d, order, tmp_path, RECIPE, num_workers=0)
    assert sorted(again.done) == ['ten', 'thirty_two'] and sorted(again.skipped) == ['forty',
                                                                                      'one']


def test_shards_partition_the_list():
    items = list(range(11))
    parts = [shard(items, rank, 3) for rank in range(3)]
    assert sorted(sum(parts, [])) == items
    assert all(not set(a) & set(b) for i, a in enumerate(parts) for b in parts[i + 1:])


def run(command, cwd, env_extra=None, timeout=300):
    import os
    env = {**os.environ, 'PYTHONPATH': str(REPO), 'OMP_NUM_THREADS': '1',
           'CUDA_VISIBLE_DEVICES': '', **(env_extra or {})}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.skipif(torch.cuda.is_available(), reason='two CPU processes (gloo)')
def test_two_processes_split_one_list_without_overlap_or_gap(videos, tmp_path):
    from test_tools_cli import free_port
    out = tmp_path / 'out'
    result = run(['bash', str(REPO / 'tools/dist_extract.sh'), '2', str(videos), '--out',
                  str(out), '--random-weights', '--size', str(SIZE), '--num-workers', '0'],
                 tmp_path, {'PORT': str(free_port()), 'PYTHON': sys.executable})
    assert result.returncode == 0, result.stderr[-3000:]
    written = {}
    for line in result.stdout.splitlines():
        if line.startswith('rank '):
            written[line.split(':')[0]] = int(line.split(': ')[1].split(' written')[0])
    assert written == {'rank 0/2': 2, 'rank 1/2': 2}  # 4 videos: two each, none twice
    assert sorted(p.stem for p in out.glob('*.npz')) == sorted(FRAMES)
    assert 'UNUSABLE' in result.stdout and 'chunks/s' in result.stderr
    assert f'temporary files: each <name>.npz is written as {out}/.<name>.npz.partial-' \
        in result.stderr


def test_every_rank_checks_the_folder_before_any_rank_writes(videos, s3d, tmp_path):
    """CI: under load, rank 1 wrote its first feature file before rank 0 checked --out, and
    rank 0 refused the folder as someone else's (feature files but no extraction.json); then
    rank 1 checked --out while rank 0 wrote extraction.json (its temporary file there). Every
    rank checks, a barrier, rank 0 writes the record, a barrier, then the features."""
    def extract(rank):
        seen = []
        extract_videos(s3d, list_videos([videos]), tmp_path, RECIPE, num_workers=0, rank=rank,
                       world_size=2, barrier=lambda: seen.append(sorted(os.listdir(tmp_path))))
        return seen
    assert extract(0) == [[], ['extraction.json']]  # checked untouched; the record, no feature
    assert extract(1)[0][0] == 'extraction.json'
    assert len(list(tmp_path.glob('*.npz'))) == 4


def test_progress_counts_chunks_against_the_videos_durations(videos, s3d, tmp_path):
    """Issue 38: a progress line per chunk batch (not per video), its total from the videos'
    headers (forty 3 chunks, one 1, ten 1, thirty_two 2: 7), and where temporary files go."""
    import io
    from vpn_plugin.video.decode import expected_frames, probe_video
    header = probe_video(videos / 'forty.mp4')
    assert expected_frames(header, RECIPE) == 40
    assert expected_frames(header, FrameRecipe(size=SIZE, fps=None)) == 40  # its 16 fps
    stream = io.StringIO()
    extract_videos(s3d, list_videos([videos]), tmp_path, RECIPE, num_workers=0, batch_chunks=1,
                   progress_stream=stream)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith(f'[rank 0] 4 videos to extract into {tmp_path} (0 already '
                               f'there); temporary files: each <name>.npz is written as '
                               f'{tmp_path}/.<name>.npz.partial-')
    assert lines[1].startswith('[rank 0] S3D features: 1/12 chunks (8%)')  # 3 x 4 guessed
    assert ', 0/4 videos done, in flight: forty' in lines[1]
    assert lines[-1].startswith('[rank 0] S3D features: 7/7 chunks (100%)')


def test_chunk_progress_refines_its_total_and_eta():
    import io
    from vpn_plugin.video.extract import Progress
    now, stream = [0.0], io.StringIO()
    progress = Progress(3, 0, stream, interval=5, clock=lambda: now[0])
    progress.expect(0, 10)            # 10 + 2 videos x 10
    now[0] = 2.0
    progress.chunks(2, 'a')           # first line: 2/30, 1 chunk/s
    now[0] = 4.0
    progress.chunks(2, 'a')           # within the interval: no line
    progress.video_done(0, 4)         # a gave 4 chunks, not 10: 4 + 2 x 10
    progress.expect(1, 2)             # 4 + 2 + 1 x mean(4, 2)
    now[0] = 8.0
    progress.chunks(2, 'b')
    assert stream.getvalue().splitlines() == [
        '[rank 0] S3D features: 2/30 chunks (7%), 0:00:02 elapsed, ETA 0:00:28, 1.00 chunks/s, '
        '0/3 videos done, in flight: a',
        '[rank 0] S3D features: 6/9 chunks (67%), 0:00:08 elapsed, ETA 0:00:04, 0.75 chunks/s, '
        '1/3 videos done, in flight: b']


def test_plan_tool_from_a_video_with_random_weights(tiny_crosstask, tmp_path, capsys):
    from test_apis import tiny_vpn_config
    from tool_modules import load_tool
    from vpn_plugin.apis import init_planner
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    torch.manual_seed(0)
    from tiny_configs import save_recorded
    save_recorded(init_planner(str(config)), tmp_path / 'tiny.pth', tiny_crosstask['test_dataset'])
    video = tmp_path / 'my.mp4'
    write_video(video, 16 * 5)
    load_tool('plan').main([str(config), '--checkpoint', str(tmp_path / 'tiny.pth'), '--video',
                            str(video), '--start-time', '1', '--goal-time', '4', '--size',
                            str(SIZE), '--random-weights', '--save-features',
                            str(tmp_path / 'f.npz'), '--task', 'Make Jello Shots'])
    out = capsys.readouterr()
    lines = out.out.splitlines()
    lines = lines[[i for i, line in enumerate(lines) if line.startswith('*** UNUSABLE')][0]:]
    assert 'UNUSABLE' in out.err and lines.count(lines[0]) == 2  # above and below the plan
    assert 'video' in lines[1] and '5 s of S3D features' in lines[1]
    # issue 38: where the task comes from (given with the video; the planner's task head)
    assert lines[2] == 'task: Make Jello Shots (given)'
    assert lines[3].startswith("the planner's own task: ") and lines[3].endswith(
        '(predicted by the task head, score ' + lines[3].split('score ')[1])
    assert lines[3].endswith('; the plan does not depend on it)')
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    names = set(load_taxonomy(tiny_crosstask['taxonomy']).action_names)
    steps = [line.strip().split(None, 1) for line in lines if line.startswith('  ')]
    assert [int(s[0]) for s in steps] == [1, 2, 3] and all(s[1] in names for s in steps)
    record = read_feature_record(tmp_path / 'f.npz')
    assert record['frames_features'].shape == (5, 512) and not bool(record['usable'])
    assert 'UNUSABLE' in str(record['warning'])
    # issue 38: the same plan from the saved features, no video, no S3D; UNUSABLE carried
    load_tool('plan').main([str(config), '--checkpoint', str(tmp_path / 'tiny.pth'),
                            '--features', str(tmp_path / 'f.npz'), '--start-time', '1',
                            '--goal-time', '4'])
    again = capsys.readouterr().out.splitlines()
    again = again[[i for i, line in enumerate(again) if line.startswith('*** UNUSABLE')][0]:]
    assert again[1].startswith(f'features {tmp_path / "f.npz"}: 5 s of S3D features; plan '
                               'from the state at 1 s to the state at 4 s')
    assert [line for line in again if line.startswith('  ')] == [
        line for line in lines if line.startswith('  ')]
    np.savez(tmp_path / 'usable.npz', frames_features=record['frames_features'])
    load_tool('plan').main([str(config), '--checkpoint', str(tmp_path / 'tiny.pth'),
                            '--features', str(tmp_path / 'usable.npz'), '--start-time', '1',
                            '--goal-time', '4'])
    assert 'UNUSABLE' not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        load_tool('plan').main([str(config), '--checkpoint', str(tmp_path / 'tiny.pth'),
                                '--features', str(tmp_path / 'f.npz'), '--start-time', '1',
                                '--goal-time', '4', '--random-weights'])
    assert '--random-weights: for --video only' in capsys.readouterr().err
    # no config given: the one in the checkpoint's meta (tools/train.py); no S3D weights: where
    from mmengine.config import Config
    checkpoint = torch.load(tmp_path / 'tiny.pth', weights_only=True)
    checkpoint['meta'] = dict(cfg=Config.fromfile(str(config)).pretty_text)
    torch.save(checkpoint, tmp_path / 'trained.pth')
    with pytest.raises(SystemExit, match=r'no S3D weights were given.*S3D_HowTo100M.*'
                       r's3d_howto100m\.pth'):
        load_tool('plan').main(['--checkpoint', str(tmp_path / 'trained.pth'), '--video',
                                str(video), '--start-time', '1', '--goal-time', '4'])
    with pytest.raises(SystemExit, match=r'holds no config.*give the config file'):
        load_tool('plan').main(['--checkpoint', str(tmp_path / 'tiny.pth'), '--video',
                                str(video), '--start-time', '1', '--goal-time', '4'])


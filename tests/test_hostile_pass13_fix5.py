"""Hostile pass 13 (fix5): the blocks the tenth pass never reached: authors' checkpoint
conversion, EgoPER conversion, S3D extraction on tiny videos, the observation cache.
Each test fails on 230a96d."""
import numpy as np
import pytest
import torch

from vpn_plugin.oracles.authors import read_authors_state_dict


def _state(tmp_path):
    return {'state_encoder.logit_scale': np.float16(2.5) * np.ones(()),
            'task_decoder.0.weight': np.ones((3, 4), np.float16)}


@pytest.mark.parametrize('suffix', ['.npz', '.pth'])
@pytest.mark.parametrize('bad, expected', [
    (np.nan, r"task_decoder\.0\.weight holds 1 NaN/inf value\(s\) \(first at index \(1, 2\)"),
    (np.inf, r"task_decoder\.0\.weight holds 1 NaN/inf value\(s\)")])
def test_k17_non_finite_official_weights_are_refused_by_name(tmp_path, suffix, bad, expected):
    """K17: an authors' state dict with a NaN weight was converted (rc 0) into a checkpoint
    that plans nothing, without a word."""
    state = _state(tmp_path)
    state['task_decoder.0.weight'] = state['task_decoder.0.weight'].astype(np.float32)
    state['task_decoder.0.weight'][1, 2] = bad
    path = tmp_path / f'theirs{suffix}'
    if suffix == '.npz':
        np.savez(path, **state)
    else:
        torch.save({k: torch.from_numpy(np.asarray(v)) for k, v in state.items()}, path)
    with pytest.raises(ValueError, match=f'{path}: ' + expected):
        read_authors_state_dict(path)


def test_k9_truncated_and_k24_string_state_dicts_are_named(tmp_path):
    """K9: a truncated .npz SRC ended in a BadZipFile traceback; K24: string parameters in
    'could not convert string to float' without file or parameter."""
    whole = tmp_path / 'whole.npz'
    np.savez(whole, **_state(tmp_path))
    cut = tmp_path / 'cut.npz'
    cut.write_bytes(whole.read_bytes()[:150])
    with pytest.raises(ValueError, match=f'{cut}: cannot read the recorded arrays'):
        read_authors_state_dict(cut)
    strings = tmp_path / 'strings.npz'
    np.savez(strings, **dict(_state(tmp_path), **{'task_decoder.0.weight': np.array(['a'] * 3)}))
    with pytest.raises(ValueError, match=f"{strings}: parameter 'task_decoder.0.weight' is a <U1 "
                       "array; expected the official model's real-valued weights"):
        read_authors_state_dict(strings)


def _damaged_video(path):
    """A 96-frame video with 3000 bytes zeroed a third of the way in: ffmpeg decodes it to
    the end, reporting errors."""
    import cv2
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), 16, (40, 30))
    rng = np.random.default_rng(0)
    for _ in range(96):
        writer.write(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8))
    writer.release()
    data = bytearray(path.read_bytes())
    data[len(data) // 3:len(data) // 3 + 3000] = bytes(3000)
    path.write_bytes(bytes(data))
    return path


def test_x6_a_video_ffmpeg_decodes_with_errors_is_named_counted_and_recorded(tmp_path):
    """X6: a video with damaged data in the middle was extracted (rc 0, all frames) with
    ffmpeg's error lines thrown away: features of concealed frames without a word."""
    import warnings
    from vpn_plugin.apis import init_s3d
    from vpn_plugin.datasets.features import load_features, read_feature_record
    from vpn_plugin.video import FrameRecipe, decode_video, extract_videos
    recipe = FrameRecipe(size=16)
    videos = tmp_path / 'videos'
    videos.mkdir()
    damaged = _damaged_video(videos / 'damaged.mp4')
    clean = videos / 'clean.mp4'
    import cv2
    writer = cv2.VideoWriter(str(clean), cv2.VideoWriter_fourcc(*'mp4v'), 16, (40, 30))
    for value in range(20):
        writer.write(np.full((30, 40, 3), value * 10, np.uint8))
    writer.release()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        decode_video(clean, recipe)  # no word on a clean file
    with pytest.warns(UserWarning, match=r'damaged\.mp4: ffmpeg decoded it but reported \d+ '
                      r'error line\(s\)'):
        decode_video(damaged, recipe)
    import io
    stream = io.StringIO()
    result = extract_videos(init_s3d(random_weights=True), [clean, damaged], tmp_path / 'out',
                            recipe, num_workers=0, progress_stream=stream)
    assert sorted(result.done) == ['clean', 'damaged'] and list(result.damaged) == [str(damaged)]
    assert f'WARNING: {damaged}: ffmpeg decoded it but reported' in stream.getvalue()
    assert 'damage' in read_feature_record(tmp_path / 'out' / 'damaged.npz')
    assert 'damage' not in read_feature_record(tmp_path / 'out' / 'clean.npz')
    assert load_features(tmp_path / 'out' / 'damaged.npz', 512, 'damaged').shape == (6, 512)


def _flat_video(path, frames, value):
    import cv2
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), 16, (40, 30))
    for index in range(frames):
        writer.write(np.full((30, 40, 3), (value + 7 * index) % 256, np.uint8))
    writer.release()
    return path


def test_x22_a_video_replaced_by_another_of_the_same_size_is_not_resumed_as_done(tmp_path):
    """X22: a.mp4 extracted, then replaced by another video padded to the same byte count:
    the resume skipped it as 'already there' and kept the old video's features."""
    import os
    from vpn_plugin.apis import init_s3d
    from vpn_plugin.video import FrameRecipe, extract_videos
    recipe, s3d = FrameRecipe(size=16), init_s3d(random_weights=True)
    videos = tmp_path / 'videos'
    videos.mkdir()
    first = _flat_video(videos / 'a.mp4', 40, 0)
    other = _flat_video(tmp_path / 'other.mp4', 20, 100)
    extract_videos(s3d, [first], tmp_path / 'out', recipe, num_workers=0)
    os.utime(first, ns=(10**18, 10**18))  # touched, same content: still resumed
    assert extract_videos(s3d, [first], tmp_path / 'out', recipe, num_workers=0).skipped == ['a']
    size, stat = first.stat().st_size, first.stat()
    data = other.read_bytes()
    assert len(data) < size
    first.write_bytes(data + bytes(size - len(data)))
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime restored too
    with pytest.raises(ValueError, match=r'a\.npz: already there, but not a complete feature '
                       r'file of this extraction \(made from .*a\.mp4 when its content had '
                       r'SHA-256 [0-9a-f]{16}\.\.\.; .*a\.mp4 has other content now'):
        extract_videos(s3d, [first], tmp_path / 'out', recipe, num_workers=0)


def test_h1b_a_truncated_video_decoded_in_part_is_named_with_the_chunks_it_lost(tmp_path):
    """H1b: a 6 s video (index at the front) cut in half gave 2 of its 6 rows with rc 0 and
    no word."""
    import io
    import subprocess
    import imageio_ffmpeg
    from vpn_plugin.apis import init_s3d
    from vpn_plugin.video import FrameRecipe, extract_videos
    video = tmp_path / 'cut.mp4'
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), '-loglevel', 'error', '-y', '-f', 'lavfi',
                    '-i', 'testsrc=size=64x48:rate=16', '-t', '6', '-movflags', 'faststart',
                    str(video)], check=True)
    video.write_bytes(video.read_bytes()[:video.stat().st_size // 2])
    stream = io.StringIO()
    result = extract_videos(init_s3d(random_weights=True), [video], tmp_path / 'out',
                            FrameRecipe(size=16), num_workers=0, progress_stream=stream)
    assert list(result.damaged) == [str(video)]
    assert 'ffmpeg decoded it but reported' in stream.getvalue()
    assert 'of the 6 chunks its header states' in stream.getvalue()


def test_h5_two_egoper_conversions_into_one_out_cannot_mix(tmp_path, monkeypatch):
    """H5: two convert_egoper runs (--errors drop / keep) into one --out wrote their five files
    one by one, unlocked: train.json of one choice could sit beside conversion.json and
    dataset.py of the other. Now one run holds --out's lock and writes all files or none."""
    import sys
    sys.path.insert(0, str(__import__('pathlib').Path(__file__).parent))
    from test_egoper import write_egoper
    from tool_modules import load_tool
    from vpn_plugin.locks import lock_path_of
    write_egoper(tmp_path)
    argv = [str(tmp_path / 'annotation.json'), '--split-dir', str(tmp_path / 'splits'),
            '--out', str(tmp_path / 'out'), '--errors', 'drop']
    import multiprocessing
    ready, release = multiprocessing.Event(), multiprocessing.Event()
    holder = multiprocessing.get_context('fork').Process(
        target=_hold_lock, args=(lock_path_of(tmp_path / 'out'), ready, release))
    holder.start()
    try:
        assert ready.wait(20)
        with pytest.raises(SystemExit, match=r'--out .*out \(an EgoPER conversion\) is in '
                           r'use by another process'):
            load_tool('convert_egoper').main(argv)
    finally:
        release.set()
        holder.join(20)
    assert not (tmp_path / 'out').exists()
    import vpn_plugin.errors as errors
    load_tool('convert_egoper').main(argv)
    before = {p.name: p.read_text() for p in (tmp_path / 'out').iterdir()}

    def fail_midway(*args, **kwargs):
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(errors, 'replace_all_atomically', fail_midway)
    with pytest.raises(SystemExit, match='No space left'):
        load_tool('convert_egoper').main(argv[:-1] + ['keep'])
    assert {p.name: p.read_text() for p in (tmp_path / 'out').iterdir()} == before


def _hold_lock(path, ready, release):
    from vpn_plugin.locks import exclusive_lock
    with exclusive_lock(path, wait=False):
        ready.set()
        release.wait(20)


def test_h6_flat_and_per_task_split_lists_together_are_refused(tmp_path):
    """H6: splits/training.txt + test.txt (coffee only) beside splits/tea/training.txt and
    test.txt: the per-task lists were ignored without a word (tea's videos 'in no split')."""
    import sys
    sys.path.insert(0, str(__import__('pathlib').Path(__file__).parent))
    from test_egoper import write_egoper
    from vpn_plugin.datasets.egoper import convert_egoper
    write_egoper(tmp_path, per_task=True)
    (tmp_path / 'splits' / 'training.txt').write_text('coffee_u1_a\n')
    (tmp_path / 'splits' / 'test.txt').write_text('coffee_u2_b\n')
    with pytest.raises(ValueError, match=r'--split-dir .*splits: both .*training\.txt and '
                       r'per-task lists \(.*coffee/training\.txt, .*tea/training\.txt\); '
                       'expected one layout'):
        convert_egoper(tmp_path / 'annotation.json', tmp_path / 'splits', tmp_path / 'out',
                       'drop')


def test_c15_a_cache_dir_that_is_a_dangling_symlink_is_made_at_its_target(tmp_path):
    """C15: cache_dir a symbolic link to a folder not made yet stopped in '[Errno 17] File
    exists'; now made at its target, as convert_features' --dst (pass 11 A10)."""
    from vpn_plugin.secret_keys import read_or_make_secret
    link = tmp_path / 'cache'
    link.symlink_to(tmp_path / 'gone' / 'cache')
    key = read_or_make_secret(link / '.cache_key', 'the observation cache key',
                              'observation cache files', 'the observations are read again')
    assert len(key) == 32 and (tmp_path / 'gone' / 'cache' / '.cache_key').is_file()


def test_h37_a_video_with_two_video_streams_is_refused_naming_them(tmp_path):
    """H37: a file with two video streams was extracted from the one ffmpeg picks by its own
    rule, recorded nowhere."""
    import subprocess
    import imageio_ffmpeg
    from vpn_plugin.video import UnreadableVideoError
    from vpn_plugin.video.decode import probe_video
    video = tmp_path / 'two.mp4'
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), '-loglevel', 'error', '-y', '-f', 'lavfi',
                    '-i', 'testsrc=size=64x48:rate=16', '-f', 'lavfi', '-i',
                    'testsrc2=size=32x24:rate=8', '-t', '1', '-map', '0:v', '-map', '1:v',
                    str(video)], check=True)
    with pytest.raises(UnreadableVideoError, match=r'2 video streams \(Video: .*64x48.*; '
                       r'Video: .*32x24.*\); expected one'):
        probe_video(video)

"""Hostile pass 15 (passV: video and feature tools, dataset readers): what it found, each case
with a test that fails on 2d3cae8."""
import json
import re

import numpy as np
import pytest

from test_extract_features import SIZE, s3d  # noqa: F401  (s3d: the random-weights S3D fixture)

from vpn_plugin.datasets.annotations import BadVideoError
from vpn_plugin.datasets.features import load_features
from vpn_plugin.video import FrameRecipe, UnreadableVideoError, extract_videos


def write_video(path, frames: int, fps: int):
    import cv2
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), fps, (40, 30))
    rng = np.random.default_rng(fps)
    for _ in range(frames):
        writer.write(np.full((30, 40, 3), rng.integers(0, 256, 3), np.uint8))
    writer.release()
    return path




def test_native_fps_rows_that_are_not_seconds_are_refused_per_video(s3d, tmp_path):
    """passV H3: --native-fps on a 30 fps video made 16-frame rows of 0.53 s, written with exit 0
    and read by every reader as seconds (a 2 s clip: '4 s of features'). Now that video fails by
    name (failures), a 16 fps one is written with the rate it was judged at, and reads."""
    fast = write_video(tmp_path / 'fast.mp4', 60, 30)  # 2 s at 30 fps
    slow = write_video(tmp_path / 'slow.mp4', 32, 16)  # 2 s at 16 fps
    out = tmp_path / 'out'
    result = extract_videos(s3d, [fast, slow], out, FrameRecipe(fps=None, size=SIZE),
                            num_workers=0)
    assert list(result.failed) == [str(fast)]
    assert 'one feature row per 0.5333 s' in result.failed[str(fast)]
    assert "the file's own 30 fps (--native-fps)" in result.failed[str(fast)]
    assert not (out / 'fast.npz').exists()
    assert float(np.load(out / 'slow.npz')['native_fps']) == 16.0
    assert load_features(out / 'slow.npz', 512).shape == (2, 512)


def test_plan_from_a_native_fps_video_refuses_rows_that_are_not_seconds(s3d, tmp_path):
    """passV H5: tools/plan.py --video CLIP --native-fps planned a 4 s, 30 fps clip as '8 s of
    S3D features' (the state 'at 7 s' read at 3.7 s)."""
    from vpn_plugin.apis.video import video_features
    fast = write_video(tmp_path / 'fast.mp4', 60, 30)
    with pytest.raises(UnreadableVideoError, match=r'fast\.mp4: frame recipe chunk 16 at the '
                       r"file's own 30 fps \(--native-fps\): one feature row per 0.5333 s"):
        video_features(s3d, fast, FrameRecipe(fps=None, size=SIZE))


@pytest.mark.parametrize('fields, message', [
    (dict(recipe=dict(fps=8.0, chunk=16)), 'one feature row per 2 s'),
    (dict(recipe=dict(fps=None, chunk=16)), 'no field "native_fps": the seconds of a row'),
    (dict(recipe=dict(fps=None, chunk=16), native_fps=30.0), 'per 0.5333 s'),
])
def test_the_dataset_reader_reads_the_time_step_of_an_npz(tmp_path, fields, message):
    """passV H25: load_features (every dataset, train and test) read only frames_features of an
    npz, so a file whose recorded recipe gives 2 s per row was trained and tested on as one row
    per second, exit 0 (tools/test.py: SR 57.14 on the shifted rows); pass3's refusal held only
    for plan.py --features and convert_features."""
    path = tmp_path / 'video.npz'
    frames = np.zeros((20, 512), np.float32)
    np.savez(path, frames_features=frames, **{
        key: np.str_(json.dumps(value)) if key == 'recipe' else np.float64(value)
        for key, value in fields.items()})
    with pytest.raises(BadVideoError, match=message):
        load_features(path, 512)


def test_a_native_fps_file_at_its_recorded_rate_reads(tmp_path):
    path = tmp_path / 'video.npz'
    np.savez(path, frames_features=np.zeros((5, 512), np.float32),
             recipe=np.str_(json.dumps(dict(fps=None, chunk=16))), native_fps=np.float64(16))
    assert load_features(path, 512).shape == (5, 512)


def kitchen_copy(tmp_path, edit):
    """examples/custom_dataset/kitchen in ``tmp_path/kitchen`` with ``edit(test entries)``."""
    import shutil
    from pathlib import Path
    source = Path(__file__).resolve().parents[1] / 'examples/custom_dataset/kitchen'
    root = tmp_path / 'kitchen'
    shutil.copytree(source, root)
    entries = json.loads((root / 'test.json').read_text())
    edit(entries)
    (root / 'test.json').write_text(json.dumps(entries))
    return root


def test_a_feature_name_with_a_path_writes_no_file_outside_the_folder(tmp_path):
    """passV H44 (data loss): test.json's "feature": "../../victim/features/precious" made
    make_synthetic_features.py replace victim/features/precious.npz, outside its --out, exit 0
    (and the datasets read such a stem outside their feature folder)."""
    from pathlib import Path
    from tool_modules import load_tool
    victim = tmp_path / 'victim/features/precious.npz'
    victim.parent.mkdir(parents=True)
    np.savez(victim, frames_features=np.ones((5, 512), np.float32))
    before = victim.read_bytes()
    root = kitchen_copy(tmp_path, lambda entries: entries[0].__setitem__(
        'feature', '../../victim/features/precious'))
    config = Path(__file__).resolve().parents[1] / 'examples/custom_dataset/vpn_kitchen_t3.py'
    with pytest.raises(SystemExit) as raised:
        load_tool('make_synthetic_features').main(['--config', str(config), '--data-root',
                                                   str(root), '--out', str(tmp_path / 'syn')])
    assert victim.read_bytes() == before
    assert re.search(r'test\.json: entry 0 \(vid tea_12\): field "feature": feature file name '
                     r"'../../victim/features/precious' is no file name", str(raised.value))
    assert not (tmp_path / 'syn').exists()


@pytest.mark.parametrize('edit, message', [
    (lambda entries: entries[0].__setitem__('vid', 'tea/12'),
     r'entry 0 \(vid tea/12\): "<task>_<vid>": feature file name \'0_make_tea_tea/12\''),
    (lambda entries: entries[0].__setitem__('feature', '..'), r'field "feature": .* \'\.\.\''),
])
def test_the_per_video_json_refuses_feature_names_that_are_paths(tmp_path, edit, message):
    from vpn_plugin.datasets import load_taxonomy, read_json_annotations
    root = kitchen_copy(tmp_path, edit)
    videos, bad = read_json_annotations(root / 'test.json', load_taxonomy(root / 'taxonomy.json'))
    assert len(videos) == 6 and len(bad) == 1 and bad[0].reason == 'feature name is a path'
    assert re.search(message, str(bad[0])), str(bad[0])


def test_a_start_time_refused_after_rounding_says_it_was_rounded():
    """passV V08 (vague): plan.py --video (3 s) --start-time 2.9 was refused with 'expected ...
    start_time < the video's 3 frames', which 2.9 is: the rounding to whole seconds was unsaid."""
    from vpn_plugin.apis import video_observations
    from vpn_plugin.data_paths import REPO_ROOT
    frames = np.zeros((3, 512), np.float32)
    with pytest.raises(ValueError, match=r"start_time=2.9, goal_time=3.4 s, read at seconds 3 "
                       r"and 3 \(times are rounded to whole seconds, one feature row each\); "
                       r"expected .* a start second before the video's 3 seconds of features "
                       r"\(0..2\)"):
        video_observations(REPO_ROOT / 'configs/vpn_niv_t3.py', frames, 2.9, 3.4)


def test_a_conversion_replacing_an_earlier_one_with_other_choices_says_so(tmp_path, capsys):
    """passV G09 (silent): convert_egoper.py --errors keep into the --out of an earlier
    --errors drop conversion replaced its dataset (other steps) without a word."""
    from test_egoper import convert, write_egoper
    write_egoper(tmp_path)
    assert convert(tmp_path, 'drop') == 0
    assert 'replaced' not in capsys.readouterr().err
    assert convert(tmp_path, 'drop') == 0  # the same conversion again: nothing to say
    assert 'replaced' not in capsys.readouterr().err
    assert convert(tmp_path, 'keep') == 0
    err = capsys.readouterr().err
    assert re.search(r"out: replaced the earlier conversion there \(errors 'drop' -> 'keep'; "
                     r"segments .*\); checkpoints and results of the earlier dataset no longer "
                     r"match it", err), err


def test_state_descriptions_of_no_taxonomy_action_are_named(tmp_path, capsys):
    """passV TX11 (silent): make_text_features.py encoded the taxonomy's actions and ignored a
    task of state_descriptions.json that the taxonomy lacks ('make coffee') without a word."""
    from pathlib import Path
    from tool_modules import load_tool
    root = Path(__file__).resolve().parents[1] / 'examples/custom_dataset/kitchen'
    descriptions = json.loads((root / 'state_descriptions.json').read_text())
    descriptions['make coffee'] = {'grind beans': {'before': ['a', 'b', 'c'],
                                                   'after': ['d', 'e', 'f']}}
    (tmp_path / 'sd.json').write_text(json.dumps(descriptions))
    load_tool('make_text_features').main([
        '--taxonomy', str(root / 'taxonomy.json'), '--state-descriptions',
        str(tmp_path / 'sd.json'), '--out', str(tmp_path / 'sf.npy')])
    out = capsys.readouterr().out
    assert np.load(tmp_path / 'sf.npy').shape == (9, 6, 384)
    assert re.search(r"note: 1 state description\(s\) of .*sd\.json are of no action of "
                     r".*taxonomy\.json and were not encoded: make coffee / grind beans", out), out
    load_tool('make_text_features').main([  # all of them used: nothing to say
        '--taxonomy', str(root / 'taxonomy.json'), '--state-descriptions',
        str(root / 'state_descriptions.json'), '--out', str(tmp_path / 'sf2.npy')])
    assert 'note:' not in capsys.readouterr().out


def test_a_link_loop_is_not_called_a_missing_target(tmp_path):
    """passV R2 (vague): loop1 -> loop2 -> loop1 was 'a broken symbolic link to loop2, which
    does not exist' (loop2 exists, as a link)."""
    import os
    os.symlink('loop1.npz', tmp_path / 'loop2.npz')
    os.symlink('loop2.npz', tmp_path / 'loop1.npz')
    with pytest.raises(BadVideoError, match=r'loop1\.npz is a symbolic link to '
                       r'loop2\.npz, which leads back to itself \(a loop of links\)'):
        load_features(tmp_path / 'loop1.npz', 512)
    os.symlink('gone.npz', tmp_path / 'dangling.npz')
    with pytest.raises(BadVideoError,
                       match=r'to gone\.npz, which leads to no file \(a dangling link\)'):
        load_features(tmp_path / 'dangling.npz', 512)


def test_slurm_extract_names_a_partition_the_cluster_lacks(tmp_path):
    """passV H39 (vague): slurm_extract.sh gpu ... on a cluster without partition 'gpu' ended
    with srun's 'Invalid generic resource (gres) specification' alone."""
    import os
    import subprocess
    from pathlib import Path
    tools = Path(__file__).resolve().parents[1] / 'tools'
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'sinfo').write_text('#!/bin/sh\nprintf "debug\\nlong\\nlong\\n"\n')
    (bin_dir / 'srun').write_text('#!/bin/sh\necho "srun $*"\n')
    for tool in ('sinfo', 'srun'):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, 'PATH': f'{bin_dir}:{os.environ["PATH"]}'}

    def run(partition):
        return subprocess.run(['bash', str(tools / 'slurm_extract.sh'), partition, 'job',
                               'clip.mp4', '--out', 'o'], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=60)
    refused = run('gpu')
    assert refused.returncode == 2
    assert ('error: PARTITION=gpu is no partition of this cluster (sinfo lists: debug long); '
            'expected one of them') in refused.stderr
    assert 'srun' not in refused.stdout
    assert run('long').stdout.startswith('srun -p long ')


def test_a_test_set_file_recording_two_seconds_per_row_is_refused_by_the_dataset(tmp_path):
    """passV H25 end to end: tools/test.py scored a kitchen test set one of whose files records
    chunk 16 at 8 fps (SR 57.14, exit 0); an observation cache built before the check (cache
    version 5) served it too."""
    from pathlib import Path
    from tool_modules import load_tool
    from vpn_plugin.apis import build_split_dataset
    from vpn_plugin.data_paths import load_config
    root = kitchen_copy(tmp_path, lambda entries: None)
    config = Path(__file__).resolve().parents[1] / 'examples/custom_dataset/vpn_kitchen_t3.py'
    load_tool('make_synthetic_features').main(['--config', str(config), '--data-root', str(root)])
    cfg = load_config(config, data_root=root)
    assert len(build_split_dataset(cfg, 'test')) == 14  # the cache is built
    path = root / 'features/0_make_tea_tea_12.npz'
    frames = np.load(path)['frames_features']
    np.savez(path, frames_features=frames, recipe=np.str_(json.dumps(dict(fps=8.0, chunk=16))))
    with pytest.raises(BadVideoError, match=r'0_make_tea_tea_12\.npz: field "recipe": frame '
                       r'recipe chunk 16 at 8 fps: one feature row per 2 s'):
        build_split_dataset(load_config(config, data_root=root), 'test')


@pytest.mark.parametrize('edit, message', [
    (lambda record: record.__setitem__('annotations_extra', []),
     r"entry 0 \(vid v0\): unknown field\(s\) 'annotations_extra' \(did you mean 'annotation'\?\)"),
    (lambda record: record['annotation'][0].__setitem__('segmnt', [1.0, 2.0]),
     r"annotation\[0\] \(vid v0\): unknown field\(s\) 'segmnt'"),
])
def test_a_coin_record_with_an_unknown_field_is_refused(tmp_path, shared_data, edit, message):
    """passV C02 (silent): a COIN per-video record with a field COIN has not
    ('annotations_extra') was read without a word, as our per-video JSON refuses."""
    from vpn_plugin.datasets import load_taxonomy
    from vpn_plugin.datasets.annotations import read_coin_annotations
    taxonomy = load_taxonomy(shared_data / 'coin/taxonomy.json')
    task = 0
    action = taxonomy.action_task.index(task)
    record = {'recipe_type': task, 'class': taxonomy.task_names[task], 'subset': 'training',
              'annotation': [{'id': str(action + 1), 'segment': [0.0, 1.0],
                              'label': taxonomy.action_names[action]}]}
    path = tmp_path / 'coin_train_70.json'
    path.write_text(json.dumps([{'v0': record}]))
    assert len(read_coin_annotations(path, taxonomy)[0]) == 1
    edit(record)
    path.write_text(json.dumps([{'v0': record}]))
    with pytest.raises(ValueError, match=message):
        read_coin_annotations(path, taxonomy)


def test_a_native_fps_file_without_its_rate_is_not_resumed(s3d, tmp_path):
    """A --native-fps file written before extraction recorded native_fps is refused by every
    reader; resuming into its folder must not skip it as finished."""
    slow = write_video(tmp_path / 'slow.mp4', 32, 16)
    out, recipe = tmp_path / 'out', FrameRecipe(fps=None, size=SIZE)
    extract_videos(s3d, [slow], out, recipe, num_workers=0)
    fields = dict(np.load(out / 'slow.npz'))
    del fields['native_fps']
    np.savez(out / 'slow.npz', **fields)
    with pytest.raises(ValueError, match=r'slow\.npz: already there, but not a complete feature '
                       r'file of this extraction \(the video\'s own frames without the rate'):
        extract_videos(s3d, [slow], out, recipe, num_workers=0)


def test_a_video_named_with_a_newline_is_one_failure(s3d, tmp_path):
    """passV H61 (a false record): an empty video named 'bad<newline>name.mp4' became two lines
    of failures.tsv ('nl/bad' and 'name.mp4<TAB>reason') and the run said '2 video(s) could not
    be read' while its summary said 1 failed."""
    from vpn_plugin.video import merge_failures
    bad = tmp_path / 'bad\nname.mp4'
    bad.write_bytes(b'')
    out = tmp_path / 'out'
    result = extract_videos(s3d, [bad], out, FrameRecipe(size=SIZE), num_workers=0)
    assert list(result.failed) == [str(bad)]
    lines = merge_failures(out, 1)
    assert lines == [f'{tmp_path}/bad\\nname.mp4\tan empty file (0 bytes), not a video']
    assert (out / 'failures.tsv').read_text().count('\n') == 1

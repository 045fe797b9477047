"""Hostile pass 16 (passV: video and feature tools, dataset readers): what it found, each case
with a test that fails on 72181f1 (log: /tmp/passV_log.md)."""
import json
import shutil

import numpy as np
import pytest

from test_hostile_pass15_passV import write_video

from vpn_plugin.datasets.annotations import BadVideoError
from vpn_plugin.datasets.features import load_features
from vpn_plugin.video import FrameRecipe, UnreadableVideoError
from vpn_plugin.video.decode import VideoHeader, check_time_step, decode_video, probe_video

RECIPE = dict(chunk=16, crop='center', jpeg_quality=95, size=224)


@pytest.mark.parametrize('name', ['concat:b.mp4', 'file:b.mp4'])
def test_a_video_named_like_an_ffmpeg_protocol_is_the_file_decoded(tmp_path, monkeypatch, name):
    """passV H13 (wrong): a video file named 'concat:odd.mp4' was decoded through ffmpeg's
    concat protocol, i.e. odd.mp4, and its npz recorded the named file's bytes beside another
    video's features; H14 (false refusal): a valid video named 'file:x.mp4' failed with 'No such
    file or directory' (ffmpeg opened x.mp4)."""
    monkeypatch.chdir(tmp_path)
    write_video(tmp_path / 'b.mp4', 8, 8)  # the file a protocol would open instead
    write_video(tmp_path / name, 24, 8)
    recipe = FrameRecipe(size=16, jpeg_quality=None)
    assert probe_video(name).seconds == pytest.approx(3, abs=0.2)
    assert len(decode_video(name, recipe)) == 48  # 3 s at 16 fps, not b.mp4's 1 s


def test_a_still_image_named_with_from_is_still_refused(tmp_path):
    """passV H15: ffmpeg's 'Input #0, png_pipe, from '<path>':' line was cut at the LAST
    ', from', so a PNG named 'still, from here.mp4' gave the container "png_pipe, from 'still"
    and passed the still-image check (a later check refused it)."""
    from PIL import Image
    path = tmp_path / 'still, from here.mp4'
    Image.new('RGB', (16, 16)).save(path, format='PNG')
    with pytest.raises(UnreadableVideoError, match=r'a still image \(png_pipe\), not a video'):
        probe_video(path)


def _features_file(path, rows=20, **fields):
    np.savez(path, frames_features=np.ones((rows, 512), np.float32), **fields)
    return path


@pytest.mark.parametrize('fields, message', [
    (dict(recipe=json.dumps({**RECIPE, 'fps': '8'})), "fps = '8'"),  # R01
    (dict(recipe=json.dumps({'chunk': 16})), 'no "fps"'),  # R03
    (dict(recipe=json.dumps({**RECIPE, 'fps': None}), native_fps=0.0), 'native_fps = 0.0'),  # R04
    (dict(recipe=json.dumps({**RECIPE, 'fps': None}), native_fps=-30.0), 'native_fps = -30.0'),
    (dict(recipe=json.dumps({'fps': 8, 'chunk': '16'})), "chunk = '16'"),  # R13
    (dict(recipe=json.dumps({**RECIPE, 'fps': None}), native_fps=np.array([30.0, 16.0])),
     r'native_fps = array\(\[30., 16.\]\)'),  # R25 (a TypeError traceback)
])
def test_a_frame_recipe_whose_time_step_cannot_be_told_is_refused(tmp_path, fields, message):
    """passV R01, R03-R05, R13 (silent), R25 (vague): a recorded frame recipe whose fps or chunk
    is no positive number (or native_fps of 0, -30) was ignored, its rows read as seconds
    (fps "8", chunk 16: 2 s per row)."""
    path = _features_file(tmp_path / 'v.npz', **fields)
    with pytest.raises(BadVideoError, match=rf'v\.npz: field "recipe": frame recipe .*{message}.*'
                       r'the seconds of a row cannot be told'):
        load_features(path, 512)


@pytest.mark.parametrize('fps, chunk, native, rows', [
    (None, 16, 15.0, 92),  # R08: 1.067 s per row, 6.1 s off at the end
    (32, 30, None, 92),  # R17: 0.9375 s per row
])
def test_rows_of_about_a_second_that_drift_are_refused(tmp_path, fps, chunk, native, rows):
    """passV R08, R17, H02 (silent): rows of 1.067 s (16 frames at 15 fps) or 0.9375 s were read
    as seconds (ROW_SECONDS_TOLERANCE 0.1) without a word, however long the file: row 91 of a
    92-row file is second 97."""
    fields = dict(recipe=json.dumps({**RECIPE, 'fps': fps, 'chunk': chunk}))
    if native:
        fields['native_fps'] = native
    path = _features_file(tmp_path / 'v.npz', rows, **fields)
    with pytest.raises(BadVideoError, match=rf'over {rows} rows the last one is [0-9.]+ s off '
                       r'its second; at most 0.5 s read'):
        load_features(path, 512)


@pytest.mark.parametrize('fields, rows', [
    (dict(recipe=json.dumps({**RECIPE, 'fps': 16.0})), 500),  # the public recipe, exactly 1 s
    (dict(recipe=json.dumps({**RECIPE, 'fps': None}), native_fps=16.0), 500),
    (dict(recipe=json.dumps({**RECIPE, 'fps': None}), native_fps=np.float64(15.99)), 92),
    (dict(recipe=json.dumps({**RECIPE, 'fps': None, 'chunk': 30}), native_fps=29.97), 400),
    (dict(recipe=json.dumps({**RECIPE, 'fps': None}), native_fps=15.0), 7),  # 0.47 s off
    (dict(recipe=json.dumps({**RECIPE, 'fps': 8.0, 'chunk': 8})), 200),
    (dict(recipe=np.str_(json.dumps({**RECIPE, 'fps': 16.0})).encode()), 50),  # bytes
    (dict(recipe='pasta'), 50),  # a field of that name that is no frame recipe: the file's
    (dict(recipe=json.dumps(['a', 'b'])), 50),
    (dict(recipe=json.dumps({'name': 'tea', 'steps': 3})), 50),
])
def test_recipes_that_give_seconds_still_read(tmp_path, fields, rows):
    """No false refusal: recipes of one row per second (or close enough over the file's rows),
    and 'recipe' fields that are no frame recipe, read as before."""
    path = _features_file(tmp_path / 'v.npz', rows, **fields)
    assert load_features(path, 512).shape == (rows, 512)


def _header(fps: float, seconds):
    return VideoHeader('mov,mp4,m4a,3gp,3g2,mj2',
                       (f'Video: h264 (High), yuv420p, 64x48, {fps:g} fps, {fps:g} tbr',),
                       seconds)


def test_extraction_refuses_rows_that_drift_over_the_video():
    """passV H02 (silent): --native-fps on a 20 s, 15 fps video wrote 19 rows of 1.067 s with
    exit 0 (the last 1.3 s off its second); a 4 s one (0.27 s off) and 29.97 fps in rows of 30
    frames still extract."""
    with pytest.raises(UnreadableVideoError, match=r"v\.mp4: frame recipe chunk 16 at the "
                       r"file's own 15 fps \(--native-fps\): one feature row per 1.067 s \(over "
                       r'19 rows the last one is 1.27 s off its second; at most 0.5 s read\).*'
                       r'give --fps 16'):
        check_time_step('v.mp4', _header(15, 20.0), FrameRecipe(fps=None))
    with pytest.raises(UnreadableVideoError, match=r'chunk 30 at 32 fps: one feature row per '
                       r'0.9375 s \(over 22 rows'):
        check_time_step('v.mp4', _header(15, 20.0), FrameRecipe(fps=32, chunk=30))
    check_time_step('v.mp4', _header(15, 4.0), FrameRecipe(fps=None))
    check_time_step('v.mp4', _header(29.97, 300.0), FrameRecipe(fps=None, chunk=30))
    check_time_step('v.mp4', _header(15, 3600.0), FrameRecipe())  # resampled: exactly 1 s


@pytest.mark.parametrize('spelling, read', [
    ('3_7_3', None), ('\u0663\u0667\u0663', None), ('373.0', None), (True, None),
    ('373', 373), (373, 373), (' 373 ', 373), ('+373', 373), ('0373', 373)])
def test_a_coin_step_id_is_a_decimal_integer(tmp_path, shared_data, spelling, read):
    """passV K29, K30 (silent): COIN step ids '3_7_3' and Arabic-Indic digits were read as 373
    (Python's int() spellings): ids are checked, never coerced."""
    from vpn_plugin.datasets import load_taxonomy
    from vpn_plugin.datasets.annotations import read_coin_annotations
    taxonomy = load_taxonomy(shared_data / 'coin/taxonomy.json')
    action = 372
    task = taxonomy.action_task[action]
    record = {'recipe_type': task, 'class': taxonomy.task_names[task], 'subset': 'training',
              'annotation': [{'id': spelling, 'segment': [0.0, 1.0],
                              'label': taxonomy.action_names[action]}]}
    path = tmp_path / 'coin_train_70.json'
    path.write_text(json.dumps([{'v0': record}], ensure_ascii=False))
    videos, bad = read_coin_annotations(path, taxonomy)
    if read is None:
        assert not videos and 'is not a decimal integer' in str(bad[0])
        assert repr(spelling) in str(bad[0])
    else:
        assert not bad and videos[0].steps == [(0.0, 1.0, read - 1)]


def test_a_cache_dir_on_a_read_only_file_system_is_named(monkeypatch, tmp_path):
    """passV C02 (vague): a cache_dir on a read-only mount gave the bare "[Errno 30] Read-only
    file system: '.../cache'" (a full disk was worded: cache_dir, what to do)."""
    import errno
    import vpn_plugin.datasets.planning_dataset as planning

    def read_only(path, *args):
        raise OSError(errno.EROFS, 'Read-only file system', str(path))
    monkeypatch.setattr(planning, 'read_or_make_secret', read_only)
    dataset = planning.PlanningDataset.__new__(planning.PlanningDataset)
    dataset.cache_dir = str(tmp_path / 'cache')
    assert dataset._cache_secret == planning._PROCESS_SECRET  # the write then names cache_dir


def test_a_refused_conversion_leaves_no_lock_file(tmp_path):
    """passV H11 (vague): convert_features.py refusing --src (a.npy and a.npz for one video)
    left '.conv.lock' beside --dst, though a refused run writes nothing."""
    from tool_modules import load_tool
    src = tmp_path / 'src'
    src.mkdir()
    np.save(src / 'a.npy', np.ones((3, 512), np.float32))
    _features_file(src / 'a.npz', 3)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit, match='have two feature files'):
        load_tool('convert_features').main(['--src', str(src), '--dst', str(tmp_path / 'conv')])
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    shutil.rmtree(src)


@pytest.mark.parametrize('field, value, read', [
    ('vid', ['tea_00'], False), ('feature', None, False), ('vid', {'a': 1}, False),
    ('feature', True, False), ('vid', 17, True), ('feature', 5, True), ('feature', 'x', True)])
def test_a_video_id_or_feature_stem_is_text(tmp_path, field, value, read):
    """passV J13, J19 (silent): a per-video JSON entry's vid ['tea_00'] or "feature": null was
    read through str() (feature file "make_tea_['tea_00']", "None"), never named."""
    from vpn_plugin.datasets.annotations import read_json_annotations
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    (tmp_path / 'taxonomy.json').write_text(json.dumps({'0_t': {'0': 'a', '1': 'b'}}))
    taxonomy = load_taxonomy(tmp_path / 'taxonomy.json')
    entry = {'vid': 'v0', 'task': 't', 'steps': [[0, 1, 0], [2, 3, 1]], field: value}
    path = tmp_path / 'train.json'
    path.write_text(json.dumps([entry]))
    videos, bad = read_json_annotations(path, taxonomy)
    if read:
        assert len(videos) == 1 and not bad
    else:
        assert not videos and f'field "{field}" = {value!r}; expected a text or an integer' \
            in str(bad[0])


@pytest.mark.parametrize('tasks, message', [
    ({'0_t': {'0': 'a', '\u0661': 'b'}}, "task '0_t': action id '\u0661' is not an integer"),
    ({'0_t': {'0': 'a'}, '\u0661_u': {'1': 'b'}}, "task key '\u0661_u' does not parse"),
    ({'0_t': {'0': 'a', '01': 'b'}}, None)])
def test_taxonomy_ids_are_ascii_digits(tmp_path, tasks, message):
    """passV T01, T03 (silent): a taxonomy action id '١' (Arabic-Indic one) or task index '١'
    was read as 1 (str.isdigit() and int() take any Unicode digit)."""
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    path = tmp_path / 'taxonomy.json'
    path.write_text(json.dumps(tasks, ensure_ascii=False), encoding='utf-8')
    if message is None:
        assert load_taxonomy(path).action_names == ['a', 'b']
    else:
        with pytest.raises(ValueError, match=message):
            load_taxonomy(path)

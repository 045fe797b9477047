"""Hostile pass 17 (passV, session 12: video and feature tools, dataset readers): what it found,
each case with a test that fails on 22f9984 (log: /tmp/passV_log.md)."""
import argparse
import json
import zipfile

import numpy as np
import pytest
import torch

from test_hostile_pass15_passV import write_video

from vpn_plugin.datasets.annotations import BadVideoError
from vpn_plugin.datasets.features import load_features
from vpn_plugin.errors import at_least, decimal_int, decimal_number

ROWS = np.arange(20 * 512, dtype=np.float32).reshape(20, 512) / 1000
NATIVE = json.dumps(dict(fps=None, chunk=16, size=224, crop='center', jpeg_quality=95))


# ---------------------------------------------------------------- one ASCII decimal reader
@pytest.mark.parametrize('text, value', [
    ('3', 3), (' 3 ', 3), ('+3', 3), ('03', 3), ('\u0663', None), ('1_6', None),
    ('\uff11\uff16', None), ('3.0', None), ('0x10', None), ('', None), (' ', None), ('-3', None)])
def test_decimal_int_reads_ascii_digits_only(text, value):
    """The one rule of every id reader and integer argument (known item: taxonomy, COIN,
    windows, CSV read ids case by case; int() reads '1_6' and other digits)."""
    assert decimal_int(text) == value
    assert decimal_int('-3', signed=True) == -3


@pytest.mark.parametrize('kind, text', [
    (int, '\u0663'), (int, '1_6'), (int, '\uff13'), (float, '1_6'), (float, '\u0661\u0666')])
def test_cli_numbers_in_other_digits_are_refused(kind, text):
    """passV H14, H15 (silent): `dataset_stats.py --horizons ٣` made the T=3 table and
    `extract_features.py --size 1_6 --chunk ١٦` extracted at 16 (errors.at_least read int();
    passL's errors.number_text_problem, merged from main, is the rule)."""
    with pytest.raises(argparse.ArgumentTypeError, match='in ASCII digits 0-9 without "_"'):
        at_least(kind, 1)(text)


@pytest.mark.parametrize('kind, text, value', [
    (int, '3', 3), (int, ' 3', 3), (int, '+3', 3), (float, '16', 16.0), (float, '1.6e1', 16.0),
    (float, '.5', 0.5)])
def test_cli_numbers_in_ascii_still_read(kind, text, value):
    assert at_least(kind, 0)(text) == value


def test_extraction_arguments_in_other_digits_are_refused(capsys):
    from tool_modules import load_tool
    with pytest.raises(SystemExit):
        load_tool('extract_features').parse_args(['v.mp4', '--out', 'o', '--size', '1_6'])
    assert "'1_6' has \"_\" between its digits" in capsys.readouterr().err


def test_a_task_index_in_other_digits_is_no_task(tmp_path):
    """Known item: Taxonomy.task_index('١') (a per-video JSON "task") was task 1."""
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    path = tmp_path / 'taxonomy.json'
    path.write_text(json.dumps({'0_t': {'0': 'a'}, '1_u': {'1': 'b'}}))
    taxonomy = load_taxonomy(path)
    assert taxonomy.task_index('1') == taxonomy.task_index(1) == taxonomy.task_index('u') == 1
    with pytest.raises(ValueError, match='is not a task of taxonomy'):
        taxonomy.task_index('\u0661')


@pytest.mark.parametrize('row, read', [
    ('1,1_0.5,20', False), ('\u0661,10,20', False), ('1_1,10,20', False), ('1,10,2_0', False),
    ('1,10,20', True), (' 1, 10.5 ,2e1', True)])
def test_crosstask_csv_numbers_are_ascii(tmp_path, row, read):
    """Known item: a CrossTask CSV row '1,1_0.5,20' read its start as 10.5 s (float())."""
    from vpn_plugin.datasets.annotations import read_crosstask_csv
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    (tmp_path / 'taxonomy.json').write_text(json.dumps({'0_t': {'0': 'a'}}))
    taxonomy = load_taxonomy(tmp_path / 'taxonomy.json')
    (tmp_path / 'v.csv').write_text(row + '\n', encoding='utf-8')
    if read:
        assert read_crosstask_csv(tmp_path / 'v.csv', taxonomy, 0, 'v')[0][2] == 0
    else:
        with pytest.raises(BadVideoError, match='does not parse'):
            read_crosstask_csv(tmp_path / 'v.csv', taxonomy, 0, 'v')


def test_a_crosstask_csv_saved_with_a_bom_reads(tmp_path):
    from vpn_plugin.datasets.annotations import read_crosstask_csv
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    (tmp_path / 'taxonomy.json').write_text(json.dumps({'0_t': {'0': 'a'}}))
    (tmp_path / 'v.csv').write_text('\ufeff1,10,20\n', encoding='utf-8')
    taxonomy = load_taxonomy(tmp_path / 'taxonomy.json')
    assert read_crosstask_csv(tmp_path / 'v.csv', taxonomy, 0, 'v') == [(10.0, 20.0, 0)]


# ---------------------------------------------------------------- feature files
@pytest.mark.parametrize('native', ['1_6', '\u0661\u0666', '\uff11\uff16'])
def test_a_recorded_rate_in_other_digits_is_refused(tmp_path, native):
    """passV F15, F16, F42 (silent): native_fps '1_6', '١٦', '１６' were read as 16 fps (float())
    and the rows taken for seconds."""
    path = tmp_path / 'v.npz'
    np.savez(path, frames_features=ROWS, recipe=NATIVE, native_fps=native)
    with pytest.raises(BadVideoError, match=f"native_fps = '{native}'"):
        load_features(path, 512)


@pytest.mark.parametrize('native', [
    np.float32(16), np.int64(16), np.float64(16), ' 16 ', '1.6e1', np.bytes_(b'16'), '16'])
def test_a_recorded_rate_of_16_still_reads(tmp_path, native):
    """No false refusal: 16 fps recorded in every form a writer uses reads the same rows."""
    path = tmp_path / 'v.npz'
    np.savez(path, frames_features=ROWS, recipe=NATIVE, native_fps=native)
    assert np.array_equal(load_features(path, 512), ROWS)


def _zip(path, members, compression=zipfile.ZIP_STORED):
    import io
    with zipfile.ZipFile(path, 'w', compression) as archive:
        for name, array in members:
            buffer = io.BytesIO()
            np.save(buffer, array)
            archive.writestr(name, buffer.getvalue())
    return path


def test_an_npz_holding_a_member_twice_is_refused(tmp_path):
    """passV F01 (silent): an npz with two members 'frames_features.npy' (X, then -X) read the
    last one without a word."""
    with pytest.warns(UserWarning, match='Duplicate name'):
        path = _zip(tmp_path / 'v.npz', [('frames_features.npy', ROWS),
                                         ('frames_features.npy', -ROWS)])
    with pytest.raises(BadVideoError, match="'frames_features.npy' more than once"):
        load_features(path, 512)


@pytest.mark.parametrize('compression', [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED,
                                         zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_npz_archives_with_each_member_once_read(tmp_path, compression):
    path = _zip(tmp_path / 'v.npz', [('steps_ids.npy', np.arange(3)),
                                     ('frames_features.npy', ROWS)], compression)
    assert np.array_equal(load_features(path, 512), ROWS)


def test_a_recipe_giving_a_key_twice_is_refused(tmp_path):
    """passV F20 (silent): recipe '{"fps": 8, "fps": 16, "chunk": 16}' read as 16 fps (JSON keeps
    the last); the record also says 8 fps (2 s rows)."""
    path = tmp_path / 'v.npz'
    np.savez(path, frames_features=ROWS, recipe='{"fps": 8, "fps": 16, "chunk": 16}')
    with pytest.raises(BadVideoError, match=r'"fps" given twice \(JSON keeps the last\)'):
        load_features(path, 512)


@pytest.mark.parametrize('recipe', ['{"fps": 16, "chunk": 16}', '{"chunk": 16, "fps": 16}',
                                    '{"fps": 16, "chunk": 16.0, "size": 224}',
                                    np.bytes_(b'{"fps": 16, "chunk": 16}')])
def test_recipes_of_one_second_rows_still_read(tmp_path, recipe):
    path = tmp_path / 'v.npz'
    np.savez(path, frames_features=ROWS, recipe=recipe)
    assert np.array_equal(load_features(path, 512), ROWS)


@pytest.mark.parametrize('damage, note', [
    (np.array(['decoded with 3 errors', 'more']), 'decoded with 3 errors; more'),
    (np.int64(1), 'field "damage" = 1 (no text note)'),
    (np.bytes_(b'decoded with 3 errors'), 'decoded with 3 errors'),
    (np.array('a note'), 'a note'), ('', None), (np.int64(0), None), (np.bool_(False), None)])
def test_a_damage_record_in_any_form_is_carried(tmp_path, damage, note):
    """passV F24, F24c (silent): a file whose "damage" field held two notes, or the flag 1, was
    read as a clean video (damage_note took a single text only)."""
    path = tmp_path / 'v.npz'
    np.savez(path, frames_features=ROWS, damage=damage)
    found = {}
    assert np.array_equal(load_features(path, 512, damage=found), ROWS)
    assert found == ({} if note is None else {'v.npz': note})


# ---------------------------------------------------------------- window files
@pytest.mark.parametrize('field, value, message', [
    ('feature', ['./x/changing_tire_0001.npy'], 'expected a text or an integer'),
    ('feature', None, 'expected a text or an integer'),
    ('feature', '', "feature file name '' is no file name"),
    ('task_name', ['Changing a car tire'], 'expected a text or an integer'),
    ('vid', None, 'expected a text or an integer')])
def test_a_window_sample_names_its_video_by_text(shared_data, tmp_path, field, value, message):
    """passV W01, W02, W03, W21 (silent): a window sample's "feature" given as a list was read
    as its file (Path(str(list)).stem), null as the video 'None', '' as the video ''; a list
    "task_name" passed the name check."""
    from vpn_plugin.datasets.annotations import read_window_file
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    samples = json.loads((shared_data / 'niv/splits/test_T3.json').read_text())[:3]
    samples[0]['id'][field] = value
    path = tmp_path / 'test_T3.json'
    path.write_text(json.dumps(samples))
    windows, bad = read_window_file(path, load_taxonomy(shared_data / 'niv/taxonomy.json'), 3)
    assert len(windows) == 2 and len(bad) == 1 and message in str(bad[0])
    assert 'sample 0' in str(bad[0]) and f'"{field}"' in str(bad[0])


def test_window_samples_with_an_integer_or_path_feature_still_read(shared_data, tmp_path):
    from vpn_plugin.datasets.annotations import read_window_file
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    samples = json.loads((shared_data / 'niv/splits/test_T3.json').read_text())[:3]
    samples[1]['id']['feature'] = 5
    samples[2]['id']['feature'] = '../../other/' + samples[2]['id']['feature'].split('/')[-1]
    path = tmp_path / 'test_T3.json'
    path.write_text(json.dumps(samples))
    windows, bad = read_window_file(path, load_taxonomy(shared_data / 'niv/taxonomy.json'), 3)
    assert not bad and [w.feature for w in windows][1] == '5'


# ---------------------------------------------------------------- videos
def test_one_file_named_twice_in_two_spellings_is_one_video(tmp_path):
    """passV E23 (false refusal): `extract_features.py v/r15.mp4 n/hl/../../v/r15.mp4` was
    refused "would both write r15.npz ... rename one" (the same spelling twice is read once)."""
    from vpn_plugin.video.extract import list_videos
    (tmp_path / 'v').mkdir()
    (tmp_path / 'n').mkdir()
    video = write_video(tmp_path / 'v/r15.mp4', 4, 4)
    twice = list_videos([video, tmp_path / 'n/../v/r15.mp4', tmp_path / 'v'])
    assert len(twice) == 1
    (tmp_path / 'v/link.mp4').symlink_to(video)  # another name: another feature file
    assert len(list_videos([tmp_path / 'v'])) == 2


def test_a_linked_folder_is_named_not_left_out(tmp_path):
    """passV V10 (silent): a folder holding own.mp4 and a link to a folder of videos extracted
    own.mp4 alone, saying nothing of the linked folder (rglob does not enter it)."""
    from tool_modules import load_tool
    from vpn_plugin.video.extract import linked_folders, list_videos
    (tmp_path / 'elsewhere').mkdir()
    write_video(tmp_path / 'elsewhere/x.mp4', 4, 4)
    (tmp_path / 'in').mkdir()
    (tmp_path / 'in/lnk').symlink_to(tmp_path / 'elsewhere')
    assert list_videos([tmp_path / 'in']) == [] and linked_folders([tmp_path / 'in']) == \
        [tmp_path / 'in/lnk']
    assert len(list_videos([tmp_path / 'in/lnk'])) == 1  # given as an input: searched
    with pytest.raises(SystemExit, match=r'1 linked folder\(s\) not searched .*in/lnk'):
        load_tool('extract_features').main([str(tmp_path / 'in'), '--out', str(tmp_path / 'o'),
                                            '--random-weights', '--size', '16'])
    assert not (tmp_path / 'o').exists()


def _gif(path, frames: int):
    from PIL import Image
    images = [Image.new('RGB', (16, 16), (40 * i, 0, 0)) for i in range(frames)]
    images[0].save(path, format='GIF', save_all=frames > 1, append_images=images[1:],
                   duration=62)
    return path


def test_a_one_frame_gif_named_as_a_video_is_refused(tmp_path):
    """passV V04 (silent): a one-frame GIF named .mp4 was extracted as a 1 s video, while the
    same picture as PNG, BMP or WebP is refused "a still image"."""
    from vpn_plugin.video import UnreadableVideoError
    from vpn_plugin.video.decode import probe_video
    with pytest.raises(UnreadableVideoError, match=r'a still image \(a GIF of one frame\)'):
        probe_video(_gif(tmp_path / 'still.mp4', 1))
    assert probe_video(_gif(tmp_path / 'anim.mp4', 8)).container == 'gif'  # an animation


class _Network(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return {'video_embedding': torch.zeros(len(x), 512)}


def test_video_features_carry_ffmpegs_damage_note(monkeypatch, tmp_path):
    """passV H12 (silent): plan.py --video of a damaged video planned without a word (and
    --save-features dropped the note extract_features records): video_features now takes a
    ``damage`` list and plan_from_video puts it in the sample's metainfo."""
    import vpn_plugin.apis.video as video

    def blocks(path, recipe, block_frames, header=None, damage=None):
        damage.append('ffmpeg decoded it but reported 1 error line(s)')
        yield np.zeros((16, 16, 16, 3), np.uint8)
    monkeypatch.setattr(video, 'iter_frame_blocks', blocks)
    found = []
    from vpn_plugin.video import FrameRecipe
    rows = video.video_features(_Network(), tmp_path / 'v.mp4', FrameRecipe(size=16),
                                damage=found)
    assert rows.shape == (1, 512) and found == ['ffmpeg decoded it but reported 1 error line(s)']


def test_saved_features_record_the_damage_note(tmp_path):
    from tool_modules import load_tool
    s3d = _Network()
    s3d.usable = True
    load_tool('plan').save_features(tmp_path / 'f.npz', ROWS, s3d, '', False, 'a damage note')
    found = {}
    load_features(tmp_path / 'f.npz', 512, damage=found)
    assert found == {'f.npz': 'a damage note'}


# ---------------------------------------------------------------- EgoPER, S3D weights
def test_an_egoper_split_list_saved_with_a_bom_reads(tmp_path):
    """passV H21 (false refusal): EgoPER split lists saved with a BOM were refused "2 listed
    video(s) have no annotation, e.g. ['\\ufeffcoffee_u1_a', ...]"."""
    from vpn_plugin.datasets.egoper import read_splits
    (tmp_path / 'training.txt').write_text('\ufeffa_1\nb_2\n', encoding='utf-8')
    (tmp_path / 'test.txt').write_text('\ufeffc_3\n', encoding='utf-8')
    assert read_splits(tmp_path, ['a', 'b', 'c']) == {'a_1': 'train', 'b_2': 'train',
                                                      'c_3': 'test'}


def test_a_checkpoint_refused_as_s3d_weights_says_what_s3d_needs(tmp_path):
    """passV S13 (vague): S3D weights with an 'ema_state_dict' were refused in a planner
    checkpoint's words ("expected the file tools/train.py wrote ..."), with no word of S3D."""
    from vpn_plugin.apis.video import init_s3d
    torch.save({'state_dict': {'a': torch.zeros(1)}, 'ema_state_dict': {'b': torch.zeros(1)}},
               tmp_path / 'w.pth')
    with pytest.raises(ValueError, match='read as S3D weights: expected the S3D_HowTo100M'):
        init_s3d(tmp_path / 'w.pth')


def test_decimal_number_reads_ascii_numbers_only():
    assert decimal_number('1.6e1') == 16.0 and decimal_number(' -2 ') == -2.0
    assert decimal_number('1_6') is None and decimal_number('\u0661') is None


# ---------------------------------------------------------------- known items
@pytest.mark.parametrize('stream, rate', [
    ('Video: h264 (High), yuv420p, 64x48, 8 kb/s, 15.51 fps, 16 tbr, 480 tbn (default)', 16.0),
    ('Video: h264, yuv420p, 64x48, 29.97 fps, 29.97 tbr, 30k tbn', 29.97),
    ('Video: h264, yuv420p, 64x48, 1000 fps, 1k tbr, 16k tbn', 1000.0),
    ('Video: mjpeg, yuvj420p, 64x48, 30 fps', 30.0)])
def test_the_native_rate_is_the_rate_frames_come_out_at(stream, rate):
    """Known item: a variable-frame-rate video (8 then 24 fps: ffmpeg states '15.51 fps, 16 tbr')
    decoded with --native-fps gives 65 frames over 3.94 s, 16 a second (its tbr), but its
    native_fps record (and the time-step check) took the stated 15.51."""
    from vpn_plugin.video.decode import VideoHeader, stream_fps
    assert stream_fps(VideoHeader('mov', (stream,), 4.0)) == pytest.approx(rate)


def test_progress_never_shows_more_chunks_than_its_total():
    """Known item: the progress line read "28/27 chunks (104%)" (a video gave more chunks than
    its header promised)."""
    import io
    import re
    from vpn_plugin.video.extract import Progress
    stream = io.StringIO()
    progress = Progress(2, 0, stream, interval=0.0)
    progress.expect(0, 27)
    progress.expect(1, None)  # no header: counted at the mean, 27
    progress.video_done(1, 0)  # it failed: the total is 27
    for _ in range(28):  # the first gives one chunk more than its header states
        progress.chunks(1, 'v0')
    progress.video_done(0, 28)
    shown = [tuple(map(int, m)) for m in re.findall(r'(\d+)/(\d+) chunks', stream.getvalue())]
    assert shown and all(done <= total for done, total in shown)


def test_plan_py_features_says_the_file_records_damage(tiny_pdpp_checkpoint, tiny_crosstask,
                                                       tmp_path, capsys):
    """passV H11 (silent): plan.py --features of a file recording that its video was decoded
    from damaged data (extract_features' "damage" note) planned without a word (a clean file
    has no note: test_a_damage_record_in_any_form_is_carried)."""
    from pathlib import Path
    from tool_modules import load_tool
    config, checkpoint = tiny_pdpp_checkpoint
    source = sorted(Path(tiny_crosstask['feature_dir']).glob('*.npz'))[0]
    with np.load(source) as archive:
        fields = dict(archive)
    np.savez(tmp_path / 'damaged.npz', **fields, damage=np.str_('ffmpeg decoded it but '
                                                                 'reported 2 error line(s)'))
    capsys.readouterr()
    load_tool('plan').main([str(config), str(checkpoint), '--features',
                            str(tmp_path / 'damaged.npz'), '--start-time', '0',
                            '--goal-time', '3'])
    assert ('records that its video was decoded from damaged data: ffmpeg decoded it but '
            'reported 2 error line(s)') in capsys.readouterr().out


@pytest.mark.parametrize('feature, message', [
    (['./x/changing_tire_0001.npy'], 'expected a text or an integer'),
    (None, 'expected a text or an integer'), ('', "feature file name '' is no file name")])
def test_an_niv_video_list_names_its_video_by_text(shared_data, tmp_path, feature, message):
    """As W01-W03 for NIV's video lists ({"feature", "task_id"}): a list was read as its file
    through str(), null as the video 'None'."""
    from vpn_plugin.datasets.annotations import read_video_list
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    entries = json.loads((shared_data / 'niv/splits/test_videos.json').read_text())[:3]
    taxonomy = load_taxonomy(shared_data / 'niv/taxonomy.json')
    path = tmp_path / 'test_videos.json'
    path.write_text(json.dumps(entries))
    assert len(read_video_list(path, taxonomy)) == 3
    entries[0]['feature'] = feature
    path.write_text(json.dumps(entries))
    with pytest.raises(ValueError, match=message):
        read_video_list(path, taxonomy)

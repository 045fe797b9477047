"""Fourteenth hostile pass, engineer passL (LLM/VLM baselines, core math, configs before
training): each test fails on 22f9984 (checked in a worktree of it).

- VF6/VF10/VF13b (+ the known cover.jpg): a VLM frames folder was read by position in name
  order: 1.jpg beside 0001.jpg counted every frame twice (the frame of 6 s sent for 13 s), a
  missing 0011.jpg shifted every later time by a frame, a second extraction img_*.jpg beside
  frame_*.jpg (or a cover.jpg) lengthened the folder so that clips past the end were read.
- LIT1-3/LIT7-9: data_paths.literal_config missed a change made through another name of the
  same dict or list (``b = a; b['x'] = 2``, ``outer = dict(ds=inner); inner['h'] = 5``,
  ``lst2 += [2]``): the stale value was returned as read (mmengine reads the changed one).
- K1-K15, T13: numbers in other digits or with "_" were read by every number flag and by
  --cfg-options: --seed ３ as 3, --num-examples 5_0 as 50, optimizer.lr=1e-3_0 as 1e-30.
"""
import numpy as np
import pytest

from tool_modules import load_tool


def write_frames(folder, names, values=None):
    import cv2
    folder.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(names):
        value = (values[index] if values else index + 1) * 4
        cv2.imwrite(str(folder / name), np.full((8, 8, 3), value, np.uint8))
    return folder


def frame_numbers(jpegs):
    import cv2
    return [round(cv2.imdecode(np.frombuffer(j, np.uint8), 1).mean() / 4) for j in jpegs]


@pytest.mark.parametrize('prefix,extra,match', [
    ('', [f'{i}.jpg' for i in range(1, 31)], '0001.jpg and 1.jpg are two images of one frame'),
    ('frame_', [f'img_{i:04d}.jpg' for i in range(1, 31)],
     'frame_0001.jpg and img_0001.jpg are two images of one frame'),
    ('', ['cover.jpg'], 'cover.jpg is no numbered frame like 0001.jpg'),
    ('', ['._0001.jpg'], '._0001.jpg and 0001.jpg are two images of one frame'),
    ('', ['thumb_77.png'], 'named in 2 different ways'),
])
def test_images_that_are_no_frames_of_the_folder_are_refused(tmp_path, prefix, extra, match):
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    main = [f'{prefix}{i:04d}.jpg' for i in range(1, 31)]
    folder = write_frames(tmp_path / 'v', main)
    assert frame_numbers(read_clip_frames(folder, 12, 14, 1)) == [14]  # t = 13 s
    write_frames(folder, extra, [1] * len(extra))
    with pytest.raises(ValueError, match=match.replace('.', r'\.')):
        read_clip_frames(folder, 12, 14, 1)
    with pytest.raises(ValueError, match=match.replace('.', r'\.')):
        read_clip_frames(folder, 40, 42, 1)  # past the 30 s: never read from the extra images


@pytest.mark.parametrize('numbers,missing', [
    ([*range(1, 11), *range(12, 32)], 'frame number(s) 11 missing among 0001.jpg .. 0031.jpg'),
    (range(5, 31), 'frame number(s) 1-4 missing among 0005.jpg .. 0030.jpg'),
])
def test_a_missing_frame_number_is_refused_not_shifted_over(tmp_path, numbers, missing):
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    folder = write_frames(tmp_path / 'v', [f'{n:04d}.jpg' for n in numbers], list(numbers))
    with pytest.raises(ValueError, match=missing.replace('(', r'\(').replace(')', r'\)')):
        read_clip_frames(folder, 12, 14, 1)


@pytest.mark.parametrize('names,fps,expected', [
    ([f'{i:04d}.jpg' for i in range(1, 31)], 1, [14]),           # ffmpeg %04d: from 1
    ([f'{i:05d}.png' for i in range(0, 30)], 1, [14]),           # from 0
    ([f'frame_{i}.JPG' for i in range(1, 31)], 1, [14]),         # prefix, upper-case suffix
    ([f'{i}.jpg' for i in range(1, 61)], 2, [27]),          # 2 fps: t = 13 s -> 27th
])
def test_numbered_frames_of_one_extraction_are_read_as_before(tmp_path, names, fps, expected):
    import os
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    folder = write_frames(tmp_path / 'v', names)
    os.symlink(folder, tmp_path / 'link')
    for source in (folder, tmp_path / 'link'):
        assert frame_numbers(read_clip_frames(source, 12, 14, 1, folder_fps=fps)) == expected


ALIASED = {
    'a = b = dict(x=1)\nb["x"] = 2\n': ['a', 'b'],
    'a = dict(x=1)\nb = a\nb.update(x=2)\n': ['a', 'b'],
    'lst = [1]\nlst2 = lst\nlst2 += [2]\n': ['lst'],
    'inner = dict(h=3)\nouter = dict(ds=inner)\ninner["h"] = 5\n': ['inner', 'outer'],
    'ds = dict(h=3)\ndl = [ds]\ndl[0]["h"] = 6\n': ['ds', 'dl'],
    'base = dict(h=3)\nother = base\nother.setdefault("k", 1)\nother["h"] = 7\n': ['base', 'other'],
}


@pytest.mark.parametrize('text', ALIASED)
def test_a_change_through_another_name_is_not_read_as_the_old_value(tmp_path, text):
    from mmengine.config import Config
    from vpn_plugin.data_paths import UNREAD, literal_config
    path = tmp_path / 'c.py'
    path.write_text(text)
    literal, executed = literal_config(path), Config.fromfile(str(path)).to_dict()
    for name in executed:  # every value read is mmengine's; the changed ones are not read
        assert literal[name] is UNREAD if name in ALIASED[text] else literal[name] == executed[name]


def test_values_shared_but_never_changed_are_still_read(tmp_path):
    from vpn_plugin.data_paths import literal_config
    path = tmp_path / 'c.py'
    path.write_text('inner = dict(h=3)\nouter = dict(ds=inner, copy=dict(**inner))\n'
                    'alias = inner\nlst = [1]\nlst2 = lst + [2]\nn = 1\nn += 2\n'
                    'other = dict(h=4)\nother["h"] = 5\n')
    literal = literal_config(path)
    assert literal['outer'] == {'ds': {'h': 3}, 'copy': {'h': 3}} and literal['alias'] == {'h': 3}
    assert literal['lst'] == [1] and literal['lst2'] == [1, 2] and literal['n'] == 3


@pytest.mark.parametrize('tool,argv,shown', [
    ('train', ['--cfg-options', 'train_cfg.max_epochs=\u0665'], "'\u0665' is written in other digits"),
    ('train', ['--cfg-options', 'train_cfg.max_epochs=1_0'], "'1_0' has \"_\" between its digits"),
    ('train', ['--cfg-options', 'optim_wrapper.optimizer.lr=1e-3_0'], 'reads it as 1e-30'),
    ('train', ['--cfg-options', 'model.loss_weights=[1,\uff12]'], "'\uff12' is written in other"),
    ('train', ['--horizon', '\uff14'], "argument --horizon: '\uff14' is written in other digits"),
    ('train', ['--seed', '1_0'], "argument --seed: '1_0' has \"_\" between its digits"),
    ('test', ['x.pth', '--limit', '\u0663'], "argument --limit: '\u0663' is written in other"),
    ('test', ['x.pth', '--local-rank', '\uff13'], "--local_rank: '\uff13' is written"),
    ('llm_eval', ['--model', 'm', '--base-url', 'http://h/v1', '--num-examples', '5_0'],
     "argument --num-examples: '5_0' has"),
    ('llm_eval', ['--model', 'm', '--base-url', 'http://h/v1', '--price-per-1k', '\u0661'],
     "argument --price-per-1k: '\u0661' is written in other digits"),
])
def test_numbers_in_other_digits_or_with_underscores_are_refused(tool, argv, shown, capsys):
    config = ['--config'] if tool == 'llm_eval' else []
    with pytest.raises(SystemExit):
        load_tool(tool).parse_args([*config, 'configs/vpn_crosstask_t3.py', *argv])
    assert shown in capsys.readouterr().err


def test_plain_numbers_and_texts_with_underscores_still_parse():
    args = load_tool('train').parse_args([
        'configs/vpn_crosstask_t3.py', '--seed', '10', '--horizon', '4', '--cfg-options',
        'train_cfg.max_epochs=+5', 'optim_wrapper.optimizer.lr=1e-3', 'work_dir=/tmp/run_1',
        'model.loss_weights=[1,2.5]', 'model.type=VPN_x'])
    assert (args.seed, args.horizon) == (10, 4)
    assert args.cfg_options['train_cfg.max_epochs'] == 5
    assert args.cfg_options['optim_wrapper.optimizer.lr'] == 1e-3
    assert args.cfg_options['work_dir'] == '/tmp/run_1'

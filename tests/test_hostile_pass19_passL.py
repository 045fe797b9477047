"""Sixteenth hostile pass, engineer passL (LLM/VLM baselines, core math, configs before
training): each test fails on ab2cb94 (checked in a worktree of it) unless it says it guards
a valid input against a false refusal. Log: /tmp/passL_log.md.

- DR1: ``llm_eval --data-root X`` (other annotations: other windows) recorded no data root,
  so its row had the identity of the run on the config's own data: "replaced 1 earlier row(s)
  of this run", that run's row and side files gone, and no reader could tell the data.
- RP3: with the paper's prompts (no fixed reply key) the incomplete sequence echoed in the
  prose (a bare list holding -1) won over the answer object ``{"completed_sequence": [...]}``.
- FF1/FF3: frames named ``frame_0001_v2.jpg`` or ``0001_640x480.png`` were refused as "two
  images of one frame" (the frame number was the last run of digits, not the one that varies).
- VL1: a VLM identification reply naming two different actions was read as the first.
- NG1: ``draw_negatives`` counted ``|union of pools| ** T`` reachable sequences, though each
  candidate is drawn from one pool: asked for more than the draws reach, it never returned.
- PI1/PI3: a taxonomy action name holding a line break (or U+2028) was put in every prompt,
  where it listed an action that does not exist.
- PH2: the paper prompt set's VLM stage 2 sends "Frames of the start clip:" / "Frames of the
  goal clip:" after the paper's text: named nowhere.
- RP1/RP2: a reply with a 5000-digit number or nested 5000 deep stopped the whole run with
  Python's message (uncaught ValueError / RecursionError) instead of being unparseable.
- CA8: ``--cache-dir`` a symbolic link loop: "[Errno 17] File exists".
- C7: ``train_cfg = dict(max_epochs=5, _delete_=True)``: mmengine's raw TypeError.
- K30/K32: ``--cfg-options custom_hooks.-1.priority=1`` / ``train_dataloader.dataset={}``:
  Python's TypeError / AttributeError with a traceback.
"""
import json

import numpy as np
import pytest

from tool_modules import load_tool


def test_a_run_on_another_data_root_records_it_and_is_another_row():
    tool = load_tool('llm_eval')
    base = ['--config', 'configs/vpn_crosstask_t3.py', '--model', 'm', '--base-url',
            'http://h/v1']

    def settings(argv):  # as llm_eval's load_datasets records the data flags that change data
        args = tool.parse_args(argv)
        cfg = tool.load_config(args.config, args.cfg_options, **tool.data_path_args(args))
        args.cfg_options, args.changing_data_paths = tool.changing_options(args, cfg)
        return tool.run_settings(args, 12, 105)
    plain = settings(base)
    other = settings(base + ['--data-root', '/tmp/other/data'])
    assert 'data_root' not in plain and 'feature_dir' not in plain  # rows as before
    assert other['data_root'] == '/tmp/other/data'
    assert json.dumps(plain, sort_keys=True) != json.dumps(other, sort_keys=True)


def _matcher():
    from vpn_plugin.baselines.llm.parsing import ActionMatcher
    return ActionMatcher(['pour water', 'pour juice', 'stir', 'cut'], [0, 1, 2, 3])


def test_the_paper_prompts_answer_object_wins_over_the_echoed_sequence():
    from vpn_plugin.baselines.llm.parsing import ReplyParseError, parse_plan
    echo = 'The incomplete sequence [0, -1, 3] becomes {"completed_sequence": [0, 2, 3]}'
    assert parse_plan(echo, _matcher(), 3, any_key=True) == [0, 2, 3]
    # guards: a bare list alone is still the plan; two different answer objects are refused
    assert parse_plan('[0, 1, 3]', _matcher(), 3, any_key=True) == [0, 1, 3]
    assert parse_plan('{"answer": [0, 1, 3]} [0, 2, 3]', _matcher(), 3, any_key=False) == \
        [0, 2, 3]
    with pytest.raises(ReplyParseError, match='2 different lists'):
        parse_plan('{"a": [0, 1, 3]} {"b": [0, 2, 3]}', _matcher(), 3, any_key=True)


@pytest.mark.parametrize('reply', ['{"plan": [0, %s, 3]}' % ('9' * 5000),
                                   '[' * 5000 + ']' * 5000 + ' {"plan": [0, 1, 3]}'])
def test_a_reply_python_cannot_read_is_unparseable_not_a_crash(reply):
    from vpn_plugin.baselines.llm.parsing import ReplyParseError, parse_plan
    with pytest.raises(ReplyParseError, match='JSON value Python cannot read at character'):
        parse_plan(reply, _matcher(), 3)


def test_an_identification_reply_naming_two_actions_is_unparseable():
    from vpn_plugin.baselines.llm.parsing import ReplyParseError, parse_action
    two = 'Maybe {"action_id": 1, "action_name": "pour juice"} or rather {"action_id": 0}'
    with pytest.raises(ReplyParseError, match=r'names 2 different actions \[0, 1\]'):
        parse_action(two, _matcher())
    # guards: one action said twice (a fence and the text), or beside other objects, is read
    same = '```json\n{"action_id": 2}\n```\nSo: {"action_name": "stir"} {"confidence": 0.9}'
    assert parse_action(same, _matcher()) == 2
    assert parse_action('[{"action_id": 3, "action_name": "cut"}]', _matcher()) == 3


def _frames(folder, names):
    import cv2
    folder.mkdir()
    for number, name in enumerate(names, 1):
        cv2.imwrite(str(folder / name), np.full((8, 8, 3), 4 * number, np.uint8))
    return folder


@pytest.mark.parametrize('pattern', ['frame_{:04d}_v2.jpg', '{:04d}_640x480.png',
                                     'cam2_{}.jpg', '2024_{:04d}.jpg'])
def test_frames_with_other_digits_in_their_names_are_read_by_the_varying_number(tmp_path,
                                                                              pattern):
    import cv2
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    folder = _frames(tmp_path / 'v', [pattern.format(i) for i in range(1, 31)])
    jpeg = read_clip_frames(folder, 12, 14, 1)[0]  # t = 13 s: the 14th frame
    assert round(cv2.imdecode(np.frombuffer(jpeg, np.uint8), 1).mean() / 4) == 14


def test_two_digit_runs_that_both_vary_are_still_two_extractions(tmp_path):
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    folder = _frames(tmp_path / 'v', [f'img{k}_{i:04d}.jpg' for k in (1, 2)
                                      for i in range(1, 31)])
    with pytest.raises(ValueError, match='img1_0001.jpg and img2_0001.jpg are two images of one '
                                         'frame'):
        read_clip_frames(folder, 12, 14, 1)


def test_negatives_the_draws_cannot_reach_are_refused_not_drawn_forever():
    import random
    from vpn_plugin.core.negatives import distinct_sequences, draw_negatives
    pools = {0: (1, 2), 1: (3, 4)}
    assert distinct_sequences(list(pools.values()), 2) == 8  # 4 + 4 pairs, not 4 ** 2
    with pytest.raises(ValueError, match='cannot draw 8 distinct negatives .* offers 7 other'):
        draw_negatives((1, 2), 0, pools, 8, 0.5, 0.0, random.Random(0))
    assert len(draw_negatives((1, 2), 0, pools, 7, 0.5, 0.0, random.Random(0))) == 7
    # hard_ratio 0 draws only other tasks' pools: (1, 2) is not among them, 4 sequences are
    assert len(draw_negatives((1, 2), 0, pools, 4, 0.0, 0.0, random.Random(0))) == 4
    with pytest.raises(ValueError, match='offers 4 other'):
        draw_negatives((1, 2), 0, pools, 5, 0.0, 0.0, random.Random(0))
    # with permutations: (2, 1) is reachable from them too
    assert len(draw_negatives((1, 2), 0, pools, 5, 0.0, 0.5, random.Random(0))) == 5
    assert distinct_sequences([range(10)], 3, cap=50) == 50  # big pools: not listed


@pytest.mark.parametrize('name,shown', [('pour jello powder\n99: evil', r"'\\n'"),
                                        ('pour\u2028alcohol', r"'\\u2028'"),
                                        ('stir\tmixture', r"'\\t'")])
def test_a_taxonomy_name_that_breaks_its_prompt_line_is_refused(tmp_path, name, shown):
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    path = tmp_path / 'taxonomy.json'
    path.write_text(json.dumps({'0_1_Make Tea': {'0': 'boil water', '1': name}}))
    with pytest.raises(ValueError, match=f"action 1 name = .* holds the control or "
                                         f"line-separator character\\(s\\) {shown}; expected a "
                                         'one-line name'):
        load_taxonomy(path)


def test_released_taxonomies_and_unusual_one_line_names_still_read(shared_data, tmp_path):
    """Guard (passes on ab2cb94 too): no false refusal."""
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    for path in sorted(shared_data.glob('*/taxonomy*.json')):
        assert load_taxonomy(path).num_actions > 0
    path = tmp_path / 'taxonomy.json'
    path.write_text(json.dumps({'0_1_Tée «x»': {'0': '$examples ${taxonomy}',
                                                 '1': 'café\u00a0au lait'}}))
    assert load_taxonomy(path).action_names == ['$examples ${taxonomy}', 'café\u00a0au lait']


def test_the_paper_prompts_readme_names_the_text_sent_with_the_frames():
    from pathlib import Path
    from vpn_plugin.baselines.llm import planner
    readme = (Path(__file__).parents[1] / 'prompts/paper/README.md').read_text()
    source = Path(planner.__file__).read_text()
    for label in ('Frames of the start clip:', 'Frames of the goal clip:'):
        assert label in source
        assert f'`{label}`' in ' '.join(readme.split())


def test_a_cache_folder_that_is_a_symbolic_link_loop_is_named(tmp_path):
    import os
    from vpn_plugin.baselines.llm.backends import ResponseCache
    os.symlink(tmp_path / 'loop', tmp_path / 'loop')
    with pytest.raises(NotADirectoryError, match='loop is a symbolic link to .*loop, which leads '
                                                 r'back to itself \(a loop of links\); expected a '
                                                 'folder'):
        ResponseCache(tmp_path / 'loop')
    ResponseCache(tmp_path / 'new')  # guard: a new folder is still made


def test_a_training_loop_config_without_type_or_by_epoch_is_named(tmp_path):
    from mmengine.config import Config
    from vpn_plugin.runner import check_config_entries
    config = tmp_path / 'c.py'
    config.write_text("_base_ = ['%s']\ntrain_cfg = dict(max_epochs=5, _delete_=True)\n"
                      % (__import__('pathlib').Path(__file__).parents[1]
                         / 'configs/vpn_crosstask_t3.py'))
    with pytest.raises(ValueError, match=r"train_cfg = \{'max_epochs': 5\} names no training "
                                         r"loop \(no type, no by_epoch\); expected "
                                         r"type='EpochBasedTrainLoop'"):
        check_config_entries(Config.fromfile(str(config)), str(config))
    cfg = Config.fromfile(str(config))  # guard: by_epoch instead of type is checked, not refused
    cfg.train_cfg = dict(by_epoch=True, max_epochs=5)
    check_config_entries(cfg, str(config))


@pytest.mark.parametrize('option,shown', [
    ('custom_hooks.-1.priority=1', ": custom_hooks is a list of 1 entries and '-1' is no entry "
                                   r'number; expected custom_hooks.<n>.<key> with n in 0..0'),
    ('train_dataloader.dataset={}', r"='\{\}'; expected a dict \(the config's "
                                    r'train_dataloader.dataset holds type, .*; --cfg-options '
                                    'cannot give a dict'),
])
def test_cfg_options_that_python_could_not_apply_are_named(option, shown):
    """K30/K32: a raw TypeError ("list indices must be integers or slices, not str") and
    AttributeError ("'str' object has no attribute 'get'") with a traceback."""
    from vpn_plugin.data_paths import load_config
    key, value = option.split('=')
    with pytest.raises(ValueError, match=f'--cfg-options {key}{shown}'):
        load_config('configs/vpn_crosstask_t3.py', {key: value})


def test_cfg_options_setting_list_entries_and_dict_fields_still_apply():
    """Guard (passes on ab2cb94 too): entry numbers and one field at a time still apply; a
    dict may still be set to None."""
    from vpn_plugin.data_paths import load_config
    cfg = load_config('configs/vpn_crosstask_t3.py', {'custom_hooks.0.priority': 'LOW',
                                                      'model.loss_weights.plan': 2.0})
    assert cfg.custom_hooks[0]['priority'] == 'LOW' and cfg.model.loss_weights['plan'] == 2.0

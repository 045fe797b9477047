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
- TR5: --backend transformers with --base-url ran the local model and recorded the unused
  endpoint in the row's settings (a false record).
- AN13/AN9/AN10: an anchors JSON saved with a BOM was refused; a true among the ids was read
  as action 1, a key given twice as its last list.
- HS13: bootstrap_ci refused Fraction scores ("expected real numbers"); CT1: a Literal
  argument refused np.str_('dense') ("expected one of ... 'dense'").
- P1/P2/P4: a reply of two different bare lists was read as the first, an action object whose
  id and name disagree as its id, a response of two choices as the first: now unparseable /
  a malformed response. P7/P10: token counts "100" and true were read as 100 and 1 (the
  client's model coerced them before checked_reply); P8: a reply with only its prompt count
  was said to have "reported no token usage: counted 0 tokens".
- known: a price whose cost overflows is refused after the requests were paid: the message
  now says that a rerun is served from the cache. A config reached through a symbolic link
  elsewhere was refused (mmengine looked for its _base_ beside the link: a false refusal). A
  results row of llm_eval held the config path as typed: the same run given a relative and an
  absolute path wrote two rows.
- T4/T5: a _base_ name with a trailing space ended in mmengine's 'file "... " does not exist'
  (the inheriting config not named); _base_ assigned twice was read by mmengine as its first
  value (an empty config: "model = None") and by the literal reader as both.
"""
import numpy as np
import pytest

from test_llm_tools import tiny_config  # noqa: F401  (a fixture)
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
    from vpn_plugin.data_paths import literal_config
    path = tmp_path / 'c.py'
    path.write_text(text)
    assert Config.fromfile(str(path)).to_dict()  # mmengine runs it
    with pytest.raises(ValueError, match=r'c\.py:\d+: .*in this subset'):  # since passC s14:
        literal_config(path)  # a change in place is outside the literal subset: refused


def test_values_shared_but_never_changed_are_still_read(tmp_path):
    from vpn_plugin.data_paths import literal_config
    path = tmp_path / 'c.py'
    path.write_text('inner = dict(h=3)\nouter = dict(ds=inner, copy=dict(**inner))\n'
                    'alias = inner\nlst = [1]\nlst2 = lst + [2]\nn = 1\nn += 2\n'
                    'other = dict(h=4)\n')
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


def test_a_base_url_with_the_local_backend_is_refused_not_recorded(capsys):
    with pytest.raises(SystemExit):
        load_tool('llm_eval').parse_args(['--config', 'configs/vpn_crosstask_t3.py', '--model',
                                          'models/tiny', '--backend', 'transformers',
                                          '--base-url', 'http://127.0.0.1:9/v1'])
    assert ('--base-url is for the openai backend; --backend transformers runs the local model '
            'models/tiny in this process') in capsys.readouterr().err


@pytest.mark.parametrize('text,error', [
    ('\ufeff{"first": [1, 2], "last": [3, 4]}', None),
    ('{"first": [true, 2], "last": [3, 4]}', 'field "first"[0] = true; expected an action id'),
    ('{"first": [0, 0], "last": [3, 4], "first": [1, 2]}', "the key 'first' is given twice"),
])
def test_an_anchors_file_is_read_as_written(tmp_path, text, error):
    from vpn_plugin.baselines.llm.anchors import load_anchor_predictions
    path = tmp_path / 'anchors.json'
    path.write_text(text, encoding='utf-8')
    if error is None:
        first, last = load_anchor_predictions(path, 2, 10)
        assert first.tolist() == [1, 2] and last.tolist() == [3, 4]
    else:
        with pytest.raises(ValueError, match=error.replace('[', r'\[')):
            load_anchor_predictions(path, 2, 10)


def test_real_numbers_of_other_kinds_are_read():
    from fractions import Fraction
    import torch
    from vpn_plugin.core.dvl import differentiable_viterbi
    from vpn_plugin.core.stats import bootstrap_ci
    assert bootstrap_ci([Fraction(31), Fraction(30), Fraction(33)]) == bootstrap_ci([31, 30, 33])
    emissions = torch.zeros(1, 2, 2, dtype=torch.float64)
    transitions = torch.full((2, 2), 0.5, dtype=torch.float64).log()
    assert differentiable_viterbi(emissions, transitions, impl=np.str_('dense'))[1].tolist() == \
        differentiable_viterbi(emissions, transitions, impl='dense')[1].tolist()
    with pytest.raises(ValueError, match="impl=True; expected one of"):
        differentiable_viterbi(emissions, transitions, impl=True)


@pytest.mark.parametrize('reply,match', [
    ('I would say [0, 3, 2], or perhaps [0, 1, 2].', 'reply holds 2 different lists'),
    ('{"plan": [0, {"action_id": 1, "action_name": "pour water"}, 2]}', 'disagree'),
])
def test_a_reply_naming_two_answers_is_not_read_as_one(reply, match):
    from test_llm_prompting import make_taxonomy
    from vpn_plugin.baselines.llm.parsing import ActionMatcher, ReplyParseError, parse_plan
    matcher = ActionMatcher(make_taxonomy().action_names, range(6))
    with pytest.raises(ReplyParseError, match=match):
        parse_plan(reply, matcher, 3)
    assert parse_plan('Given [0, -1, 2]: {"plan": [0, {"action_id": 1, "action_name": '
                      '"Boil  water"}, 2]}', matcher, 3) == [0, 1, 2]
    assert parse_plan('[0, 1, 2] that is ```[0, 1, 2]```', matcher, 3) == [0, 1, 2]


def raw_body(usage, choices=1):
    import json
    usage = {**usage, 'total_tokens': 107}  # complete: the client's model then coerces types
    return {'raw': json.dumps({
        'id': 'x', 'object': 'chat.completion', 'created': 0, 'model': 'fake-model',
        'choices': [{'index': i, 'finish_reason': 'stop', 'message': {
            'role': 'assistant', 'content': '{"plan": [0, %d, 2]}' % (1 + i)}}
            for i in range(choices)], 'usage': usage})}


@pytest.mark.parametrize('body,failure,tokens', [
    (raw_body({'prompt_tokens': '100', 'completion_tokens': 7}), "prompt_tokens is '100'", None),
    (raw_body({'prompt_tokens': True, 'completion_tokens': 7}), 'prompt_tokens is True', None),
    (raw_body({'prompt_tokens': 100, 'completion_tokens': 7}, choices=2), 'holds 2 choices',
     None),
    (raw_body({'prompt_tokens': 100.0, 'completion_tokens': 7.0}), None, (100, 7)),
    (raw_body({'prompt_tokens': 100, 'completion_tokens': None}), None, (100, 0)),
])
def test_a_response_is_read_as_the_endpoint_wrote_it(tmp_path, body, failure, tokens):
    from fake_openai_server import FakeOpenAIServer
    from test_hostile_llm import plan_once
    from vpn_plugin.baselines.llm.evaluate import token_summary
    with FakeOpenAIServer(lambda prompt, attempt: body) as server:
        outcome, usage = plan_once(server, tmp_path / 'cache')
    if failure:
        assert outcome.status == 'request_failed' and failure in outcome.detail
    else:
        assert outcome.status == 'ok'
        assert (usage['prompt_tokens'], usage['completion_tokens']) == tokens
        partial = tokens == (100, 0)
        assert usage['replies_without_usage'] == int(partial)
        assert ('reported no token usage or only part of it: a missing count is counted 0'
                in token_summary(usage)) == partial


def test_a_cost_overflow_says_a_rerun_is_served_from_the_cache():
    from vpn_plugin.baselines.llm.evaluate import usage_record
    usage = dict.fromkeys(('prompt_tokens', 'completion_tokens', 'cached_prompt_tokens',
                           'cached_completion_tokens'), 0)
    usage.update(prompt_tokens=2014, completion_tokens=48)
    with pytest.raises(ValueError, match='no row was written: rerun with the price, the replies '
                                         'are served from the cache'):
        usage_record(usage, [1e308])


def test_a_config_reached_through_a_link_elsewhere_reads_as_its_target(tmp_path):
    import os
    from vpn_plugin.data_paths import load_config, read_config_file
    os.symlink(os.path.abspath('configs/vpn_crosstask_t3.py'), tmp_path / 't3.py')
    linked, plain = read_config_file(tmp_path / 't3.py'), read_config_file(
        'configs/vpn_crosstask_t3.py')
    assert linked.to_dict() == plain.to_dict()
    assert load_config(tmp_path / 't3.py').to_dict() == load_config(
        'configs/vpn_crosstask_t3.py').to_dict()
    args = load_tool('train').parse_args([str(tmp_path / 't3.py'), '--cfg-options',
                                          'train_cfg.max_epochs=5'])
    assert args.cfg_options == {'train_cfg.max_epochs': 5}


def test_the_same_llm_run_given_a_relative_or_absolute_config_is_one_row(
        tiny_config, tmp_path, monkeypatch):
    from fake_openai_server import FakeOpenAIServer
    from test_llm_tools import echo_anchors, run_tool
    from vpn_plugin.protocol.results import read_results
    tool = load_tool('llm_eval')
    monkeypatch.chdir(tiny_config.parent.parent)
    relative = f'{tiny_config.parent.name}/./{tiny_config.name}'
    with FakeOpenAIServer(echo_anchors) as server:
        run_tool(tool, server, tiny_config, tmp_path)
        run_tool(tool, server, relative, tmp_path)
    rows = read_results(tmp_path / 'results.jsonl')
    assert len(rows) == 1 and rows[0].config == str(tiny_config)
    from vpn_plugin.data_paths import REPO_ROOT, row_config_path
    assert row_config_path(f'{REPO_ROOT}/configs/../configs/vpn_coin_t3.py') == \
        'configs/vpn_coin_t3.py'


@pytest.mark.parametrize('text,shown', [
    ("_base_ = ['{t3} ']\n", "the file '{t3} ' it inherits (_base_) does not exist (its name "
                             "ends or starts with a space)"),
    ("_base_ = []\n_base_ = ['{t3}']\n", 'lines 1, 2: _base_ is assigned 2 times; mmengine '
                                         'reads only the first ([])'),
])
def test_a_base_mmengine_would_misread_is_named(tmp_path, text, shown):
    import os
    from vpn_plugin.data_paths import read_config_file
    t3 = os.path.abspath('configs/vpn_crosstask_t3.py')
    config = tmp_path / 'c.py'
    config.write_text(text.format(t3=t3))
    with pytest.raises((ValueError, FileNotFoundError)) as error:
        read_config_file(config)
    assert f'{config}: ' in str(error.value) and shown.format(t3=t3) in str(error.value)


def test_an_empty_video_is_named_as_empty(tmp_path):
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    (tmp_path / 'v.mp4').write_bytes(b'')
    with pytest.raises(ValueError, match=r'v\.mp4: it is empty \(0 bytes\); expected a video '
                                         'file OpenCV decodes'):
        read_clip_frames(tmp_path / 'v.mp4', 12, 14, 1)

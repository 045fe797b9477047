"""Eighteenth hostile pass, passL (start commit 3ce84f9; log /tmp/passL_log.md).

- R3, PP6, T1-T3, V2 (wrong): a reasoning model's inline thinking (``<think>...</think>``, as
  Qwen3 of the paper's LLM rows writes it when the server does not split it off, and as
  ``--backend transformers`` returns it) was read as part of the answer: a draft plan in it made
  the reply "2 different plans" (scored 0), or was scored instead of the answer after it (T1).
- M12 (wrong, false refusal): plans in a numpy object array of Python ints (a pandas column's
  values) were refused as "action id 3, beyond int64".
- H3 (silent): ``--cfg-options`` restating the config's own value (``horizon=3`` on a T=3 config)
  made another results row of the same run (appended beside it; the report refused the pair).
- L14, L15, L27 (silent): ``--frames-fps`` / ``--num-frames`` / ``--video-root`` without
  ``--vlm`` were read by nothing, without a word.
- H2, NC18 (vague): the horizon refusals advised ``--horizon``, which llm_eval does not have.
"""
import json

import numpy as np
import pytest

from tool_modules import load_tool
from vpn_plugin.baselines.llm.parsing import (ActionMatcher, OutOfTaxonomyError,
                                              ReplyParseError, parse_action, parse_plan)
from vpn_plugin.core.metrics import planning_metrics

NAMES = ['pour water', 'pour juice', 'pour jello powder', 'pour alcohol', 'stir mixture',
         'pour mixture into cup']
MATCHER = ActionMatcher(NAMES, range(len(NAMES)))
ANSWER, DRAFT = [3, 3, 0], [3, 4, 0]


@pytest.mark.parametrize('reply,any_key', [
    (f'<think>Maybe {json.dumps({"plan": DRAFT})} no.</think>\n{json.dumps({"plan": ANSWER})}',
     False),                                                                      # R3
    (f'<think>draft: {json.dumps({"plan": DRAFT})} hmm.</think>\n{json.dumps(ANSWER)}', True),
    (f'draft {json.dumps(DRAFT)} ok.\n</think>\n\n{json.dumps(ANSWER)}', False),  # T2
    (f'<think>first try {json.dumps(DRAFT)}</think>{json.dumps(ANSWER)}', True),   # T3
    (f'<THINKING>{json.dumps(DRAFT)}</THINKING> {json.dumps({"plan": ANSWER})}', False),
    (f'<think>a {DRAFT}</think><think>b {DRAFT}</think>```json\n{ANSWER}\n```', True),
])
def test_a_reasoning_models_thinking_is_no_part_of_its_answer(reply, any_key):
    assert parse_plan(reply, MATCHER, 3, any_key=any_key) == ANSWER


@pytest.mark.parametrize('reply', [  # guards: a tag inside the answer is text, not thinking
    json.dumps({'plan': ANSWER, 'note': 'I wrote <think> tags first'}),
    json.dumps({'plan': ANSWER, 'note': 'then </think>'}) + ' <thinking>',
])
def test_a_tag_inside_the_answer_is_left_as_written(reply):
    assert parse_plan(reply, MATCHER, 3) == ANSWER


def test_thinking_after_the_answer_is_not_taken_for_thinking_before_it():
    reply = f'{json.dumps({"plan": ANSWER})} <think>{json.dumps({"plan": DRAFT})}</think>'
    with pytest.raises(ReplyParseError, match='2 different plans'):
        parse_plan(reply, MATCHER, 3)  # which one is the answer is not known: as before


def test_an_unclosed_thinking_block_holds_no_answer():
    with pytest.raises(ReplyParseError, match='no object'):
        parse_plan(f'<think>the plan could be {json.dumps({"plan": DRAFT})}', MATCHER, 3)


def test_the_vlm_step_reads_the_action_after_the_thinking():
    reply = '<think>maybe {"action_id": 4}</think>{"action_id": 3, "action_name": "pour alcohol"}'
    assert parse_action(reply, MATCHER) == 3                                     # V2


@pytest.mark.parametrize('reply,expected', [  # guards: replies without thinking read as before
    (json.dumps({'plan': ANSWER}), ANSWER),
    (f'The ids range over [0, 5]. Answer: {json.dumps({"plan": ANSWER})}', ANSWER),
    ('plan: [3, 3, 0]', ANSWER),
])
def test_replies_without_thinking_are_read_as_before(reply, expected):
    assert parse_plan(reply, MATCHER, 3) == expected
    with pytest.raises(ReplyParseError, match='2 different plans'):
        parse_plan(json.dumps({'plan': ANSWER, 'steps': DRAFT}), MATCHER, 3)
    with pytest.raises(OutOfTaxonomyError):
        parse_plan(json.dumps({'plan': [3, 9, 0]}), MATCHER, 3)


PRED, GT = [[1, 2, 9], [4, 5, 5]], [[1, 2, 3], [4, 4, 5]]


@pytest.mark.parametrize('pred', [
    np.array(PRED, dtype=object),                          # M12: Python ints in an object array
    np.array([[1, 2, np.int64(9)], [4, 5, 5]], dtype=object),
    np.array(PRED, dtype='>i4'), np.asfortranarray(np.array(PRED, np.int16)),
    np.array(PRED, np.uint8), [tuple(p) for p in PRED],
])
def test_plans_in_any_integer_layout_score_the_same(pred):
    assert planning_metrics(pred, np.array(GT, dtype=object)) == planning_metrics(PRED, GT)


def test_object_plans_beyond_int64_or_not_integers_are_still_refused():
    with pytest.raises(ValueError, match='action id 1180591620717411303424, beyond int64'):
        planning_metrics(np.array([[1, 2, 2 ** 70]], dtype=object), [[1, 2, 3]])
    for bad in (None, True, 2.0):
        with pytest.raises(TypeError, match='dtype object; expected integer action ids'):
            planning_metrics(np.array([[1, 2, bad]], dtype=object), [[1, 2, 3]])


def _config(tmp_path):
    config = tmp_path / 'c.py'
    config.write_text(
        "train_dataloader = dict(dataset=dict(type='PlanningDataset', horizon=3, "
        "split='train', video_list='tr.json'))\n"
        "test_dataloader = dict(dataset=dict(type='PlanningDataset', horizon=3, "
        "split='test', video_list='te.json'))\n")
    return config


def _llm_args(config, *extra):
    return load_tool('llm_eval').parse_args(['--config', str(config), '--model', 'm',
                                             '--base-url', 'http://127.0.0.1:9/v1', *extra])


def test_options_restating_the_configs_values_are_not_another_run(tmp_path):
    from vpn_plugin.data_paths import load_config
    tool, config = load_tool('llm_eval'), _config(tmp_path)
    for options, changing in [
            (['horizon=3'], {}),                                                    # H3
            (['test_dataloader.dataset.split=test', 'horizon=3'], {}),             # NC28
            (['train_dataloader.dataset.video_list=other.json', 'horizon=3'],
             {'train_dataloader.dataset.video_list': 'other.json'}),
            (['train_dataloader.dataset.video_list=other.json'],
             {'train_dataloader.dataset.video_list': 'other.json'})]:
        args = _llm_args(config, '--cfg-options', *options)
        assert tool.changing_options(args, load_config(config, args.cfg_options)) == (
            changing, {})  # no data flag given (the nineteenth pass: D4)


@pytest.mark.parametrize('flags', [['--frames-fps', '2'], ['--num-frames', '4'],
                                   ['--video-root', 'frames']])
def test_vlm_options_without_vlm_are_refused(tmp_path, flags, capsys):
    with pytest.raises(SystemExit):
        _llm_args(_config(tmp_path), *flags)
    assert f'{flags[0]} is for the VLM mode: add --vlm, or drop {flags[0]}' in \
        capsys.readouterr().err


def test_vlm_options_keep_their_defaults_with_vlm(tmp_path):
    args = _llm_args(_config(tmp_path), '--vlm', '--video-root', 'frames')
    assert (args.num_frames, args.frames_fps) == (4, 1.0)
    args = _llm_args(_config(tmp_path), '--vlm', '--video-root', 'frames', '--num-frames', '04',
                     '--frames-fps', '1.0')
    assert (args.num_frames, args.frames_fps) == (4, 1.0)
    args = _llm_args(_config(tmp_path))
    assert (args.num_frames, args.frames_fps, args.video_root) == (4, 1.0, None)


def test_the_horizon_advice_names_what_every_tool_accepts(tmp_path):
    from vpn_plugin.data_paths import load_config
    with pytest.raises(ValueError, match=r'set horizon = 3 \(or --cfg-options horizon=3; '
                                         r'train.py / test.py: --horizon 3\)'):
        load_config(_config(tmp_path), {'horizon': 4})                             # H2
    with pytest.raises(ValueError, match=r'give horizon=T \(train.py / test.py: --horizon T\)'):
        load_config(_config(tmp_path), {'test_dataloader.dataset.horizon': 3})     # NC18


def test_a_results_file_with_a_broken_line_is_named_with_the_line(tmp_path):
    """RJ1 (vague): a file of our rows with a truncated last line (an interrupted copy) was 'not
    recognisably an earlier output', with neither the line nor the cause."""
    from vpn_plugin.outputs import check_output
    row = {'method': 'm', 'metrics': {'success_rate': 1.0}}
    out = tmp_path / 'results.jsonl'
    out.write_text(json.dumps(row) + '\n' + json.dumps(row)[:20])
    with pytest.raises(ValueError, match=r'\(results file \(JSON lines\): line 2 is not JSON '
                                         r'\(Unterminated string'):
        check_output(out, 'results', flag='--out')
    out.write_text(json.dumps(row) + '\n{"method": "x"}\n')
    with pytest.raises(ValueError, match='line 2 is not a results row'):
        check_output(out, 'results', flag='--out')
    out.write_text(json.dumps(row) + '\n\n' + json.dumps(row) + '\r\n')  # ours: accepted
    check_output(out, 'results', flag='--out')

"""Nineteenth hostile pass, passL (start commit 84e3204; log /tmp/passL_log.md).

- R1-R3, R5, R6, R14, R15, V1 (wrong, false refusals): reasoning models that write their
  thinking inline in other forms than ``<think>`` (Magistral's ``[THINK]``, gpt-oss's harmony
  channels, Seed-OSS's ``<seed:think>``, Kimi-VL's ``◁think▷``), or after a byte-order mark or
  a word of prose: a draft in the thinking made the reply "2 different plans" (scored 0).
- K1 (wrong): the reply cache keyed the endpoint without its port (closing16 item 7): a second
  server on the same host, serving another checkpoint under the same model name, was scored
  with the first one's replies, while docs/llm.md says the cache never scores another
  server's replies.
- B5, B7 (silent): a bool among the ids of a Python list (``[[True, 1]]``) was read as the id
  1 by build_pkg / transition_counts and planning_metrics (numpy reads it as an integer),
  while an all-bool list or array was refused.
- B6 (silent): pkg_beam_search at T = 1 scored a first action other than the last one 0.0
  (log-probability 1, a feasible path), where every other infeasible request scores -inf.
- D4 (silent): ``llm_eval --data-root ../shared/data`` on a config whose own data root it is
  recorded ``settings.data_root``: another results row of the same run (the eighteenth pass
  fixed this for ``--cfg-options`` only).
- E2 (wrong, false refusal): entropy_bits / js_divergence refused float32 probabilities that
  sum to 1 within float32 rounding (three of 1/3: 1 + 3e-8 against a float64 tolerance of
  1e-9), saying "(sum 1); expected ... summing to 1".
- T1, T2, T7, T8 (vague): a config's backend options (configs/llm/*, tools/test.py) were not
  checked as llm_eval's flags are: temperature -1 / true and max_tokens 0 went to the endpoint
  (refused there per request, in its words), max_retries -1 raised AssertionError('unreachable').
- CA6 (silent): a cache entry that is a broken symbolic link was replaced and counted as
  "damaged ... (each named above)" without being named.
"""
import json

import numpy as np
import pytest

from vpn_plugin.baselines.llm.parsing import (ActionMatcher, ReplyParseError, parse_action,
                                              parse_plan)

NAMES = ['pour water', 'pour juice', 'pour jello powder', 'pour alcohol', 'stir mixture',
         'pour mixture into cup']
MATCHER = ActionMatcher(NAMES, range(len(NAMES)))
ANSWER, DRAFT = [3, 3, 0], [0, 0, 0]
A, D = json.dumps({'plan': ANSWER}), json.dumps({'plan': DRAFT})


@pytest.mark.parametrize('reply', [
    f'[THINK]Draft: {D} no.[/THINK]\n{A}',                                         # R1
    f'analysisWe need a plan. Maybe {D}. Better the other.assistantfinal{A}',       # R2
    f'<|channel|>analysis<|message|>Maybe {D}.<|end|><|start|>assistant<|channel|>final'
    f'<|message|>{A}<|return|>',                                                     # R3
    f'\ufeff<think>draft {D}</think>{A}',                                            # R5
    f'Sure. <think>draft {D}</think>{A}',                                            # R6
    f'<seed:think>draft {D}</seed:think>{A}',                                        # R14
    f'\u25c1think\u25b7draft {D}\u25c1/think\u25b7{A}',                             # R15
    f'draft {DRAFT} ok [/THINK]\n{json.dumps(ANSWER)}',  # a template-opened [THINK] block
])
def test_thinking_in_other_forms_is_no_part_of_the_answer(reply):
    assert parse_plan(reply, MATCHER, 3) == ANSWER
    assert parse_plan(reply, MATCHER, 3, any_key=True) == ANSWER


def test_the_vlm_step_reads_the_action_after_a_think_block_of_magistral():
    reply = '[THINK]Maybe {"action_id": 4}. No.[/THINK]{"action_id": 3}'          # V1
    assert parse_action(reply, MATCHER) == 3


@pytest.mark.parametrize('reply,message', [
    (f'{A} [THINK]{D}[/THINK]', '2 different'),  # guards: after a JSON value: a second answer
    (f'{A} <seed:think>{D}</seed:think>', '2 different'),
    (f'Answer {json.dumps(ANSWER)} <think>{json.dumps(DRAFT)}</think>', '2 different'),
    (f'[THINK]the plan could be {D}', 'no object'),  # unclosed thinking holds no answer
    (f'<|channel|>analysis<|message|>the plan could be {D}', 'no object'),
    (f'\u25c1think\u25b7{D}', 'no object'),
])
def test_thinking_after_an_answer_or_unclosed_is_no_answer(reply, message):
    with pytest.raises(ReplyParseError, match=message):
        parse_plan(reply, MATCHER, 3)


@pytest.mark.parametrize('reply', [  # guards: replies of the eighteenth pass read as before
    A, f'```json\n{A}\n```', json.dumps({'plan': ANSWER, 'note': 'analysis first'}),
    f'analysis: none needed. {A}', json.dumps({'plan': ANSWER, 'note': '[THINK] tags'}),
])
def test_replies_without_thinking_are_read_as_before(reply):
    assert parse_plan(reply, MATCHER, 3) == ANSWER


def test_a_server_on_another_port_is_not_served_the_first_ones_replies(tmp_path):
    from fake_openai_server import FakeOpenAIServer
    from vpn_plugin.baselines.llm.backends import OpenAIChatBackend
    messages = [{'role': 'user', 'content': 'plan it'}]
    with FakeOpenAIServer(lambda prompt, attempt: {'text': '[1, 2, 3]'}) as first, \
            FakeOpenAIServer(lambda prompt, attempt: {'text': '[3, 2, 1]'}) as second:
        # two checkpoints served under one model name on one host
        replies = [OpenAIChatBackend(server.base_url, 'planner', max_retries=0,
                                     cache_dir=tmp_path / 'cache').complete(messages)
                   for server in (first, second)]
        assert len(first.requests) == len(second.requests) == 1                  # K1
    assert [reply.text for reply in replies] == ['[1, 2, 3]', '[3, 2, 1]']


def test_a_broken_link_in_the_cache_is_named_when_discarded(tmp_path, capsys):
    from vpn_plugin.baselines.llm.backends import ChatReply, ResponseCache
    cache = ResponseCache(tmp_path / 'cache')
    key = 'ab' + '0' * 62
    cache.put(key, ChatReply('[1, 2, 3]', 5, 3))
    assert cache.get(key).text == '[1, 2, 3]'  # guard: an entry is served
    entry = tmp_path / 'cache' / 'ab' / f'{key}.json'
    entry.unlink()
    entry.symlink_to(tmp_path / 'gone.json')
    assert cache.holds(key) and cache.get(key) is None
    assert not entry.is_symlink()  # removed: the reply asked again is written there
    err = capsys.readouterr().err
    assert f'discarded the corrupt cache entry {entry}' in err and 'a symbolic link to ' \
        f'{tmp_path / "gone.json"}, which' in err                                  # CA6


@pytest.mark.parametrize('read', [
    lambda ids: __import__('vpn_plugin.core.pkg', fromlist=['x']).build_pkg(ids, 5),
    lambda ids: __import__('vpn_plugin.core.pkg', fromlist=['x']).transition_counts(ids, 5),
    lambda ids: __import__('vpn_plugin.core.metrics', fromlist=['x']).planning_metrics(
        ids, [[1, 1]]),
])
@pytest.mark.parametrize('ids', [[[True, 1]], [(0, np.True_)], [[1, 1], [False, 1]]])
def test_a_bool_among_ids_is_refused(read, ids):
    if len(ids) == 2:  # planning_metrics: as many plans as the ground truth
        ids = ids[1:]
    with pytest.raises(TypeError, match=r'holds \S*(True|False)\S* among its action ids'):
        read(ids)


@pytest.mark.parametrize('ids', [[[1, 1]], [(np.int64(1), 1)], np.array([[1, 1]], np.uint8),
                                 [np.array([1, 1])], ((i for i in (1, 1)),)])
def test_ids_in_any_integer_form_still_count(ids):  # guards, one-pass sequences too
    from vpn_plugin.core.metrics import planning_metrics
    from vpn_plugin.core.pkg import build_pkg
    assert build_pkg(ids, 3)[1, 1] == 1.0
    if not isinstance(ids, tuple):
        assert planning_metrics(ids, [[1, 1]])['success_rate'] == 100.0


def test_a_one_step_path_cannot_end_at_another_action():
    import torch
    from vpn_plugin.core.beam_search import pkg_beam_search
    log_a = torch.tensor([[0.0, float('-inf')], [float('-inf'), 0.0]], dtype=torch.float64)
    paths, scores = pkg_beam_search(log_a, torch.tensor([0, 1]), torch.tensor([1, 1]), 1)
    assert paths.tolist() == [[0], [1]] and scores.dtype == torch.float64
    assert scores.tolist() == [float('-inf'), 0.0]                               # B6


def test_a_data_flag_restating_the_configs_own_is_not_another_run(shared_data, tmp_path,
                                                                     monkeypatch):
    from pathlib import Path
    from tool_modules import load_tool
    repo = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(repo)  # the config's data_root '../shared/data' is read from here
    tool = load_tool('llm_eval')
    other = tmp_path / 'data'  # the same annotations through another folder: other data
    other.symlink_to(shared_data.resolve(), target_is_directory=True)

    def settings(data_root):  # load_datasets' steps before the windows are read
        from vpn_plugin.data_paths import load_config
        args = tool.parse_args(['--config', 'configs/vpn_crosstask_t3.py', '--model', 'm',
                                '--base-url', 'http://127.0.0.1:1/v1', '--data-root', data_root])
        cfg = load_config(args.config, args.cfg_options, data_root=data_root)
        args.cfg_options, args.changing_data_paths = tool.changing_options(args, cfg)
        return tool.run_settings(args, 12, 105)
    assert 'data_root' not in settings('../shared/data')                           # D4
    assert settings(str(other))['data_root'] == str(other)  # guard: other data is recorded


@pytest.mark.parametrize('dtype', [np.float32, np.float16, np.float64])
def test_probabilities_of_any_float_dtype_summing_to_one_are_a_distribution(dtype):
    from vpn_plugin.core.diversity import entropy_bits, js_divergence
    third = {(i,): dtype(1 / 3) for i in range(3)}                                  # E2
    assert entropy_bits(third) == pytest.approx(np.log2(3), abs=1e-3)
    assert js_divergence(third, third) == pytest.approx(0.0, abs=1e-3)


def test_probabilities_summing_to_other_than_one_are_still_refused():  # guard
    from vpn_plugin.core.diversity import entropy_bits
    for distribution in ({(1,): 0.5, (2,): 0.4}, {(1,): 0.5, (2,): 0.5 + 1e-6},
                         {(1,): np.float32(0.5), (2,): np.float32(0.499)}):
        with pytest.raises(ValueError, match='summing to 1'):
            entropy_bits(distribution)


@pytest.mark.parametrize('options,message', [
    (dict(params={'temperature': -1}), 'backend.params.temperature=-1; expected a finite'),  # T1
    (dict(params={'temperature': True}), 'backend.params.temperature=True; expected'),       # T2
    (dict(max_retries=-1), 'backend.max_retries=-1; expected an integer >= 0'),             # T7
    (dict(params={'max_tokens': 0}), 'backend.params.max_tokens=0; expected an integer >= 1'),
])
def test_a_configs_backend_options_are_checked_as_the_flags_are(options, message):
    from vpn_plugin.baselines.llm.backends import build_backend
    with pytest.raises(ValueError, match=message.replace('.', r'\.')):
        build_backend(dict(type='openai', base_url='http://127.0.0.1:9/v1', model='m', **options))


@pytest.mark.parametrize('options', [  # guards: what llm_eval and the shipped configs pass
    dict(params={'temperature': 0.0}), dict(params={'temperature': np.float32(0.7),
                                                    'max_tokens': np.int64(64), 'top_p': 0.5}),
    dict(params=None, max_retries=0, timeout=30, backoff=0), dict()])
def test_valid_backend_options_still_build(options):
    from vpn_plugin.baselines.llm.backends import build_backend
    assert build_backend(dict(type='openai', base_url='http://127.0.0.1:9/v1', model='m',
                              **options)).model == 'm'

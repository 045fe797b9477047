"""Replies an endpoint should never send (issue 25, items 2 and 6): a reply that is not a
usable completion (``"content": null``, a malformed token count) is a request failure, retried
and counted, never cached as a success; a corrupt cache entry is named, discarded and asked
again."""
import json

import numpy as np
import pytest

from fake_openai_server import FakeOpenAIServer
from test_llm_endpoint import MAX_RETRIES, make_backend
from test_llm_prompting import TRAIN_PLANS, TRAIN_TASKS, make_pkg, make_taxonomy
from vpn_plugin.baselines.llm.evaluate import build_queries, run_planner
from vpn_plugin.baselines.llm.planner import PromptPlanner
from vpn_plugin.baselines.llm.prompting import PromptBuilder


def completion(content, usage=None) -> dict:
    """A raw chat-completion body (the fake server's {'raw': ...} action)."""
    return {'raw': json.dumps({
        'id': 'x', 'object': 'chat.completion', 'created': 0, 'model': 'fake-model',
        'choices': [{'index': 0, 'finish_reason': 'stop',
                     'message': {'role': 'assistant', 'content': content}}],
        'usage': usage or {'prompt_tokens': 7, 'completion_tokens': 3, 'total_tokens': 10}})}


GOOD = '{"plan": [0, 1, 2]}'
BAD_REPLIES = {
    'content null': completion(None),
    'token count not a number': completion(GOOD, {'prompt_tokens': 'many',
                                                  'completion_tokens': 3}),
    'negative token count': completion(GOOD, {'prompt_tokens': -5, 'completion_tokens': 3}),
}


def plan_once(server, cache_dir):
    builder = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, pkg=make_pkg(),
                            num_examples=2)
    backend = make_backend(server, cache_dir)
    queries = build_queries(np.array([[0, 1, 2]]), np.zeros(1), anchors='oracle')
    outcomes = run_planner(PromptPlanner(backend, builder), queries, concurrency=1,
                           progress=False)
    return outcomes[0], backend.usage.counts


@pytest.mark.parametrize('name', list(BAD_REPLIES))
def test_an_unusable_reply_is_a_failed_request_and_never_cached(tmp_path, name):
    replies = {'bad': True}
    script = lambda prompt, attempt: BAD_REPLIES[name] if replies['bad'] else {'text': GOOD}  # noqa: E731
    with FakeOpenAIServer(script) as server:
        outcome, usage = plan_once(server, tmp_path / 'cache')
        assert outcome.status == 'request_failed' and outcome.failure == 'malformed_response'
        assert len(server.requests) == 1 + MAX_RETRIES and usage['failed'] == 1
        assert not list((tmp_path / 'cache').rglob('*.json')), 'a failure was cached'
        replies['bad'] = False  # the endpoint recovers: the rerun asks again and succeeds
        outcome, usage = plan_once(server, tmp_path / 'cache')
    assert outcome.status == 'ok' and outcome.plan == [0, 1, 2] and usage['cache_hits'] == 0


def test_a_corrupt_cache_entry_is_named_discarded_and_asked_again(tmp_path, capsys):
    with FakeOpenAIServer(lambda prompt, attempt: {'text': GOOD}) as server:
        plan_once(server, tmp_path / 'cache')
        [entry] = list((tmp_path / 'cache').rglob('*.json'))
        for damage in ('{"text": "{\\"plan\\"', json.dumps({'text': GOOD, 'prompt_tokens': 'x',
                                                            'completion_tokens': 1})):
            entry.write_text(damage)  # an interrupted disk, or an entry of a buggy version
            outcome, usage = plan_once(server, tmp_path / 'cache')
            assert outcome.status == 'ok' and usage['cache_hits'] == 0
            assert f'discarded the corrupt cache entry {entry}' in capsys.readouterr().err
            assert json.loads(entry.read_text())['prompt_tokens'] > 0  # rebuilt
        assert len(server.requests) == 3


def test_llm_eval_with_null_replies_writes_no_row(tiny_crosstask, tmp_path, monkeypatch):
    """Today: every window 'unparseable', exit 0 and a results row (mIoU 24.86)."""
    from test_llm_tools import run_tool
    from tool_modules import load_tool
    config = tmp_path / 'tiny_llm.py'
    config.write_text(f"train_dataloader = dict(dataset={tiny_crosstask['train_dataset']!r})\n"
                      f"test_dataloader = dict(dataset={tiny_crosstask['test_dataset']!r})\n")
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    with FakeOpenAIServer(lambda prompt, attempt: BAD_REPLIES['content null']) as server:
        with pytest.raises(SystemExit, match='no results row written'):
            run_tool(load_tool('llm_eval'), server, config, tmp_path)
    assert not (tmp_path / 'results.jsonl').exists()
    assert not list((tmp_path / 'cache').rglob('*.json'))


def test_an_edited_or_misplaced_cache_entry_is_named_and_asked_again(tmp_path, capsys):
    """Issue 33, item 4: today an edited entry is served ('cache hits 10', mAcc 70.00 ->
    63.33), and so is an entry copied under another request's key."""
    import shutil
    script = lambda prompt, attempt: {'text': GOOD}  # noqa: E731
    with FakeOpenAIServer(script) as server:
        plan_once(server, tmp_path / 'cache')
        [entry] = list((tmp_path / 'cache').rglob('*.json'))
        record = json.loads(entry.read_text())
        assert record['key'] == entry.stem and record['request']['model'] == 'fake-model'
        assert set(record['request']) == {'endpoint', 'model', 'params', 'prompt_sha256'}
        damages = {
            'its reply was edited': dict(record, text='{"plan": [0, 0, 2]}'),
            'it records no request key': {k: record[k] for k in
                                          ('text', 'prompt_tokens', 'completion_tokens')},
            'it holds the reply to another request': dict(record, key='0' * 64),
            'it was answered for another request: model differ': dict(
                record, request=dict(record['request'], model='other-model')),
        }
        for reason, damaged in damages.items():
            entry.write_text(json.dumps(damaged))
            outcome, usage = plan_once(server, tmp_path / 'cache')
            assert outcome.plan == [0, 1, 2] and usage['cache_hits'] == 0, reason
            assert f'discarded the corrupt cache entry {entry} ({reason}' in \
                capsys.readouterr().err, reason
        # an entry of another prompt, copied to this prompt's file name
        other = entry.with_name('f' * 64 + '.json')
        shutil.copy(entry, other)
        record = json.loads(entry.read_text())
        entry.write_text(json.dumps(dict(record, key=other.stem)))
        outcome, usage = plan_once(server, tmp_path / 'cache')
        assert usage['cache_hits'] == 0 and 'another request' in capsys.readouterr().err
        assert len(server.requests) == 2 + len(damages)
        outcome, usage = plan_once(server, tmp_path / 'cache')  # the rebuilt entry serves
        assert usage['cache_hits'] == 1 and len(server.requests) == 2 + len(damages)


def raw_completion(content, finish_reason='stop', usage=True) -> dict:
    body = {'id': 'x', 'object': 'chat.completion', 'created': 0, 'model': 'fake-model',
            'choices': [{'index': 0, 'finish_reason': finish_reason,
                         'message': {'role': 'assistant', 'content': content}}]}
    if usage:
        body['usage'] = {'prompt_tokens': 7, 'completion_tokens': 3, 'total_tokens': 10}
    return {'raw': json.dumps(body)}


def test_a_reply_cut_at_the_token_limit_is_counted_truncated_and_never_cached(tmp_path):
    """Today finish_reason "length" counts as unparseable, and is cached."""
    cut = {'on': True}
    script = lambda prompt, attempt: raw_completion(  # noqa: E731
        '{"plan": [0, 1' if cut['on'] else GOOD, 'length' if cut['on'] else 'stop')
    with FakeOpenAIServer(script) as server:
        outcome, usage = plan_once(server, tmp_path / 'cache')
        assert outcome.status == 'truncated' and 'finish_reason "length"' in outcome.detail
        assert outcome.plan == [-1, -1, -1]  # no plan: scored 0
        assert not list((tmp_path / 'cache').rglob('*.json'))
        cut['on'] = False
        outcome, usage = plan_once(server, tmp_path / 'cache')
    assert outcome.status == 'ok' and usage['cache_hits'] == 0 and len(server.requests) == 2


def test_a_reply_without_usage_is_counted_as_unknown_not_free(tmp_path):
    """Today a reply without "usage" is recorded as 0 tokens and cost 0, without a word."""
    from vpn_plugin.baselines.llm.evaluate import token_summary
    with FakeOpenAIServer(lambda prompt, attempt: raw_completion(GOOD, usage=False)) as server:
        outcome, usage = plan_once(server, tmp_path / 'cache')
        assert outcome.status == 'ok' and usage['replies_without_usage'] == 1
        outcome, usage = plan_once(server, tmp_path / 'cache')  # from the cache: still unknown
    assert usage['cache_hits'] == 1 and usage['replies_without_usage'] == 1
    assert ('1 replies reported no token usage or only part of it: a missing count is counted 0, '
            'their cost is unknown') in \
        token_summary(usage)


def test_bad_anchor_files_are_refused_before_any_request(tmp_path):
    """Today an id 999 or a negative anchor was found only after paid requests, an object
    array or a truncated JSON ended in numpy's / json's text without the file."""
    from vpn_plugin.baselines.llm.anchors import load_anchor_predictions
    cases = {
        'id999.json': (json.dumps({'first': [0, 999], 'last': [1, 2]}),
                       r'field "first"\[1\] = 999; expected an action id \[0, 9\)'),
        'negative.json': (json.dumps({'first': [0, 1], 'last': [-3, 2]}),
                          r'field "last"\[0\] = -3; expected an action id'),
        'truncated.json': ('{"first": [0, 1], "la', r'cannot read the step-model predictions'),
        'list.json': ('[0, 1]', r'holds a list; expected'),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=rf'^{tmp_path / name}: {expected}'):
            load_anchor_predictions(tmp_path / name, 2, num_actions=9)
    np.savez(tmp_path / 'objects.npz', first=np.array([0, None], dtype=object),
             last=np.array([1, 2]))
    with pytest.raises(ValueError, match=r'objects.npz: cannot read the step-model predictions'):
        load_anchor_predictions(tmp_path / 'objects.npz', 2, num_actions=9)


def test_a_missing_local_transformers_model_is_named(tmp_path):
    from vpn_plugin.baselines.llm.backends import TransformersChatBackend
    with pytest.raises(FileNotFoundError, match=rf'transformers model {tmp_path}/absent: no such '
                                                'folder'):
        TransformersChatBackend(str(tmp_path / 'absent'))

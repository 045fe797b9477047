"""Twelfth hostile pass, engineer passL (LLM/VLM baselines and their caches, core math,
configs before training): each test fails on 2d3cae8.

- L2/L6/L8/...: a damaged, edited or foreign cached reply was discarded and asked again with
  only a warning (printed into the progress bar): the run's usage now counts it
  (``cache_discarded``), the summary line says so and the results row records it;
- L13: an entry's ``usage_reported`` flag was outside the keyed checksum: flipped by hand, the
  row said "1 replies reported no token usage" of a reply whose tokens were counted;
- T2: a local transformers model's replies were keyed by its path: other weights saved at the
  same path were served the former model's replies; T1: its generations were not counted as
  requests ("requests sent 0") and a reply cut at max_tokens was judged unparseable and cached;
- V2: VLM frames named 1.jpg .. 30.jpg were read in string order (10.jpg before 2.jpg: the frame
  of 20 s sent for 13 s); V1: a clip far past the last frame was read at the last frame;
- L9/L18, K7, K18: raw "[Errno 21] Is a directory", "'int' object is not iterable" and
  mmengine's lazy-import message, now naming the file, value and what was expected.
"""
import json
import re
import shutil

import numpy as np
import pytest

from fake_openai_server import FakeOpenAIServer
from test_hostile_llm import GOOD, plan_once
from test_llm_tools import echo_anchors, run_tool, tiny_config  # noqa: F401  (a fixture)
from tool_modules import load_tool
from vpn_plugin.baselines.llm.backends import ResponseCache

ECHO = lambda prompt, attempt: {'text': GOOD}  # noqa: E731


def only_entry(cache_dir):
    (entry,) = [p for p in cache_dir.rglob('*.json') if p.name != '.model_digests.json']
    return entry


def edit_entry(path, **changes):
    entry = json.loads(path.read_text())
    entry.update(changes)
    path.write_text(json.dumps(entry))


@pytest.mark.parametrize('damage', ['edited reply', 'truncated file', 'not this cache\'s key'])
def test_a_discarded_cache_entry_is_counted_and_said(tmp_path, capsys, damage):
    from vpn_plugin.baselines.llm.evaluate import token_summary, usage_record
    with FakeOpenAIServer(ECHO) as server:
        plan_once(server, tmp_path / 'cache')
        entry = only_entry(tmp_path / 'cache')
        if damage == 'edited reply':
            edit_entry(entry, text='{"plan": [2, 1, 0]}')
        elif damage == 'truncated file':
            entry.write_text(entry.read_text()[:40])
        else:
            (tmp_path / 'cache' / ResponseCache.KEY_FILE).unlink()
        outcome, usage = plan_once(server, tmp_path / 'cache')
        assert len(server.requests) == 2
    assert outcome.plan == [0, 1, 2] and usage['cache_hits'] == 0
    assert usage['cache_discarded'] == 1 and usage_record(usage)['cache_discarded'] == 1
    assert '1 cached replies were damaged, edited or not their request' in token_summary(usage)
    assert 'discarded the corrupt cache entry' in capsys.readouterr().err
    # an entry that is simply absent is no discard
    with FakeOpenAIServer(ECHO) as server:
        _, usage = plan_once(server, tmp_path / 'other_cache')
    assert usage['cache_discarded'] == 0 and 'discarded' not in token_summary(usage)


def test_llm_eval_row_and_summary_line_count_the_discarded_entries(tiny_config, tmp_path,
                                                                     capsys):
    from vpn_plugin.protocol.results import read_results
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as server:
        run_tool(tool, server, tiny_config, tmp_path)
        first = read_results(tmp_path / 'results.jsonl')[0].metrics
        entries = sorted((tmp_path / 'cache').rglob('*.json'))
        for entry in entries[:2]:
            edit_entry(entry, prompt_tokens=10 ** 9)  # an edited token count: checksum fails
        capsys.readouterr()
        run_tool(tool, server, tiny_config, tmp_path)
    (row,) = read_results(tmp_path / 'results.jsonl')
    assert row.metrics == first and row.usage['cache_discarded'] == 2
    assert row.usage['requests'] == 2 and row.usage['cache_hits'] == len(entries) - 2
    assert '2 cached replies were damaged, edited or not their request' in capsys.readouterr().out


@pytest.mark.parametrize('written, flipped', [(True, False), (False, True)])
def test_the_usage_reported_flag_of_an_entry_is_signed(tmp_path, capsys, written, flipped):
    from vpn_plugin.baselines.llm.backends import ChatReply
    cache = ResponseCache(tmp_path / 'cache')
    request = ResponseCache.request_record('http://x/v1', 'm', [{'role': 'user',
                                                                 'content': 'q'}], {})
    key = ResponseCache.key('http://x/v1', 'm', [{'role': 'user', 'content': 'q'}], {})
    cache.put(key, ChatReply(GOOD, 7, 3, usage_reported=written), request)
    served = cache.get(key, request)
    assert served is not None and served.usage_reported is written  # as written: served
    edit_entry(only_entry(tmp_path / 'cache'), usage_reported=flipped)
    assert cache.get(key, request) is None
    assert 'checksum mismatch' in capsys.readouterr().err


@pytest.fixture(scope='module')
def tiny_models(tmp_path_factory):
    """Two tiny random chat models of the same shapes (torch seeds 0 and 1)."""
    import torch
    from test_llm_local import write_tiny_chat_model
    folder = tmp_path_factory.mktemp('models')
    seed = torch.manual_seed
    for name, value in (('a', 0), ('b', 1)):
        torch.manual_seed = lambda _, value=value: seed(value)
        try:
            write_tiny_chat_model(folder / name)
        finally:
            torch.manual_seed = seed
    return folder


def test_other_weights_at_the_same_path_are_not_served_the_cached_replies(tiny_models,
                                                                           tmp_path):
    from vpn_plugin.baselines.llm.backends import ChatReply, TransformersChatBackend
    model, message = tmp_path / 'model', [{'role': 'user', 'content': '1 2 3'}]
    shutil.copytree(tiny_models / 'a', model)

    def reply(text):
        """The backend of the model at ``model``, whose generation answers ``text`` (the
        random model never ends a reply: it would be truncated, never cached)."""
        backend = TransformersChatBackend(str(model), params={'max_tokens': 8},
                                          cache_dir=tmp_path / 'cache')
        backend._request = lambda messages: ChatReply(text, 7, 3)
        return backend.complete(message)

    assert not reply('of a').cached
    again = reply('never asked')
    assert again.cached and again.text == 'of a'  # the same weights: served
    shutil.rmtree(model)
    shutil.copytree(tiny_models / 'b', model)  # a fine-tune saved in place
    other = reply('of b')
    assert not other.cached and other.text == 'of b'
    shutil.rmtree(model)
    shutil.copytree(tiny_models / 'a', model)  # a copy of the first weights: served again
    assert reply('never asked').text == 'of a'


def test_a_local_reply_cut_at_max_tokens_is_truncated_and_not_cached(tiny_models, tmp_path):
    from vpn_plugin.baselines.llm.backends import TransformersChatBackend
    backend = TransformersChatBackend(str(tiny_models / 'a'), params={'max_tokens': 4},
                                      cache_dir=tmp_path / 'cache')
    message = [{'role': 'user', 'content': '1 2 3'}]
    reply = backend.complete(message)
    assert reply.completion_tokens == 4 and reply.truncated  # the random model never ends
    assert not backend.complete(message).cached
    assert backend.usage.counts['requests'] == 2  # each generation is a request (T1)


def write_frames(folder, names, values):
    import cv2
    folder.mkdir(parents=True)
    for name, value in zip(names, values):
        cv2.imwrite(str(folder / name), np.full((16, 16, 3), value, np.uint8))


def frame_values(jpegs):
    import cv2
    return [round(cv2.imdecode(np.frombuffer(j, np.uint8), cv2.IMREAD_COLOR).mean())
            for j in jpegs]


def test_frames_named_without_zero_padding_are_read_in_time_order(tmp_path):
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    # ffmpeg -r 1 %d.jpg: 1.jpg holds [0, 1) s, ..., 30.jpg [29, 30) s
    write_frames(tmp_path / 'v', [f'{i}.jpg' for i in range(1, 31)], [8 * i for i in range(1, 31)])
    assert frame_values(read_clip_frames(tmp_path / 'v', 12, 14, 1)) == [8 * 14]  # 13 s
    assert frame_values(read_clip_frames(tmp_path / 'v', 0, 30, 3)) == [8 * 6, 8 * 16, 8 * 26]


def test_a_clip_past_the_last_frame_is_refused(tmp_path):
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    write_frames(tmp_path / 'v', [f'{i:05d}.jpg' for i in range(3)], [50, 100, 150])
    with pytest.raises(ValueError, match=re.escape(
            'the clip frame at 102.50 s lies past its end (3 frames at 1 frames per second '
            '(--frames-fps): 3.00 s)')):
        read_clip_frames(tmp_path / 'v', 100, 110, 2)
    # up to one frame past the last (rounded annotation times) reads the last frame
    assert frame_values(read_clip_frames(tmp_path / 'v', 2, 4, 1)) == [150]


def test_a_cache_entry_or_its_lock_that_is_a_folder_is_named(tmp_path):
    with FakeOpenAIServer(ECHO) as server:
        plan_once(server, tmp_path / 'cache')
        entry = only_entry(tmp_path / 'cache')
        entry.unlink()
        entry.mkdir()
        with pytest.raises(IsADirectoryError, match=re.escape(
                f'reply cache entry {entry} is a folder; expected a JSON file')):
            plan_once(server, tmp_path / 'cache')
        entry.rmdir()
        lock = entry.with_suffix('.lock')
        lock.unlink()
        lock.mkdir()
        with pytest.raises(IsADirectoryError, match=re.escape(f'lock file {lock} of the reply '
                                                              'cache entry')):
            plan_once(server, tmp_path / 'cache')


@pytest.mark.parametrize('base', ['5', "['a.py', 3]", "{'a': 'b.py'}"])
def test_a_base_that_is_no_file_name_nor_list_of_them_is_named(tmp_path, base):
    from vpn_plugin.data_paths import read_config_file
    config = tmp_path / 'cfg.py'
    config.write_text(f'horizon = 3\n_base_ = {base}\n')
    with pytest.raises(ValueError, match=re.escape(f'{config}: line 2: _base_ = ') + '.*'
                       + re.escape('; expected the file name of a config, or a list of them')):
        read_config_file(config)


def test_an_import_before_base_is_named_and_never_run(tmp_path):
    from vpn_plugin.data_paths import read_config_file
    (tmp_path / 'base.py').write_text('horizon = 3\n')
    config = tmp_path / 'cfg.py'
    config.write_text(f"import os\n_base_ = ['./base.py']\nos.mkdir({str(tmp_path / 'ran')!r})\n")
    with pytest.raises(ValueError, match=re.escape(f'{config}: line 1: an import statement '
                                                   'before `_base_ = [...]`')):
        read_config_file(config)
    assert not (tmp_path / 'ran').exists()


def test_a_nan_energy_is_refused_not_ranked_last():
    import torch
    from vpn_plugin.core.energy_search import select_top_k
    for tie_break in ('sequence', 'topk'):
        with pytest.raises(ValueError, match=re.escape(
                'select_top_k: the energy of candidate 1 of row 0 is NaN (1 of 3); expected '
                'finite energies')):
            select_top_k(torch.tensor([[3.0, float('nan'), 2.0]]), 2, tie_break)
    order, energies = select_top_k(torch.tensor([[3.0, float('-inf'), 2.0]]), 2)
    assert order.tolist() == [[1, 2]] and energies[0, 1] == 2.0


def test_a_kepp_graph_refuses_non_integer_action_ids():
    from vpn_plugin.core.kepp_paths import build_graph
    with pytest.raises(TypeError, match=re.escape("video 'v' sequence holds float64 values "
                                                  '[0.5, 1.0]; expected integer action ids')):
        build_graph([('v', [0.5, 1])])
    assert build_graph([('v', np.array([0, 1]))]).edges() == [(0, 1, 1.0)]


def test_an_anchors_file_with_unknown_fields_is_refused(tmp_path):
    from vpn_plugin.baselines.llm.anchors import load_anchor_predictions
    path = tmp_path / 'anchors.npz'
    np.savez(path, first=np.zeros(3, int), last=np.ones(3, int), extra=np.zeros(3))
    with pytest.raises(ValueError, match=re.escape(
            "holds field(s) ['extra'] besides \"first\" and \"last\"")):
        load_anchor_predictions(path, 3, 5)
    np.savez(path, first=np.zeros(3, int), last=np.ones(3, int))
    assert [a.tolist() for a in load_anchor_predictions(path, 3, 5)] == [[0] * 3, [1] * 3]


def test_prompts_holding_fewer_examples_than_asked_are_said_and_recorded(tiny_config, tmp_path,
                                                                         capsys):
    from vpn_plugin.protocol.results import read_results
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as server:
        run_tool(tool, server, tiny_config, tmp_path, '--num-examples', '100000')
        run_tool(tool, server, tiny_config, tmp_path / 'five')  # the default 5: no record
    assert 'note: --num-examples 100000: 12 of 12 prompts hold fewer examples' in \
        capsys.readouterr().err
    fewest, most = read_results(tmp_path / 'results.jsonl')[0].settings['examples_per_prompt']
    assert 0 < fewest <= most < 100000
    assert 'examples_per_prompt' not in read_results(tmp_path / 'five' / 'results.jsonl')[0].settings


@pytest.mark.parametrize('option', [{'test_horizon': 4}, {'data_root': '/elsewhere'},
                                    {'feature_dir': '/elsewhere/features'}])
def test_a_variable_the_config_does_not_define_is_refused_not_recorded(tmp_path, option):
    """X3/X6: on a config whose datasets hold their own horizon and paths, the option changed
    nothing, and llm_eval's row recorded it in settings.cfg_options."""
    from vpn_plugin.data_paths import load_config
    config = tmp_path / 'own.py'
    dataset = dict(type='PlanningDataset', horizon=3, data_root=str(tmp_path))
    config.write_text(f'train_dataloader = dict(dataset={dataset!r})\n'
                      f"test_dataloader = dict(dataset={dict(dataset, split='test')!r})\n")
    (key, value), = option.items()
    with pytest.raises(ValueError, match=re.escape(
            f'{config}: --cfg-options {key}={value!r}: the config defines no {key} variable '
            '(its datasets set their own), so the option would change nothing')):
        load_config(config, option)
    assert load_config(config).test_dataloader.dataset.horizon == 3

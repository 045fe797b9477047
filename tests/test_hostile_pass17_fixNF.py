"""Issue 37, pass 17 (passL's NF1/NF2, fixed by fixNF): the few-shot examples of the LLM
baselines are drawn by each window's identity (video + its steps' places), from the training
windows sorted by theirs, in both paths (tools/llm_eval.py and the LLMPlanner of
tools/test.py): the same videos listed in another order give byte-identical prompts."""
import json
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer
from mmaction.registry import DATASETS, MODELS
from mmengine.dataset import default_collate
from tool_modules import load_tool
from vpn_plugin.protocol.results import read_results

from test_llm_prompting import PAPER_PROMPTS
from test_llm_tools import BOUNDED, CLIENT_TIMEOUT_S, echo_anchors

EXAMPLE_DRAW = 'window_identity_v2'  # what rows and samples record of the new draw


def reversed_list(path: str, out: Path) -> str:
    """The video list at ``path`` with its entries in reverse order (the same videos)."""
    out.write_text(json.dumps(json.loads(Path(path).read_text())[::-1]))
    return str(out)


@pytest.fixture(scope='module')
def orders(tiny_crosstask, tmp_path_factory):
    """{'plain' | 'reversed': (train dataset, test dataset, config file)}: the tiny CrossTask
    splits, and the same with both video lists reversed."""
    folder = tmp_path_factory.mktemp('nf_orders')
    train = dict(tiny_crosstask['train_dataset'])
    test = dict(tiny_crosstask['test_dataset'])
    back = dict(train, video_list=reversed_list(train['video_list'], folder / 'train_r.json'))
    back_test = dict(test, video_list=reversed_list(test['video_list'], folder / 'test_r.json'))
    found = {}
    for name, (tr, te) in {'plain': (train, test), 'reversed': (back, back_test)}.items():
        config = folder / f'{name}.py'
        config.write_text(f'train_dataloader = dict(dataset={tr!r})\n'
                          f'test_dataloader = dict(dataset={te!r})\n')
        found[name] = (tr, te, config)
    return found


def run_llm_eval(server, config, cache, out):
    tool = load_tool('llm_eval')
    tool.main(['--config', str(config), '--base-url', server.base_url, '--model', 'fake',
               '--no-progress', '--timeout', str(CLIENT_TIMEOUT_S), '--max-retries', '1',
               '--backoff', '0.01', '--cache-dir', str(cache), '--out', str(out)])
    return read_results(out)[-1]


def model_prompts(train_dataset, test_dataset, cache) -> dict:
    """{window identity: completion prompt} of the LLMPlanner (the tools/test.py path) on every
    test window, batched as the test loader batches them."""
    test_set = DATASETS.build(test_dataset)
    model = MODELS.build(dict(
        type='LLMPlanner', train_dataset=train_dataset, backend=dict(
            type='openai', base_url='http://127.0.0.1:9/v1', model='fake', cache_dir=str(cache),
            **BOUNDED)))
    batch = default_collate([test_set[i] for i in range(len(test_set))])
    queries = model._queries(batch['data_samples'])
    prompts = model.planner.prompts
    windows = [test_set.windows[q.index] for q in queries]
    return {(w.vid, w.feature, w.times, w.steps): prompts.completion_prompt(q, q.first, q.last)
            for w, q in zip(windows, queries)}


def test_nf1_nf2_same_videos_in_another_order_same_prompts_in_both_paths(orders, tmp_path):
    """NF1 (test list reversed) + NF2 (training list reversed): before, every window got other
    examples (cache hits 0). Now tools/llm_eval.py's reordered run is answered from the first
    run's cache (the cache is keyed on the request: byte-identical prompts) and its row records
    the draw; the LLMPlanner (tools/test.py) gets each window's identity in the batch
    (``window_key``) and gives each window the same prompt in both orders, the one llm_eval
    sends for it."""
    cache = tmp_path / 'cache'
    with FakeOpenAIServer(echo_anchors) as server:
        plain = run_llm_eval(server, orders['plain'][2], cache, tmp_path / 'a.jsonl')
        sent = len(server.requests)
        again = run_llm_eval(server, orders['reversed'][2], cache, tmp_path / 'b.jsonl')
    assert sent == plain.usage['requests'] == plain.settings['num_windows'] > 100
    assert (again.usage['cache_hits'], again.usage['requests']) == (sent, 0)
    assert len(server.requests) == sent  # the same scores, summed in another window order:
    assert again.metrics == pytest.approx(plain.metrics, rel=1e-12)
    assert plain.settings['example_draw'] == again.settings['example_draw'] == EXAMPLE_DRAW
    by_model = model_prompts(*orders['plain'][:2], tmp_path / 'c1')
    assert by_model == model_prompts(*orders['reversed'][:2], tmp_path / 'c2')
    assert sorted(text for text, _ in server.requests) == sorted(by_model.values())


def test_llm_planner_records_the_example_draw_and_refuses_a_batch_without_window_key(
        orders, tmp_path):
    test_set = DATASETS.build(orders['plain'][1])
    batch = default_collate([test_set[i] for i in range(2)])
    with FakeOpenAIServer(echo_anchors) as server:
        model = MODELS.build(dict(type='LLMPlanner', train_dataset=orders['plain'][0],
                                  backend=dict(type='openai', base_url=server.base_url,
                                               model='fake', cache_dir=str(tmp_path / 'c'),
                                               **BOUNDED)))
        samples = model.test_step(batch)
        assert [s.example_draw for s in samples] == [EXAMPLE_DRAW] * 2
        del batch['data_samples']['window_key']
        with pytest.raises(ValueError, match=r'window_key \(the PlanningDataset batch'):
            model.test_step(batch)


@pytest.mark.parametrize('with_pkg', [False, True])
def test_paper_prompts_are_the_papers_text_with_our_fields(orders, tmp_path, with_pkg):
    """Oracle: a paper-set prompt of a real window = the transcription of the paper's prompt
    (../shared/reference/paper_prompts) with its placeholders filled by our serialisation:
    the new draw changed which examples, not the text."""
    name = 'sequence_completion_pkg.txt' if with_pkg else 'sequence_completion.txt'
    if not (PAPER_PROMPTS / name).is_file():
        pytest.skip(f'no transcription at {PAPER_PROMPTS / name}')
    test_set = DATASETS.build(orders['reversed'][1])
    model = MODELS.build(dict(
        type='LLMPlanner', train_dataset=orders['reversed'][0], prompt_set='paper',
        with_pkg=with_pkg, backend=dict(type='openai', base_url='http://127.0.0.1:9/v1',
                                        model='fake', cache_dir=str(tmp_path / 'c'), **BOUNDED)))
    builder = model.planner.prompts
    query = model._queries(default_collate([test_set[3]])['data_samples'])[0]
    fields = builder.common_fields(query)
    expected = (PAPER_PROMPTS / name).read_text().replace('{ taxonomy }', fields['taxonomy'])
    expected = expected.replace('{ training data }', builder.examples(query)).replace(
        '{ value }', f'[{query.first}, -1, {query.last}]')
    if with_pkg:
        from vpn_plugin.baselines.llm.prompting import format_pkg
        expected = expected.replace('{ pkg details }',
                                    format_pkg(builder.pkg, builder.allowed(query)))
    assert builder.completion_prompt(query, query.first, query.last) == expected
    assert builder.examples(query).count('\n') == builder.num_examples - 1


def test_local_model_folder_is_recorded_as_one_path_however_typed(orders, tmp_path,
                                                                  monkeypatch):
    """Item 3: ``--backend transformers --model A/`` and ``--model A`` (and ``./x/../A``) gave
    two rows (the model as typed); now the row's model and method name hold the folder as the
    config path is recorded (``row_config_path``); an endpoint's model name stays as given."""
    tool = load_tool('llm_eval')
    (tmp_path / 'A').mkdir()
    (tmp_path / 'x').mkdir()
    monkeypatch.chdir(tmp_path)
    records = set()
    for spelling in ('A/', 'A', './x/../A', str(tmp_path / 'A') + '//'):
        args = tool.parse_args(['--config', str(orders['plain'][2]), '--backend', 'transformers',
                                '--model', spelling])
        records.add((tool.setting(args, 'oracle')['model'], tool.method_name(args, 'oracle')))
    folder = str(tmp_path / 'A')
    assert records == {(folder, f'{folder} [oracle first/last]')}
    args = tool.parse_args(['--config', str(orders['plain'][2]), '--base-url',
                            'http://127.0.0.1:9/v1', '--model', 'A/'])
    assert tool.setting(args, 'oracle')['model'] == 'A/'  # a server's name: not a folder


def test_retrieve_says_when_an_action_is_no_node_of_the_graph(monkeypatch):
    """Item 2 (passL KP8): an action the graph never saw got the official fallback marked
    'none' (as a pair with no walk). The official find_top_n_paths returns no path when the
    start or end node is not in the graph ("Skip ..."): the same fallback, now kind 'unseen',
    counted as a fallback, and KEPP's log line names the unseen action."""
    import torch
    from test_kepp import tiny_kepp
    from vpn_plugin.core import kepp_paths
    from vpn_plugin.models import kepp
    logged = []
    monkeypatch.setattr(kepp, 'print_log', lambda message, *a, **k: logged.append(message))
    graph = kepp_paths.build_graph([(0, [0, 1, 2]), (1, [2, 0])])
    assert kepp_paths.retrieve(graph, 0, 77, 3) == ([[0, 0, 77]] * 2, 'unseen')
    assert kepp_paths.retrieve(graph, 1, 1, 3) == ([[1, 1, 1]] * 2, 'none')  # nodes, no walk
    assert kepp_paths.retrieve(graph, 0, 2, 3)[1] == 'one'
    retriever = kepp_paths.PathRetriever(graph, 3)
    assert retriever.batch([0, 1], [77, 1])[1].tolist() == [True, True]
    model = tiny_kepp(horizon=3)
    model.set_graph(graph)
    logged.clear()
    model.path_block(torch.tensor([5, 1]), torch.tensor([2, 1]), 'cpu')
    text = ' '.join(logged)
    assert 'start action 5 never occurs in the PKG' in text
    assert 'no walk of 3 nodes from action 1 to 1' in text

"""tools/llm_eval.py and the LLMPlanner model on the tiny CrossTask fixture, against the
scripted server on 127.0.0.1 (skipped without ../shared/data)."""
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fake_openai_server import FakeOpenAIServer
from tiny_configs import save_recorded
from mmaction.registry import DATASETS, MODELS
from mmengine.dataset import default_collate
from vpn_plugin.baselines.llm import stratified_sample
from vpn_plugin.protocol.results import read_results
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
LIMIT = 12
# The scripted server answers at once; a client timeout is a retry, which the tests that count
# requests would see: it must exceed any delay of a loaded machine (2 s did not: 15 of 12).
CLIENT_TIMEOUT_S = 30
BOUNDED = dict(timeout=CLIENT_TIMEOUT_S, max_retries=1, backoff=0.01)


def echo_anchors(prompt, attempt):
    """Reply [first, first, ..., last] from the prompt's incomplete sequence."""
    ids = re.search(r'Incomplete sequence \(ids\): \[([^\]]*)\]', prompt).group(1).split(', ')
    plan = [ids[0]] * (len(ids) - 1) + [ids[-1]]
    return {'text': json.dumps({'plan': [int(a) for a in plan]})}


def expected_echo_metrics(plans, first, last):
    pred = np.repeat(first[:, None], plans.shape[1], 1)
    pred[:, -1] = last
    correct = pred == plans
    return {'success_rate': 100 * correct.all(1).mean(),
            'first_accuracy': 100 * correct[:, 0].mean(),
            'last_accuracy': 100 * correct[:, -1].mean()}


@pytest.fixture(scope='module')
def tiny_config(tiny_crosstask, tmp_path_factory):
    path = tmp_path_factory.mktemp('llm_cfg') / 'tiny_llm.py'
    path.write_text(f"train_dataloader = dict(dataset={tiny_crosstask['train_dataset']!r})\n"
                    f"test_dataloader = dict(dataset={tiny_crosstask['test_dataset']!r})\n")
    return path


def run_tool(tool, server, config, tmp_path, *extra):
    """llm_eval with the test's flags; a flag in ``extra`` replaces the default (a flag given
    twice is refused: errors.parse_once)."""
    defaults = {'--config': str(config), '--base-url': server.base_url, '--model': 'fake',
                '--limit': str(LIMIT), '--concurrency': '3', '--timeout': str(CLIENT_TIMEOUT_S),
                '--max-retries': '1', '--backoff': '0.01', '--cache-dir': str(tmp_path / 'cache'),
                '--out': str(tmp_path / 'results.jsonl')}
    given = []
    for flag, value in defaults.items():
        if flag not in extra:
            given += [flag, value]
    return tool.main([*given, '--no-progress', *extra])


def test_llm_eval_oracle_with_pkg_writes_results(tiny_crosstask, tiny_config, tmp_path, capsys):
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as server:
        summary = run_tool(tool, server, tiny_config, tmp_path, '--with-pkg')
        assert len(server.requests) == LIMIT
        assert all(' -> ' in text and 'probability' in text for text, _ in server.requests)
        first_usage = json.loads(next(tmp_path.glob('*.summary.json')).read_text())['usage']
        capsys.readouterr()
        run_tool(tool, server, tiny_config, tmp_path, '--with-pkg', '--price-per-1k', '2', '6')
        assert len(server.requests) == LIMIT  # the rerun is served from the cache
        # the server counts a word as a token: the row's tokens and cost, by hand
        prompt_words = sum(len(text.split()) for text, _ in server.requests)
    test_set = DATASETS.build(tiny_crosstask['test_dataset'])
    picked = stratified_sample(test_set.tasks, LIMIT, seed=0, keys=test_set.window_keys())
    plans = test_set.plans[picked]
    for name, value in expected_echo_metrics(plans, plans[:, 0], plans[:, -1]).items():
        assert summary['metrics'][name] == pytest.approx(value)
    assert summary['counts'] == {'ok': LIMIT, 'unparseable': 0, 'out_of_taxonomy': 0,
                                 'truncated': 0, 'request_failed': 0}
    rows = read_results(tmp_path / 'results.jsonl')
    assert len(rows) == 1, 'the rerun replaces its own row'
    assert rows[0].variant['anchors'] == 'oracle'
    assert rows[0].variant['task_source'] == 'ground_truth'
    assert 'oracle' in rows[0].method and rows[0].horizon == 3 and rows[0].protocol == 'llm'
    assert rows[0].shortened == f'limit={LIMIT} of {len(test_set)} windows'
    assert rows[0].settings['base_url'] == server.base_url and rows[0].failures == {}
    reply_words = len(json.dumps({'plan': [0, 0, 0]}).split()) * LIMIT
    usage = rows[0].usage
    assert (usage['cached_prompt_tokens'], usage['prompt_tokens']) == (prompt_words, 0)
    assert usage['total_tokens'] == prompt_words + reply_words
    # issue 34: what the answers used cost, apart from what this run paid (nothing: cached)
    assert usage['cost_of_answers'] == pytest.approx((2 * prompt_words + 6 * reply_words) / 1000)
    assert (usage['paid_tokens'], usage['cost_paid']) == (0, 0.0) and 'cost' not in usage
    assert first_usage['paid_tokens'] == first_usage['total_tokens'] == usage['total_tokens']
    summary_file = next(tmp_path.glob('*.summary.json'))
    assert json.loads(summary_file.read_text())['usage'] == usage  # the summary says the same
    dump = json.loads(Path(rows[0].per_sample_file).read_text())  # PlanningMetric's format
    assert dump['sample_idx'] == picked.tolist() and dump['gt_plan'] == plans.tolist()
    assert dump['metrics'] == pytest.approx(summary['metrics'])
    outcomes = Path(rows[0].per_sample_file.replace('per_sample.json', 'outcomes.jsonl'))
    assert len(outcomes.read_text().splitlines()) == 1 + LIMIT
    printed = capsys.readouterr().out
    assert f'cache hits {LIMIT}' in printed
    assert (f"cost paid in this run 0.00; cost of the answers used "
            f"{usage['cost_of_answers']:.2f}") in printed


def test_llm_eval_with_step_model_checkpoint(tiny_crosstask, tiny_config, tmp_path):
    test_set = DATASETS.build(tiny_crosstask['test_dataset'])
    step_cfg = dict(type='PKGBeamSearchPlanner', feature_dim=test_set.feature_dim,
                    num_actions=test_set.taxonomy.num_actions, horizon=3)
    torch.manual_seed(0)
    step_model = MODELS.build(step_cfg).eval()
    save_recorded(step_model, tmp_path / 'step.pth', tiny_crosstask['test_dataset'])
    (tmp_path / 'step_cfg.py').write_text(f'model = {step_cfg!r}\n')
    with torch.no_grad():
        logits = step_model.step_logits({'start': torch.from_numpy(test_set.start),
                                         'goal': torch.from_numpy(test_set.goal)})
    first, last = logits.argmax(-1).numpy().T
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as server:
        summary = run_tool(tool, server, tiny_config, tmp_path, '--step-config',
                           str(tmp_path / 'step_cfg.py'), '--step-checkpoint',
                           str(tmp_path / 'step.pth'), '--save-anchors', str(tmp_path / 'a.json'))
    saved = json.loads((tmp_path / 'a.json').read_text())
    assert saved == {'first': first.tolist(), 'last': last.tolist()}
    picked = stratified_sample(test_set.tasks, LIMIT, seed=0, keys=test_set.window_keys())
    expected = expected_echo_metrics(test_set.plans[picked], first[picked], last[picked])
    for name, value in expected.items():
        assert summary['metrics'][name] == pytest.approx(value)
    # a step model may predict actions of another task: they stay legal in the reply
    assert summary['counts']['ok'] == LIMIT
    row = read_results(tmp_path / 'results.jsonl')[0]
    assert row.variant['anchors'] == 'step_model' and 'oracle' not in row.method
    assert row.variant['task_source'] == 'step_model'


def test_llm_eval_rejects_bad_anchor_file(tiny_config, tmp_path):
    (tmp_path / 'a.json').write_text(json.dumps({'first': [1, 2], 'last': [3, 4]}))
    tool = load_tool('llm_eval')
    with pytest.raises(SystemExit, match=r'^error: .*a.json: field "first" has shape \(2,\)'):
        tool.main(['--config', str(tiny_config), '--base-url', 'http://127.0.0.1:9/v1',
                   '--model', 'fake', '--anchors-file', str(tmp_path / 'a.json')])


def test_llm_planner_model_predicts_packed_samples(tiny_crosstask, tmp_path):
    test_set = DATASETS.build(tiny_crosstask['test_dataset'])
    batch = default_collate([test_set[i] for i in range(4)])
    with FakeOpenAIServer(echo_anchors) as server:
        model = MODELS.build(dict(
            type='LLMPlanner', train_dataset=tiny_crosstask['train_dataset'], with_pkg=True,
            backend=dict(type='openai', base_url=server.base_url, model='fake', **BOUNDED,
                         cache_dir=str(tmp_path / 'cache'))))
        samples = model.test_step(batch)
    assert len(server.requests) == 4
    for i, sample in enumerate(samples):
        gt = test_set.plans[i]
        assert sample.pred_plan.tolist() == [gt[0]] * 2 + [gt[-1]]
        assert sample.gt_plan.tolist() == gt.tolist() and int(sample.sample_idx) == i
        assert sample.llm_status == 'ok'
    assert model.status_counts == {'ok': 4}
    with pytest.raises(ValueError, match='no trainable parameters'):
        model(batch['inputs'], batch['data_samples'], mode='loss')


def first_listed_action(prompt, attempt):
    """Identification: the first action of the prompt's list; completion: echo the anchors."""
    if 'Which single action' in prompt:
        return {'text': json.dumps({'action_id': int(re.search(r'\n(\d+): ', prompt).group(1))})}
    return echo_anchors(prompt, attempt)


def test_llm_eval_vlm_mode_from_frames_folders(tiny_crosstask, tiny_config, tmp_path):
    import cv2
    test_set = DATASETS.build(tiny_crosstask['test_dataset'])
    rng = np.random.default_rng(0)
    picked = stratified_sample(test_set.tasks, 3, seed=0, keys=test_set.window_keys())
    for window in (test_set.windows[i] for i in picked):  # distinct frames: no two requests equal
        folder = tmp_path / 'videos' / window.vid
        folder.mkdir(parents=True, exist_ok=True)
        for second in range(window.times[-1][1] + 1):
            image = rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)
            cv2.imwrite(str(folder / f'{second:04d}.png'), image)
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(first_listed_action) as server:
        summary = tool.main(['--config', str(tiny_config), '--base-url', server.base_url,
                             '--model', 'fake-vlm', '--vlm',
                             '--video-root', str(tmp_path / 'videos'),
                             '--num-frames', '2', '--limit', '3', '--no-progress',
                             '--timeout', str(CLIENT_TIMEOUT_S), '--max-retries', '1',
                             '--backoff', '0.01', '--cache-dir', str(tmp_path / 'cache'),
                             '--out', str(tmp_path / 'results.jsonl')])
    assert sorted(count for _, count in server.requests) == [2] * 6 + [4] * 3
    assert summary['counts']['ok'] == 3
    task_first = [test_set.taxonomy.task_actions[t][0] for t in test_set.tasks[picked]]
    first_correct = np.mean(np.array(task_first) == test_set.plans[picked, 0])
    assert summary['metrics']['first_accuracy'] == pytest.approx(100 * first_correct)
    row = read_results(tmp_path / 'results.jsonl')[0]
    assert row.variant['vlm'] and row.variant['anchors'] == 'vlm' and '(VLM)' in row.method
    assert row.variant['task_source'] == 'ground_truth'  # the prompt names the true task


def test_runner_with_planning_metric_matches_llm_eval(tiny_crosstask, tiny_config, tmp_path):
    """tools/test.py's path (Runner + PlanningMetric) and tools/llm_eval.py agree."""
    from mmengine.config import Config
    from mmengine.runner import Runner
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as server:
        summary = run_tool(tool, server, tiny_config, tmp_path, '--limit', '100000')
        sent = len(server.requests)
        runner = Runner.from_cfg(Config(dict(
            default_scope='mmaction', work_dir=str(tmp_path / 'work'),
            model=dict(type='LLMPlanner', train_dataset=tiny_crosstask['train_dataset'],
                       backend=dict(type='openai', base_url=server.base_url, model='fake',
                                    params={'temperature': 0.0}, **BOUNDED,
                                    cache_dir=str(tmp_path / 'cache'))),
            test_dataloader=dict(batch_size=16, num_workers=0,
                                 dataset=dict(tiny_crosstask['test_dataset']),
                                 sampler=dict(type='DefaultSampler', shuffle=False),
                                 collate_fn=dict(type='default_collate')),
            test_evaluator=dict(type='PlanningMetric'), test_cfg=dict(type='TestLoop'))))
        metrics = runner.test()
        assert len(server.requests) == sent  # same prompts: every reply comes from the cache
    for name, value in summary['metrics'].items():
        assert metrics[f'plan/{name}'] == pytest.approx(value)


def test_tools_test_runs_llm_config_without_checkpoint(tiny_crosstask, tmp_path, monkeypatch):
    """The shipped configs/llm config runs through tools/test.py with no checkpoint file."""
    monkeypatch.setenv('VPN_FAKE_KEY', 'not-a-real-key')
    test_tool = load_tool('test')
    config = tmp_path / 'llm_tiny.py'
    config.write_text(
        f"_base_ = [{str(REPO / 'configs/llm/llm_crosstask_t3.py')!r}]\n"
        "test_dataloader = dict(dataset=dict(_delete_=True, "
        f"**{tiny_crosstask['test_dataset']!r}))\n"
        f"model = dict(train_dataset={tiny_crosstask['train_dataset']!r})\n")
    with FakeOpenAIServer(echo_anchors) as server:
        metrics = test_tool.main([str(config), '--work-dir', str(tmp_path / 'work'),
                                  '--cfg-options',
                                  f'model.backend.base_url={server.base_url}',
                                  'model.backend.api_key_env=VPN_FAKE_KEY',
                                  f'model.backend.timeout={CLIENT_TIMEOUT_S}',
                                  'model.backend.max_retries=1',
                                  f'model.backend.cache_dir={tmp_path / "cache"}'])
    test_set = DATASETS.build(tiny_crosstask['test_dataset'])
    expected = expected_echo_metrics(test_set.plans, test_set.plans[:, 0], test_set.plans[:, -1])
    for name, value in expected.items():
        assert metrics[f'plan/{name}'] == pytest.approx(value)


def test_tools_test_requires_checkpoint_for_trainable_models():
    test_tool = load_tool('test')
    with pytest.raises(SystemExit, match='trainable parameters'):
        test_tool.require_parameter_free(torch.nn.Linear(2, 2), 'cfg.py')
    test_tool.require_parameter_free(torch.nn.Identity(), 'cfg.py')


def test_llm_planner_model_with_step_model_anchor_file(tiny_crosstask, tmp_path):
    """LLMPlanner(anchors=<file>): the prompt's first/last actions are the file's, indexed by
    the sample index, and the prompt names the task of the predicted first action."""
    test_set = DATASETS.build(tiny_crosstask['test_dataset'])
    taxonomy = test_set.taxonomy
    count = len(test_set)
    # predictions of "another task": the first action of the next task in the taxonomy
    other = [taxonomy.task_actions[(t + 1) % len(taxonomy.task_actions)] for t in test_set.tasks]
    first = np.array([actions[0] for actions in other])
    last = np.array([actions[-1] for actions in other])
    (tmp_path / 'a.json').write_text(json.dumps({'first': first.tolist(), 'last': last.tolist()}))
    batch = default_collate([test_set[i] for i in (5, 2)])
    with FakeOpenAIServer(echo_anchors) as server:
        model = MODELS.build(dict(
            type='LLMPlanner', train_dataset=tiny_crosstask['train_dataset'],
            anchors=str(tmp_path / 'a.json'),
            backend=dict(type='openai', base_url=server.base_url, model='fake', **BOUNDED)))
        samples = model.test_step(batch)
    assert count > 5
    for sample, index in zip(samples, (5, 2)):
        assert sample.pred_plan.tolist() == [first[index]] * 2 + [last[index]]
        assert int(sample.sample_idx) == index
    prompts = sorted(text for text, _ in server.requests)
    names = sorted(taxonomy.task_names[taxonomy.action_task[first[i]]] for i in (5, 2))
    assert [f'procedure "{name}"' in text for name, text in zip(names, prompts)] == [True] * 2


# ------------------------------------------- results that cannot lie (issue 13: 1 and 5)
def closed_port_url():
    import socket
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    return f'http://127.0.0.1:{port}/v1'  # nothing listens there any more


class DeadServer:
    base_url = closed_port_url()


def test_dead_endpoint_exits_non_zero_and_writes_no_row(tiny_config, tmp_path, capsys):
    tool = load_tool('llm_eval')
    with pytest.raises(SystemExit) as stop:
        run_tool(tool, DeadServer, tiny_config, tmp_path)
    assert stop.value.code not in (0, None) and 'no results row written' in str(stop.value)
    err = capsys.readouterr().err
    assert f'{LIMIT} of {LIMIT} requests failed after the retries' in err
    assert f'connection: {LIMIT} window(s), e.g. fake at {DeadServer.base_url}' in err
    assert not list(tmp_path.glob('results*'))


def fail_one_first_action(action):
    """HTTP 500 for every window whose plan starts with ``action``; echo the others."""
    def script(prompt, attempt):
        ids = re.search(r'Incomplete sequence \(ids\): \[([^\]]*)\]', prompt).group(1)
        return {'status': 500} if int(ids.split(', ')[0]) == action else echo_anchors(prompt,
                                                                                       attempt)
    return script


def test_failed_requests_are_counted_in_the_row_only_with_allow_failures(
        tiny_crosstask, tiny_config, tmp_path, capsys):
    test_set = DATASETS.build(tiny_crosstask['test_dataset'])
    firsts = test_set.plans[stratified_sample(test_set.tasks, LIMIT, seed=0,
                                              keys=test_set.window_keys()), 0]
    failing = int(firsts[0])
    expected_failures = int((firsts == failing).sum())
    assert 0 < expected_failures < LIMIT
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(fail_one_first_action(failing)) as server:
        with pytest.raises(SystemExit):
            run_tool(tool, server, tiny_config, tmp_path)
        assert not (tmp_path / 'results.jsonl').exists()
        assert f'http_500: {expected_failures} window(s)' in capsys.readouterr().err
        summary = run_tool(tool, server, tiny_config, tmp_path, '--allow-failures')
    assert summary['counts']['request_failed'] == expected_failures
    row = read_results(tmp_path / 'results.jsonl')[0]
    assert row.failures == {'http_500': expected_failures}
    assert row.metrics['first_accuracy'] == pytest.approx(
        100 * (LIMIT - expected_failures) / LIMIT)


def test_cache_key_covers_the_base_url(tiny_config, tmp_path):
    """Another host is another server: no reply from the cache (another port too:
    test_known_s16)."""
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as first:
        run_tool(tool, first, tiny_config, tmp_path)
    always_first = lambda prompt, attempt: {'text': json.dumps(  # noqa: E731
        {'plan': [int(re.search(r'\(ids\): \[(\d+)', prompt).group(1))] * 3})}
    with FakeOpenAIServer(always_first) as second:
        # another host (backends.cache_endpoint)
        other_host = SimpleNamespace(base_url=second.base_url.replace('127.0.0.1', 'localhost'))
        summary = run_tool(tool, other_host, tiny_config, tmp_path)
        assert len(second.requests) == LIMIT  # another server: no reply from the cache
    rows = read_results(tmp_path / 'results.jsonl')
    assert [r.settings['base_url'] for r in rows] == [first.base_url, other_host.base_url]
    assert rows[1].metrics == pytest.approx(summary['metrics']) != rows[0].metrics


def test_text_only_llm_eval_needs_no_feature_files(tiny_crosstask, tmp_path):
    no_features = {**tiny_crosstask['test_dataset'], 'feature_dir': str(tmp_path / 'none'),
                   'cache_dir': None}
    train = {**tiny_crosstask['train_dataset'], 'feature_dir': str(tmp_path / 'none'),
             'cache_dir': None}
    config = tmp_path / 'no_features.py'
    config.write_text(f'train_dataloader = dict(dataset={train!r})\n'
                      f'test_dataloader = dict(dataset={no_features!r})\n')
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as server:
        summary = run_tool(tool, server, config, tmp_path, '--with-pkg')
    assert summary['counts']['ok'] == LIMIT
    with_features = DATASETS.build(tiny_crosstask['test_dataset'])  # the same windows
    plans = with_features.plans[stratified_sample(with_features.tasks, LIMIT, seed=0,
                                                  keys=with_features.window_keys())]
    for name, value in expected_echo_metrics(plans, plans[:, 0], plans[:, -1]).items():
        assert summary['metrics'][name] == pytest.approx(value)


def test_limit_draws_a_seeded_sample_stratified_over_tasks(shared_data):
    from vpn_plugin.baselines.llm.windows import annotation_windows
    test_set = annotation_windows(dict(  # the official CrossTask T=3 test windows, no features
        data_root=str(shared_data / 'crosstask'), taxonomy='taxonomy_133.json',
        feature_dir='/nonexistent', horizon=3, split='test',
        window_file='splits/test_T3_133.json'))
    tasks, keys = test_set.tasks, test_set.window_keys()
    assert len(tasks) == 4531 and len(set(tasks[:100].tolist())) == 1  # the first 100: one task
    picked = stratified_sample(tasks, 100, seed=0, keys=keys)
    assert len(picked) == len(set(picked.tolist())) == 100
    names, counts = np.unique(tasks, return_counts=True)
    shares = np.array([(tasks[picked] == name).sum() for name in names])
    assert len(names) == 18 and np.abs(shares - 100 * counts / len(tasks)).max() < 1
    assert np.array_equal(stratified_sample(tasks, 100, seed=0, keys=keys), picked)
    assert not np.array_equal(stratified_sample(tasks, 100, seed=1, keys=keys), picked)
    assert np.array_equal(stratified_sample(tasks, 10 ** 6, seed=0, keys=keys),
                          np.arange(len(tasks)))


def test_llm_planner_model_stops_on_failed_requests(tiny_crosstask, tmp_path):
    test_set = DATASETS.build(tiny_crosstask['test_dataset'])
    batch = default_collate([test_set[i] for i in range(2)])
    planner = dict(type='LLMPlanner', train_dataset=tiny_crosstask['train_dataset'],
                   backend=dict(type='openai', base_url=DeadServer.base_url, model='fake',
                                **BOUNDED))
    with pytest.raises(RuntimeError, match=r'2 request\(s\) of this batch failed after the '
                                           r'retries \(connection x2, e.g. fake at'):
        MODELS.build(planner).test_step(batch)
    samples = MODELS.build(dict(planner, allow_failures=True)).test_step(batch)
    assert [s.llm_status for s in samples] == ['request_failed'] * 2


def test_text_only_llm_eval_on_coin(shared_data, tmp_path):
    """The LLM baseline on COIN's official T=4 test windows (built from COIN's per-video
    file by the dataset config, no feature file read) against the scripted server."""
    from vpn_plugin.baselines.llm.windows import annotation_windows
    from vpn_plugin.datasets.sources import dataset_config
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as server:
        summary = tool.main([
            '--config', str(REPO / 'configs/vpn_coin_t4.py'), '--data-root', str(shared_data),
            '--base-url', server.base_url, '--model', 'fake', '--limit', str(LIMIT),
            '--with-pkg', '--no-progress', '--timeout', str(CLIENT_TIMEOUT_S),
            '--max-retries', '1',
            '--cache-dir', str(tmp_path / 'cache'), '--out', str(tmp_path / 'results.jsonl')])
        assert len(server.requests) == LIMIT
    test_set = annotation_windows(dataset_config('coin', 'test', 4, shared_data))
    assert len(test_set) == 3391
    plans = test_set.plans[stratified_sample(test_set.tasks, LIMIT, seed=0,
                                             keys=test_set.window_keys())]
    for name, value in expected_echo_metrics(plans, plans[:, 0], plans[:, -1]).items():
        assert summary['metrics'][name] == pytest.approx(value)
    row = read_results(tmp_path / 'results.jsonl')[0]
    assert row.dataset == 'coin' and row.horizon == 4
    assert row.shortened == f'limit={LIMIT} of 3391 windows'


def test_unset_api_key_variable_says_how_to_go_on(tiny_config, tmp_path, monkeypatch):
    """Issue 34: a local endpoint needs no key: one line saying so and how to run without it;
    a remote one: how to set it."""
    from vpn_plugin.baselines.llm.backends import resolve_api_key
    monkeypatch.delenv('VPN_UNSET_KEY', raising=False)
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as server:
        with pytest.raises(SystemExit) as stopped:
            run_tool(tool, server, tiny_config, tmp_path, '--api-key-env', 'VPN_UNSET_KEY')
        assert len(server.requests) == 0
    message = stopped.value.code
    assert message.startswith(f'error: --api-key-env VPN_UNSET_KEY: environment variable is not '
                              f'set; {server.base_url} is a local endpoint, which needs no key: '
                              'run without --api-key-env')
    assert len(message.split('\n')[0]) == len(message.split('\n(set')[0])  # one line
    with pytest.raises(KeyError, match='export VPN_UNSET_KEY=<your key>'):
        resolve_api_key('VPN_UNSET_KEY', 'https://api.openai.com/v1')
    monkeypatch.setenv('VPN_UNSET_KEY', 'sk-test')
    assert resolve_api_key('VPN_UNSET_KEY', 'http://localhost:8000/v1') == 'sk-test'

"""Issue 37, the known items closing12 left (fixKnown, session 13), each failing on e251d41."""
import json
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from fake_openai_server import FakeOpenAIServer
from mmaction.registry import DATASETS
from tool_modules import TOOLS, load_tool
from vpn_plugin.protocol.results import read_results

from test_llm_tools import CLIENT_TIMEOUT_S, echo_anchors

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DRAW = 'window_identity_v2'  # what rows and metrics record of the identity draw


# ------------------------------------------------ 1: --limit draws windows by their identity
def shuffled_list(path: str, out: Path) -> str:
    """The video list at ``path`` in another order (the same videos)."""
    videos = json.loads(Path(path).read_text())
    random.Random(7).shuffle(videos)
    out.write_text(json.dumps(videos))
    return str(out)


@pytest.fixture(scope='module')
def shuffled_test(tiny_crosstask, tmp_path_factory) -> dict:
    """The tiny CrossTask test split with its video list shuffled."""
    test = tiny_crosstask['test_dataset']
    folder = tmp_path_factory.mktemp('known_shuffled')
    return dict(test, video_list=shuffled_list(test['video_list'], folder / 'test_s.json'))


def identities(dataset) -> list:
    return [(w.vid, w.times, w.steps) for w in dataset.windows]


def test_limit_draws_the_same_windows_from_a_shuffled_video_list(tiny_crosstask, shuffled_test):
    """Before: ``PlanningDataset(limit=)`` (tools/test.py --limit, smoke runs) kept the windows
    at the drawn list positions, so the same videos listed in another order gave other
    windows. Now the same windows (and observations) whatever the order."""
    plain = DATASETS.build(dict(tiny_crosstask['test_dataset'], limit=20, limit_seed=3))
    other = DATASETS.build(dict(shuffled_test, limit=20, limit_seed=3))
    assert identities(plain) != identities(other)  # the lists' order is another
    assert sorted(identities(plain)) == sorted(identities(other))
    order = {key: i for i, key in enumerate(identities(other))}
    back = [order[key] for key in identities(plain)]
    np.testing.assert_array_equal(plain.start, other.start[back])
    np.testing.assert_array_equal(plain.plans, other.plans[back])
    seeded = DATASETS.build(dict(tiny_crosstask['test_dataset'], limit=20, limit_seed=4))
    assert sorted(identities(seeded)) != sorted(identities(plain))  # the seed still draws


def test_tools_test_limit_same_numbers_from_a_shuffled_list_and_records_the_draw(
        tiny_crosstask, shuffled_test, tmp_path):
    """tools/test.py --limit on the same videos in another order: the same metrics, and
    test_metrics.json says how the windows were drawn (``sample_draw``); a test of every
    window says nothing of a draw (no false caveat)."""
    from tiny_configs import write_tiny_config
    base = REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py'
    found = {}
    for name, data in (('plain', tiny_crosstask),
                       ('shuffled', dict(tiny_crosstask, test_dataset=shuffled_test))):
        config = write_tiny_config(tmp_path / f'{name}.py', base, '', data, batch_size=64)
        out = tmp_path / f'{name}.json'
        load_tool('test').main([str(config), '--work-dir', str(tmp_path / name),
                                '--out-metrics', str(out), '--limit', '9'])
        found[name] = json.loads(out.read_text())
    limited = found['plain']
    assert limited['sample_draw'] == SAMPLE_DRAW and 'limit=9 of 105' in limited['shortened']
    numbers = {key: value for key, value in limited.items() if '/' in key}
    assert {key: found['shuffled'][key] for key in numbers} == pytest.approx(numbers, rel=1e-12)
    assert found['shuffled']['sample_draw'] == SAMPLE_DRAW
    every = DATASETS.build(dict(tiny_crosstask['test_dataset']))  # no limit: no draw named
    notes = load_tool('test').test_notes(SimpleNamespace(test_dataloader=SimpleNamespace(
        dataset=every)))
    assert every.limited is None and notes['sample_draw'] == ''  # write_metrics drops ''


def run_llm_eval(server, config, cache, out, *extra):
    load_tool('llm_eval').main([
        '--config', str(config), '--base-url', server.base_url, '--model', 'fake',
        '--no-progress', '--timeout', str(CLIENT_TIMEOUT_S), '--max-retries', '1',
        '--backoff', '0.01', '--cache-dir', str(cache), '--out', str(out), *extra])
    return read_results(out)[-1]


def test_llm_eval_limit_plans_the_same_windows_from_a_shuffled_list(
        tiny_crosstask, shuffled_test, tmp_path):
    """llm_eval.py --limit on the same videos in another order: every request is answered
    from the first run's cache (the same windows, the same prompts), the same metrics, and
    the row records the draw, so tools/report.py never pools it with rows drawn by list
    position (other settings); a run of every window records no draw."""
    train = tiny_crosstask['train_dataset']
    configs = {}
    for name, test in (('plain', tiny_crosstask['test_dataset']), ('shuffled', shuffled_test)):
        configs[name] = tmp_path / f'{name}.py'
        configs[name].write_text(f'train_dataloader = dict(dataset={train!r})\n'
                                 f'test_dataloader = dict(dataset={test!r})\n')
    cache = tmp_path / 'cache'
    with FakeOpenAIServer(echo_anchors) as server:
        plain = run_llm_eval(server, configs['plain'], cache, tmp_path / 'a.jsonl', '--limit', '7')
        sent = len(server.requests)
        again = run_llm_eval(server, configs['shuffled'], cache, tmp_path / 'b.jsonl',
                             '--limit', '7')
    assert sent == 7 and (again.usage['cache_hits'], again.usage['requests']) == (7, 0)
    assert again.metrics == pytest.approx(plain.metrics, rel=1e-12)
    assert plain.settings['sample_draw'] == again.settings['sample_draw'] == SAMPLE_DRAW
    tool = load_tool('llm_eval')
    args = tool.parse_args(['--config', str(configs['plain']), '--model', 'fake', '--limit',
                            '200', '--base-url', server.base_url,
                            '--out', str(tmp_path / 'c.jsonl')])
    assert 'sample_draw' not in tool.run_settings(args, 105, 105)  # --limit 200 of 105: all
    assert tool.run_settings(args, 7, 105)['sample_draw'] == SAMPLE_DRAW


def test_protocol_rows_of_limited_tests_record_the_draw(tmp_path):
    """A protocol's ``--smoke`` rows (test windows limited) and rows of a ``...limit`` option
    record the draw in their settings, so they never count as done for rows drawn by list
    position; a full run's rows hold no such setting."""
    from mmengine.config import Config
    from vpn_plugin.protocol.runner import ProtocolRunner, TestSpec, TrainUnit
    config = str(REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py')
    spec = TestSpec('PKG_uniform_emissions', config, 3)
    unit = TrainUnit('u', config, 3, 0, {}, {}, False, [spec])
    protocol = Config(dict(protocol='p', dataset='crosstask'))
    assert 'sample_draw' not in ProtocolRunner(protocol, tmp_path).settings(unit, spec)
    smoke = ProtocolRunner(protocol, tmp_path, smoke=True).settings(unit, spec)
    assert smoke['sample_draw'] == SAMPLE_DRAW
    limited = TestSpec('PKG_uniform_emissions', config, 3,
                       {'test_dataloader.dataset.limit': 5})
    assert ProtocolRunner(protocol, tmp_path).settings(unit, limited)['sample_draw'] == \
        SAMPLE_DRAW


# ------------------------------------------------ 2: a half-precision checkpoint, recorded
@pytest.fixture(scope='module')
def half_checkpoint(tiny_pdpp_checkpoint, tmp_path_factory):
    """The tiny PDPP checkpoint with its floating tensors re-saved as float16."""
    import torch
    config, checkpoint = tiny_pdpp_checkpoint
    stored = torch.load(checkpoint, map_location='cpu', weights_only=False)
    stored['state_dict'] = {key: value.half() if value.is_floating_point() else value
                            for key, value in stored['state_dict'].items()}
    path = tmp_path_factory.mktemp('known_half') / 'pdpp_f16.pth'
    torch.save(stored, path)
    return config, path


def test_a_half_precision_checkpoint_is_named_in_test_metrics(tiny_pdpp_checkpoint,
                                                                half_checkpoint, tmp_path):
    """Before: test_metrics.json of a float16 checkpoint said nothing of it (only the log
    did). Now ``reduced_precision`` names it; a float32 checkpoint's metrics hold no such
    note (no false caveat)."""
    config = tiny_pdpp_checkpoint[0]
    found = {}
    for name, checkpoint in (('half', half_checkpoint[1]), ('full', tiny_pdpp_checkpoint[1])):
        out = tmp_path / f'{name}.json'
        load_tool('test').main([str(config), str(checkpoint), '--work-dir', str(tmp_path / name),
                                '--out-metrics', str(out), '--limit', '6'])
        found[name] = json.loads(out.read_text())
    assert found['half']['reduced_precision'].startswith(f'checkpoint {half_checkpoint[1]}: ')
    assert 'stored in torch.float16' in found['half']['reduced_precision']
    assert "coarser than the model's torch.float32" in found['half']['reduced_precision']
    assert 'reduced_precision' not in found['full']


def test_a_half_precision_checkpoint_is_a_caveat_of_its_row_and_report():
    """The protocol's row carries it as a caveat (``caveats.reduced_precision``), the rows
    file reads it back, and tools/report.py marks the method and says what the mark means;
    a row without it gets no mark."""
    from test_report import make_rows
    from dataclasses import asdict
    from vpn_plugin.protocol.report import build_table, caveat_note, to_markdown
    from vpn_plugin.protocol.results import row_from_dict
    from vpn_plugin.protocol.runner import test_caveats
    note = ("checkpoint c.pth: 40 of its 40 floating tensors are stored in torch.float16 "
            "(first w), coarser than the model's torch.float32")
    runner = SimpleNamespace(model=None, reduced_precision_note=note)
    assert test_caveats(runner) == {'reduced_precision': note}
    assert test_caveats(SimpleNamespace(model=None)) == {}
    rows = make_rows('VPN', [2.0, 3.0, 1.0, 4.0, 2.5]) + make_rows('PDPP', [1.0] * 5)
    for row in rows[:5]:
        row.caveats = {'reduced_precision': note}
    rows = [row_from_dict(asdict(row), 'rows.jsonl:1') for row in rows]  # read back
    text = to_markdown(build_table(rows, ('success_rate',)))
    assert 'VPN½' in text and 'PDPP½' not in text
    assert ('½ tested with a checkpoint stored in a coarser float than the model (float16 / '
            'bfloat16: the weights rounded, not as trained) (VPN: ' + note) in text
    assert caveat_note({'VPN': {'reduced_precision': [note]}}).startswith(
        '½ checkpoint in half precision')
    # found here: a figure of rows with damaged features stopped with KeyError (its short note)
    assert caveat_note({'VPN': {'damaged_features': ['a.npz: 3 frames lost']}}) == (
        "☒ damaged videos' features; see the results rows' caveats")


# ------------------------------------------------ 3: one rule for a BOM, in errors.read_text
BOM = '\ufeff'


def with_bom(source: Path, out: Path) -> Path:
    out.write_text(BOM + source.read_text(encoding='utf-8'), encoding='utf-8')
    return out


def test_every_json_and_text_reader_reads_past_a_bom(tiny_crosstask, tmp_path):
    """Before: ``errors.read_json`` (taxonomies, annotation JSON, window and video lists,
    state descriptions, records) refused a file a Windows editor saved with a BOM, and a
    prompt template kept it as the prompt's first character, while the annotation, EgoPER,
    results and anchors readers read past it, each its own way. Now one reader
    (``errors.read_text``) reads past it for all: the same content as without it."""
    from vpn_plugin.baselines.llm.anchors import load_anchor_predictions
    from vpn_plugin.baselines.llm.prompting import load_template
    from vpn_plugin.datasets.annotations import read_json_file
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    from vpn_plugin.errors import read_json
    taxonomy = Path(tiny_crosstask['taxonomy'])
    assert load_taxonomy(with_bom(taxonomy, tmp_path / 't.json')).action_names == \
        load_taxonomy(taxonomy).action_names
    assert read_json_file(with_bom(taxonomy, tmp_path / 'a.json')) == read_json_file(taxonomy)
    videos = Path(tiny_crosstask['test_dataset']['video_list'])
    assert read_json(with_bom(videos, tmp_path / 'v.json')) == read_json(videos)
    template = REPO / 'prompts/sequence_completion.txt'
    loaded = load_template(str(with_bom(template, tmp_path / 'p.txt')))[0].template
    assert loaded == template.read_text(encoding='utf-8') and not loaded.startswith(BOM)
    (tmp_path / 'anchors.json').write_text(BOM + '{"first": [1], "last": [2]}')
    assert [list(a) for a in load_anchor_predictions(
        tmp_path / 'anchors.json', 1)] == [[1], [2]]
    from vpn_plugin.errors import read_text
    assert read_text(with_bom(videos, tmp_path / 'v.txt')) == videos.read_text()
    # only the first character: a BOM inside the text is text (JSON refuses it where it is)
    (tmp_path / 'twice.json').write_text(BOM + BOM + '{}')
    with pytest.raises(ValueError, match=r'twice.json: line 1 column 1'):
        read_json(tmp_path / 'twice.json')


def test_a_bad_byte_after_a_bom_is_named_at_its_place_in_the_file(tmp_path):
    """No regression: the byte a not-UTF-8 error names counts the BOM (the file's own offset,
    a hex editor's: decoded before the BOM is dropped), for JSON and results files alike."""
    from vpn_plugin.errors import read_json
    from vpn_plugin.protocol.results import read_results
    for name in ('x.json', 'x.jsonl'):
        (tmp_path / name).write_bytes(BOM.encode('utf-8') + b'{"a": "\xe9"}')
    with pytest.raises(ValueError, match=r'JSON file .*x\.json: not UTF-8 text \(invalid '
                                         r'continuation byte at byte 10\b.*expected a JSON file'):
        read_json(tmp_path / 'x.json')
    with pytest.raises(ValueError, match=r'x\.jsonl: not UTF-8 text \(invalid continuation byte '
                                         r'at byte 10; .*expected a results file of JSON lines'):
        read_results(tmp_path / 'x.jsonl')


def test_no_reader_has_its_own_bom_rule():
    """One way: no module but errors.py decodes with utf-8-sig or strips a BOM itself."""
    found = [str(path.relative_to(REPO)) for path in (REPO / 'vpn_plugin').rglob('*.py')
             if path.name != 'errors.py' and ("utf-8-sig" in path.read_text()
                                             or "removeprefix('\\ufeff')" in path.read_text())]
    assert found == []


# ------------------------------------------------ 4: plan.py says which task is the truth
def test_plan_py_names_the_true_task_and_the_planners_own(tiny_pdpp_checkpoint, capsys):
    """Before: plan.py on dataset samples printed "task: X", the annotation's task, which
    reads like the planner's prediction; the planner's own task (PDPP's classifier) was not
    shown. Now the annotation is named as such, and the planner's task with its origin."""
    config, checkpoint = tiny_pdpp_checkpoint
    load_tool('plan').main([str(config), str(checkpoint), '--indices', '4'])
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith('sample 4 | '))
    assert ' | true task (annotation): ' in lines[first]
    assert lines[first + 1].startswith("  the planner's task: ")
    assert 'predicted by the task classifier, probability ' in lines[first + 1]


def test_plan_py_with_start_time_equal_to_goal_time_says_so(tiny_pdpp_checkpoint,
                                                              tiny_crosstask, capsys):
    """Before: --start-time S --goal-time S (or two times of one second) planned T steps
    between one moment and itself without a remark. Now a note says the two states are one
    moment; two seconds apart, no note (no false caveat)."""
    config, checkpoint = tiny_pdpp_checkpoint
    features = sorted(Path(tiny_crosstask['feature_dir']).glob('*.npz'))[0]
    found = {}
    for start, goal in (('2', '2'), ('2', '4')):
        load_tool('plan').main([str(config), '--checkpoint', str(checkpoint), '--features',
                                str(features), '--start-time', start, '--goal-time', goal])
        found[goal] = capsys.readouterr().out
    note = 'are the same second (2 s; times are read at whole seconds): the start and goal'
    assert note in found['2']
    assert 'same second' not in found['4']


# ------------------------------------------------ 5: the option a checkpoint's shapes follow
@pytest.mark.parametrize('model, names', [
    (dict(type='KEPP', feature_dim=8, num_actions=6, horizon=3, dim=32),
     ['model.n_timesteps is 10 here, but the checkpoint\'s weights show 20 (plan.betas: a '
      'diffusion schedule of 20 steps): load it with model.n_timesteps=20, the checkpoint\'s',
      'model.step_n_timesteps is 10 here, but the checkpoint\'s weights show 20 (step.betas']),
    (dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=2, horizon=3, dim=32),
     ['model.n_timesteps is 10 here, but the checkpoint\'s weights show 20 (diffusion.betas']),
])
def test_a_test_with_other_diffusion_steps_names_the_option(model, names):
    """Before: KEPP (and PDPP) tested with ``--cfg-options model.n_timesteps=10`` was refused
    naming the ``betas`` shapes only; now the option, its value here and the checkpoint's
    come first. Another misfit (more actions) names no option (no false claim)."""
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import MODELS
    from vpn_plugin.engine.checkpoint import CheckpointMismatchError, load_weights
    trained = MODELS.build(dict(model, n_timesteps=20)).state_dict()
    with pytest.raises(CheckpointMismatchError) as refused:
        load_weights(MODELS.build(dict(model, n_timesteps=10)), {'state_dict': trained}, 'c.pth')
    message = str(refused.value)
    assert message.startswith(f'checkpoint c.pth does not fit the model {model["type"]} of the '
                              f'config: {names[0]}')
    assert all(name in message for name in names) and 'betas: (20,) in the checkpoint' in message
    with pytest.raises(CheckpointMismatchError) as other:
        load_weights(MODELS.build(dict(model, n_timesteps=20, num_actions=7)),
                     {'state_dict': trained}, 'c.pth')
    assert 'model.n_timesteps' not in str(other.value) and 'weights show' not in str(other.value)


# ------------------------------------------------ 6: how much of a row the widest tolerance covers
def test_the_widest_tolerance_line_says_how_many_entries_it_covers(tmp_path, capsys):
    """Before: "sensitivity: widest tolerance 1.9 (...): <row>" read as if the whole row (and
    the check) were judged at 1.9, while the CEFITO AdamW widening covers only the entries whose
    gradient is round-off (509 of 142,820). Now the line counts them: here 3 of 200 entries of
    one optimiser-step row have a wide spread."""
    from vpn_plugin.oracles import compare
    from vpn_plugin.oracles.optimiser_step import step_row
    from vpn_plugin.oracles.sensitivity import print_sensitivity
    rng = np.random.default_rng(0)
    before = rng.normal(size=200)
    after = before + rng.normal(size=200) * 1e-3
    spread = np.zeros(200)
    spread[[5, 50, 150]] = 1e-3  # three entries the gradient's uncertainty leaves open
    compare.begin_check()
    try:
        rows = [step_row('t.npz:after_adamw.w', before, after, after + 1e-9, spread, 1e-4),
                step_row('t.npz:after_adamw.b', before[:20], after[:20], after[:20],
                         np.zeros(20), 1e-4)]
        assert all(row[4] for row in rows)
        print_sensitivity(tmp_path, rows)  # no weight file here: the widest line only
    finally:
        compare.begin_check()
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith('sensitivity: widest tolerance ')
    assert line.endswith("t.npz:after_adamw.w, on 3 of its 200 entries (the others judged at "
                         "most twice the base; over the check's per-entry rows 3 of 220 "
                         "entries past twice their base)")


# ------------------------------------------------ 7: the efficiency figure names what it shows
def test_the_sample_efficiency_figure_names_its_dataset_and_horizons(tmp_path, monkeypatch):
    """Before: the sample-efficiency figure (tools/plots.py efficiency) named neither the
    dataset nor, with one horizon, the horizon. Now its title does; PNG and PDF written."""
    from test_report_plots import efficiency_rows, figure_texts
    from vpn_plugin.protocol.plots import plot_sample_efficiency
    from vpn_plugin.protocol.plots import dataset_horizons_title
    texts = figure_texts(monkeypatch)
    rows = efficiency_rows()
    for row in rows:
        row.dataset = 'crosstask'
    written = plot_sample_efficiency([row for row in rows if row.horizon == 3], tmp_path / 'e',
                                     dashed=['w/o PKG'])
    assert sorted(path.suffix for path in written) == ['.pdf', '.png']
    assert 'CrossTask, T=3' in texts  # one horizon: no legend entry named it
    assert dataset_horizons_title(rows) == 'CrossTask, T=3, 4, 5, 6'


# ------------------------------------------------ 8: file:line counts the file's blank lines
def test_a_bad_row_after_a_blank_line_is_named_at_its_line_of_the_file(tmp_path):
    """Before: the writers' reader (``results._keyed_lines``: append_result, replace_result,
    drop_replaced_rows) numbered the lines after dropping blank ones, so a bad row on line 4
    after a blank line was named 'file:3'. Now the file's own line, as read_results names it."""
    from dataclasses import asdict
    from test_report import make_rows
    from vpn_plugin.protocol.results import append_result, read_results, replace_result
    good = json.dumps(asdict(make_rows('VPN', [2.0])[0]))
    path = tmp_path / 'rows.jsonl'
    path.write_text(f'{good}\n\n\n{{"method": "x"}}\n')
    row = make_rows('PDPP', [1.0])[0]
    for write in (append_result, replace_result):
        with pytest.raises(ValueError, match=r'rows\.jsonl:4\b') as refused:
            write(path, row)
        assert 'rows.jsonl:2' not in str(refused.value)
    with pytest.raises(ValueError, match=r'rows\.jsonl:4\b'):
        read_results(path)


# ------------------------------------------------ 9: a distributed resume's notes, once
@pytest.mark.parametrize('rank, said', [('0', True), ('1', False)])
def test_a_distributed_resume_says_what_it_found_on_rank_0_only(tmp_path, monkeypatch, capsys,
                                                                rank, said):
    """Before: every process of a 2-process ``--resume`` (torchrun: no rank known to the
    loggers yet) logged "last_checkpoint names ..., outside the work dir" and printed the
    '--resume auto' notes: each line once per rank. Now rank 0 alone says them; every rank
    still resolves the same checkpoint."""
    import mmengine.logging
    from mmengine.config import Config
    logged = []
    monkeypatch.setattr(mmengine.logging, 'print_log', lambda message, logger=None, level=20:
                        logged.append(message) if logger != 'silent' else None)
    monkeypatch.setenv('RANK', rank)
    train = load_tool('train')
    moved = tmp_path / 'moved'
    moved.mkdir()
    (moved / 'epoch_1.pth').write_bytes(b'x')
    (moved / 'last_checkpoint').write_text(str(tmp_path / 'first' / 'epoch_1.pth'))
    cfg = Config(dict(work_dir=str(moved)))
    train.set_resume(cfg, 'auto')  # torchrun's RANK read whatever the launcher
    assert cfg.resume and cfg.load_from == str(moved / 'epoch_1.pth')
    assert [m for m in logged if 'outside the work dir' in m] == ([
        f'{moved}/last_checkpoint names {tmp_path}/first/epoch_1.pth, outside the work dir '
        f'{moved} (copied or moved from another run): using {moved}/epoch_1.pth'] if said else [])
    empty = tmp_path / 'empty'
    empty.mkdir()
    cfg = Config(dict(work_dir=str(empty)))
    train.set_resume(cfg, 'auto')  # torchrun's RANK read whatever the launcher
    assert not cfg.resume
    assert ('holds no checkpoint to resume from' in capsys.readouterr().err) is said


# ------------------------------------------ every numeric flag reads numbers by one rule
def test_no_tool_flag_reads_numbers_with_int_or_float():
    """Lead (after passV's H01-H10): a flag typed ``int``/``float`` reads ``٣`` as 3 and
    ``1_0`` as 10 without a word; every numeric flag goes through ``errors.at_least`` /
    ``seed_argument`` (``errors.number_text_problem``). Found left after the pass:
    compare_official_training ``--difficulty``, benchmark_cefito_search ``--seed``."""
    import ast
    offenders = []
    for path in sorted(TOOLS.glob('*.py')):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, 'attr', '') == 'add_argument':
                for keyword in node.keywords:
                    if (keyword.arg == 'type' and isinstance(keyword.value, ast.Name)
                            and keyword.value.id in ('int', 'float')):
                        offenders.append(f'{path.name}:{node.lineno}')
    assert offenders == []


@pytest.mark.parametrize('tool, argv', [
    ('compare_official_training', ['--epochs', '1', '--out', 'o', '--difficulty', '٠.٥']),
    ('compare_official_training', ['--epochs', '1', '--out', 'o', '--difficulty', '1.5']),
    ('benchmark_cefito_search', ['--seed', '1_0']),
])
def test_the_last_two_numeric_flags_refuse_other_forms(tool, argv, capsys):
    with pytest.raises(SystemExit) as raised:
        load_tool(tool).parse_args(argv)
    assert raised.value.code == 2 and 'expected' in capsys.readouterr().err


# ------------------------------------------ duplicate JSON keys: one rule in read_json
@pytest.mark.parametrize('reader', ['cefito_loader', 'read_json'])
def test_a_key_given_twice_is_refused_by_every_json_reader(tmp_path, reader):
    """passM (left): CEFITO's loader_annotations.json took a key given twice as the last; only
    the fixture meta reader used ``errors.unique_keys``. ``errors.read_json`` refuses a key
    given twice unless its caller gives its own ``object_pairs_hook``."""
    from vpn_plugin.errors import read_json
    path = tmp_path / 'loader_annotations.json'
    path.write_text('[{"id": {"vid": "a", "task_id": 1, "task_id": 2}}]')
    with pytest.raises(ValueError, match=r"loader_annotations\.json: the key 'task_id' is given "
                                         r'twice in one object.*1 and 2'):
        if reader == 'read_json':
            read_json(path, 'CEFITO loader annotations')
        else:
            from vpn_plugin.oracles.cefito import loader_outputs
            loader_outputs(tmp_path, {'horizon': 3})
    path.write_text('\ufeff[{"id": {"vid": "a", "task_id": 1}}]')  # BOM, each key once: read
    assert read_json(path) == [{'id': {'vid': 'a', 'task_id': 1}}]
    assert read_json(path, object_pairs_hook=list) == [[('id', [('vid', 'a'), ('task_id', 1)])]]

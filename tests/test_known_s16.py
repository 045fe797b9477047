"""Issue 37, the known items closing15 left (fixKnown, session 16), each failing on 3ce84f9
(checked in a worktree of it) unless it says it guards a valid input."""
import json
import os
from pathlib import Path

import pytest

from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
KEPT = REPO / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'
VPN_T3 = 'configs/vpn_crosstask_t3.py'


# ------------------------------------ 1 (N_mixspell2): one config however its rows spell it
def _spelt(rows, spellings):
    """The ViterbiPlanNet and Base Model rows of ``rows``, ViterbiPlanNet's seed s naming its
    config as ``spellings[s]``."""
    rows = [row for row in rows if row.method in ('ViterbiPlanNet', 'Base Model')]
    for row in rows:
        if row.method == 'ViterbiPlanNet' and row.seed in spellings:
            row.config = spellings[row.seed]
    return rows


def _sr_table(rows):
    from vpn_plugin.protocol.report import build_table
    return build_table(rows, metrics=('success_rate',), num_resamples=200,
                       num_diff_resamples=200)


def test_rows_spelling_one_config_three_ways_share_a_cell(tmp_path, monkeypatch):
    """Before (passC N_mixspell2): rows naming one config as ``/abs/configs/x.py``,
    ``configs/x.py`` and through a link (``./x.py`` from another folder) were refused as
    "differ in config". Now the cell groups the resolved file and its content."""
    from vpn_plugin.protocol.results import read_results
    os.symlink(REPO / VPN_T3, tmp_path / 'x.py')
    monkeypatch.chdir(tmp_path)  # another working directory: configs/x.py is the repository's
    rows = _spelt(read_results(KEPT), {0: str(REPO / VPN_T3), 1: './x.py', 2: VPN_T3})
    assert _sr_table(rows).cells == _sr_table(_spelt(read_results(KEPT), {})).cells


def test_two_configs_of_one_name_stay_apart(tmp_path):
    """Guard: two files named alike but of other content (``a/x.py``, ``b/x.py``) are two
    run settings, named with the files they are."""
    from vpn_plugin.protocol.results import read_results
    for folder, note in (('a', '# one\n'), ('b', '# another\n')):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / 'x.py').write_text(f'_base_ = [{str(REPO / VPN_T3)!r}]\n{note}')
    rows = _spelt(read_results(KEPT), {0: str(tmp_path / 'a/x.py'), 1: str(tmp_path / 'b/x.py'),
                                       2: str(tmp_path / 'b/x.py')})
    with pytest.raises(ValueError, match=r'differ in config: ".*/a/x.py" \(seed 0\); '
                       r'".*/b/x.py" \(seeds 1, 2\)'):
        _sr_table(rows)


# ------------------------------------ 2 (KS3): tests/test_train.py (the end of the file)


# ------------------------------------ 3: an output's suffix compared without case
@pytest.mark.parametrize('name, kind', [('X.JSON', 'metrics'), ('X.NPY', 'text_features'),
                                        ('X.JSONL', 'results'), ('X.Npz', 'features'),
                                        ('T.TEX', 'report_latex')])
def test_an_output_suffix_in_capitals_is_that_format(tmp_path, name, kind):
    """Before (passV): ``--out X.JSON`` / ``X.NPY`` / ``X.JSONL`` were refused "expected a
    file name ending in .json" by every tool (outputs.check_output's suffix rule was
    case-sensitive). Now one rule (``outputs.has_suffix``) compares without case."""
    from vpn_plugin.outputs import check_output
    assert check_output(tmp_path / name, kind, '--out') == tmp_path / name


def test_another_suffix_is_still_refused(tmp_path):
    """Guard: a name of another format is refused as before (case aside)."""
    from vpn_plugin.outputs import check_output
    for name in ('X.txt', 'X.JSON.bak', 'X.NPZ'):
        with pytest.raises(ValueError, match='expected a file name ending in .npy'):
            check_output(tmp_path / name, 'text_features', '--out')


def test_a_results_file_named_in_capitals_is_written_and_read(tmp_path):
    """Before: rows appended to ``R.JSONL`` were refused ("use a .jsonl name") and reading it
    said 'unknown results format ".JSONL"'; llm_eval refused ``--out R.JSONL``."""
    from vpn_plugin.protocol.results import append_result, read_results
    row = read_results(KEPT)[0]
    assert append_result(tmp_path / 'R.JSONL', row)
    assert read_results(tmp_path / 'R.JSONL') == [row]
    args = load_tool('llm_eval').parse_args(['--config', VPN_T3, '--model', 'm', '--base-url',
                                             'http://localhost:1/v1',
                                             '--out', str(tmp_path / 'L.JSONL')])
    assert args.out == str(tmp_path / 'L.JSONL')


# ------------------------------------ 4: marks and a Δ as printed; the .tex comment
def _rows(method, scores):
    from vpn_plugin.protocol.results import ResultRow
    return [ResultRow(method=method, seed=seed, horizon=3, dataset='crosstask',
                      protocol='p', metrics={'success_rate': score})
            for seed, score in enumerate(scores)]


def _table(*methods):
    from vpn_plugin.protocol.report import build_table
    return build_table([r for name, scores in methods for r in _rows(name, scores)],
                       metrics=('success_rate',), num_resamples=200, num_diff_resamples=200)


def test_means_that_print_alike_share_the_mark():
    """Before (passP): 30.004 and 29.996 both printed 30.00, one bold and one underlined (the
    mark followed the unrounded mean). Now both are bold, the next underlined, and the
    caption says the rule."""
    from vpn_plugin.protocol.report import to_latex, to_markdown
    table = _table(('A', [30.004] * 5), ('B', [29.996] * 5), ('C', [20.0] * 5))
    markdown = to_markdown(table)
    assert '| A | **30.00 ± 0.00** |' in markdown and '| B | **30.00 ± 0.00** |' in markdown
    assert '| C | <u>20.00 ± 0.00</u> |' in markdown
    assert 'means that print alike share the mark' in markdown
    assert r'B & \textbf{30.00' in to_latex(table)
    assert '| B | <u>29.996 ± 0.000</u> |' in to_markdown(table, digits=3)  # apart at 3


def test_marks_of_means_that_print_apart_say_nothing_new():
    """Guard: without a printed tie the caption is as before (no rule sentence)."""
    from vpn_plugin.protocol.report import to_markdown
    markdown = to_markdown(_table(('A', [31.0, 30.0, 32.0]), ('B', [20.0, 21.0, 22.0])))
    assert 'print alike' not in markdown and '| A | **31.00' in markdown
    assert 'rounds to zero' not in markdown


def test_a_significant_delta_never_prints_as_zero():
    """Before (passP): a Δ of 0.002 whose interval excludes 0 printed "+0.00*". Now it
    prints with the decimals that show it ("+0.002*"), and the caption says so."""
    from vpn_plugin.protocol.report import to_markdown
    markdown = to_markdown(_table(('A', [50.001, 50.002, 50.003, 50.001, 50.002]),
                                  ('B', [50.0] * 5)))
    delta = markdown.split('| Δ |')[1].split('|')[0].strip()
    assert delta.startswith('+0.002*'), delta
    assert 'rounds to zero is printed with the decimals that show it' in markdown


@pytest.mark.parametrize('name, comment', [('Réseau é ñ ß – Łódź', False),
                                           ('Ранний', True), ('ąę', True), ('a ≤ b', True)])
def test_the_tex_comment_names_only_characters_pdflatex_does_not_set(name, comment):
    """Before (passP): any non-ASCII character (é, which pdfLaTeX sets) drew "compile with
    LuaLaTeX". Now only the characters pdfLaTeX does not set are named (checked by
    compiling each with pdflatex, TeX Live 2022)."""
    from vpn_plugin.protocol.report import to_latex
    latex = to_latex(_table((name, [30.0, 31.0, 32.0]), ('B', [20.0, 21.0, 22.0])))
    assert ('LuaLaTeX' in latex) == comment, latex.splitlines()[1]
    if comment:
        assert latex.splitlines()[1].startswith("% holds characters pdfLaTeX does not set")
        assert 'é' not in latex.splitlines()[1]


# ------------------------------------ 5: run_protocol --status and --partition ''
def _status_of_finished_schema(tmp_path, kept_methods):
    """--status of standard_niv's SCHEMA unit (two rows: 'SCHEMA', 'SCHEMA w/o PKG'; T=3,
    seed 0, smoke), finished, with only the rows of ``kept_methods`` in its results file."""
    from mmengine.config import Config
    from vpn_plugin.protocol.results import append_result
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    from vpn_plugin.protocol.status import unit_statuses
    protocol = Config.fromfile(REPO / 'configs/protocol/standard_niv.py')
    (unit,) = [unit for unit in expand_units(protocol, seeds=[0], horizons=[3])
               if unit.slug == 'SCHEMA']
    assert [spec.method for spec in unit.tests] == ['SCHEMA', 'SCHEMA w/o PKG']
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=True)
    work_dir = Path(runner.work_dir(unit))
    work_dir.mkdir(parents=True)
    (work_dir / 'unit_state.json').write_text(json.dumps(
        dict(state='done', started=1.0, ended=2.0, pid=1, host='vm', attempts=1)))
    for spec in unit.tests:
        if spec.method in kept_methods:
            append_result(runner.results_file, runner.row_for(unit, spec, metrics={
                'success_rate': 1.0}))
    (status,) = unit_statuses(runner, [unit], queue=lambda jobs: {})
    return status


def test_status_names_the_one_missing_row_of_a_finished_unit(tmp_path):
    """Before (passP): with one of its two rows deleted, --status said "its rows are not in
    ..." (as if both were gone). Now it names the missing one."""
    status = _status_of_finished_schema(tmp_path, ['SCHEMA'])
    assert status.state == 'interrupted'
    assert "its run finished, but 1 of its 2 rows is (method 'SCHEMA w/o PKG', T=3) not in" \
        in status.why, status.why


def test_status_of_a_finished_unit_without_its_rows_is_unchanged(tmp_path):
    """Guard: both rows missing: "its rows are not in" as before."""
    status = _status_of_finished_schema(tmp_path, [])
    assert 'its run finished, but its rows are not in' in status.why, status.why


def test_an_empty_partition_is_named_empty(capsys):
    """Before (passP): ``--launcher slurm --partition ''`` said "needs --partition" (it was
    given). Now: an empty value."""
    with pytest.raises(SystemExit):
        load_tool('run_protocol').parse_args(['configs/protocol/standard_niv.py', '--launcher',
                                              'slurm', '--partition', ''])
    error = capsys.readouterr().err
    assert "--partition '': an empty value; expected the name of a Slurm partition" in error
    assert 'needs --partition' not in error


# ------------------------------------ 6: a variable rate is not "the file's own"
def test_a_variable_rate_refusal_names_ffmpegs_tbr_not_the_files_own_rate():
    """Before (passV): a variable-frame-rate mkv ('29.5 fps, 120 tbr') refused under
    --native-fps said "at the file's own 120 fps". Now the 120 is named as ffmpeg's tbr beside
    the rate the stream states."""
    from vpn_plugin.video.decode import UnreadableVideoError, VideoHeader, check_time_step
    from vpn_plugin.video.recipe import FrameRecipe
    header = VideoHeader('matroska,webm', ('Video: h264 (High), yuv420p, 64x48, 29.5 fps, '
                                           '120 tbr, 1k tbn (default)',), 4.0)
    with pytest.raises(UnreadableVideoError) as refused:
        check_time_step('v.mkv', header, FrameRecipe(fps=None))
    message = str(refused.value)
    assert "chunk 16 at 120 fps (ffmpeg's 'tbr' of its video stream, the rate it gives its " \
        "frames at; the stream states 29.5 fps on average: a variable frame rate) " \
        "(--native-fps): one feature row per 0.1333 s" in message, message
    assert "file's own" not in message


def test_a_constant_rate_refusal_still_names_the_files_own_rate():
    """Guard: '30 fps, 30 tbr' (and a stream stating only '30 fps') is the file's own rate."""
    from vpn_plugin.video.decode import UnreadableVideoError, VideoHeader, check_time_step
    from vpn_plugin.video.recipe import FrameRecipe
    for stream in ('Video: h264, yuv420p, 64x48, 30 fps, 30 tbr, 15360 tbn',
                   'Video: mjpeg, yuvj420p, 64x48, 30 fps'):
        with pytest.raises(UnreadableVideoError, match=r"chunk 16 at the file's own 30 fps "
                           r'\(--native-fps\): one feature row per 0.5333 s'):
            check_time_step('v.mp4', VideoHeader('mov', (stream,), 2.0), FrameRecipe(fps=None))


# ------------------------------------ 7: the reply cache keyed on what decides the reply
def test_the_same_server_is_served_from_the_cache(tmp_path):
    """The same endpoint and model are served from the cache; an edited entry is discarded
    (the keyed checksum). closing16 item 7 dropped the port from the key, which scored a second
    server on the host with the first one's replies: the port is kept again (passL K1 of the
    nineteenth pass, tests/test_hostile_pass22_passL.py)."""
    from fake_openai_server import FakeOpenAIServer
    from vpn_plugin.baselines.llm.backends import OpenAIChatBackend
    messages = [{'role': 'user', 'content': 'plan it'}]
    with FakeOpenAIServer(lambda prompt, attempt: {'text': '[1, 2, 3]'}) as server:
        def ask():
            return OpenAIChatBackend(server.base_url + '/', 'm', cache_dir=tmp_path / 'cache',
                                     max_retries=0).complete(messages)
        assert not ask().cached and len(server.requests) == 1
        assert ask().cached and len(server.requests) == 1
        (entry,) = (tmp_path / 'cache').glob('*/*.json')
        entry.write_text(entry.read_text().replace('[1, 2, 3]', '[3, 2, 1]'))
        assert not ask().cached and len(server.requests) == 2


def test_the_cache_endpoint_drops_only_the_default_port():
    """Guard: host, scheme, port and path tell servers apart; a default port, case and a
    trailing slash do not; a local model's endpoint (its files' hash) is kept whole."""
    from vpn_plugin.baselines.llm.backends import cache_endpoint
    assert cache_endpoint('http://127.0.0.1:8001/v1') == 'http://127.0.0.1:8001/v1'
    assert cache_endpoint('http://127.0.0.1:8001/v1') != cache_endpoint('http://127.0.0.1:8002/v1')
    assert cache_endpoint('HTTP://LocalHost:80/v1/') == 'http://localhost/v1'
    assert cache_endpoint('https://api.example.org:443/v1') == 'https://api.example.org/v1'
    assert cache_endpoint('http://[::1]:9000/v1') == 'http://[::1]:9000/v1'
    assert cache_endpoint('http://a.example:1/v1') != cache_endpoint('http://b.example:1/v1')
    assert cache_endpoint('transformers:cpu files sha256:ab') == 'transformers:cpu files sha256:ab'


# ------------------------------------ 8: plain_text for a vid; one import path; no private import
def test_a_missing_video_of_the_vlm_names_its_vid_as_plain_text(tmp_path):
    """Before: ``find_video_source`` printed the vid with ``!r`` ('a\\nb' in quotes, a
    second spelling beside every other "(video ...)" message). Now ``plain_text``."""
    from vpn_plugin.baselines.llm.frames import find_video_source
    with pytest.raises(FileNotFoundError) as missing:
        find_video_source(tmp_path, 'a\nb')
    message = str(missing.value)
    assert message.startswith('video a\\nb: neither a folder ') and '\n' not in message
    assert "'a" not in message


def test_plain_text_and_the_results_helpers_have_one_import_path():
    """Before: ``outputs.plain_text`` re-exported ``errors.plain_text`` (two import paths of
    one function) and protocol/expected.py imported results.py's private ``_resolve_paths``
    and ``_row_line``. Now one path each, public."""
    import ast
    import vpn_plugin.outputs as outputs
    from vpn_plugin.protocol import results
    assert not hasattr(outputs, 'plain_text')
    assert callable(results.row_line) and callable(results.resolve_row_paths)
    for file in [*(REPO / 'vpn_plugin').rglob('*.py'), *(REPO / 'tools').glob('*.py')]:
        text = file.read_text()
        if 'plain_text' not in text or 'outputs import' not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and 'outputs' in node.module:
                assert 'plain_text' not in [a.name for a in node.names], file
    tree = ast.parse((REPO / 'vpn_plugin/protocol/expected.py').read_text())
    private = [a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
               for a in node.names if a.name.startswith('_')]
    assert private == []


# ------------------------------------ 9: one wording of a broken link
def test_every_reader_words_a_broken_link_one_way(tmp_path):
    """Before: a dangling link was "a broken symbolic link to T, which does not exist"
    (feature files), "a symlink that leads nowhere" (annotations), "(dangling link)"
    (convert_features) beside errors.broken_link's "a symbolic link to T, which leads to no
    file (a dangling link)". Now every reader says the last (``errors.link_problem``)."""
    from vpn_plugin.datasets.annotations import BadVideoError
    from vpn_plugin.datasets.features import require_feature_file
    from vpn_plugin.datasets.sources import why_absent
    from vpn_plugin.errors import check_file
    os.symlink('gone.npy', tmp_path / 'v.npy')
    os.symlink('w.npy', tmp_path / 'w.npy')
    wording = {'v.npy': 'a symbolic link to gone.npy, which leads to no file (a dangling link)',
               'w.npy': 'a symbolic link to w.npy, which leads back to itself (a loop of links)'}
    for name, said in wording.items():
        path = tmp_path / name
        with pytest.raises(BadVideoError) as refused:
            require_feature_file(path, 'v')
        assert f'{name} (video v) is {said}; expected a link to a feature file' \
            in str(refused.value)
        assert why_absent(path) == f'is {said}'
        assert load_tool('convert_features').entry_kind(path) == f'{name} ({said})'
        with pytest.raises(FileNotFoundError, match=f'{name} is {said}'.replace('(', r'\(')
                           .replace(')', r'\)')):
            check_file(path, 'feature file')


# ------------------------------------ 10: a PKG option named by its config path
def test_a_pkg_option_refused_at_build_names_its_config_path():
    """Before (passM H28): ``init_planner(..., cfg_options={'model.pkg.count_mode': 'Window'})``
    said "PKGBuilder.count_mode='Window'", the builder's option, not the ``model.pkg.count_mode``
    the user wrote. Now the config path, also in a config check (named once)."""
    from mmengine.config import Config
    from vpn_plugin.models.pkg_builder import PKGBuilder
    from vpn_plugin.runner import check_config_entries
    with pytest.raises(ValueError, match=r"^model.pkg.count_mode='Window'; expected one of "
                                         r"'window', 'video'"):
        PKGBuilder(count_mode='Window')
    cfg = Config.fromfile(str(REPO / 'configs/baselines/pdpp_crosstask_t3.py'))
    cfg.merge_from_dict({'model.pkg.count_mode': 'Window'})
    with pytest.raises(ValueError) as refused:
        check_config_entries(cfg, 'pdpp.py')
    assert str(refused.value).startswith("pdpp.py: model.pkg.count_mode='Window'; expected "), \
        str(refused.value)
    assert 'PKGBuilder.' not in str(refused.value) and 'model.pkg: model.pkg' not in str(
        refused.value)

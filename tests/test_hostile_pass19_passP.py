"""Session 14, hostile pass (passP, log /tmp/passP_log.md): dataset names in Markdown headers,
T1's ',,' ligature in LaTeX, blank titles and shortened reasons, keep_results of an incomplete
protocol, --average-datasets tables, protocol fields of another kind. Each test fails on
ab2cb94 (its no-false-refusal / no-false-caveat halves pass there too)."""
import copy
import json
from pathlib import Path

import pytest

from test_hostile_pass15_fixrows import rows_of, tool_refusal
from test_hostile_pass17_passP import T3, row_line, tables
from tool_modules import load_tool

MARKUP_NAMES = ('*x*', '_cross_', '<b>x</b>', 'R&amp;D', '`code`', '$k$', '~~st~~', 'a\\*b',
                '[x](http://y)', '__init__')


def two_datasets(tmp_path, dataset, features=True) -> Path:
    """VPN and Base Model rows of T3, and a copy of each as ``dataset`` (a name or several; no
    config: a user's own data)."""
    rows = []
    for line in T3.read_text().splitlines():
        row = json.loads(line)
        if row['method'] not in ('ViterbiPlanNet', 'Base Model'):
            continue
        row['per_sample_file'] = ''
        rows.append(row)
        for name in [dataset] if isinstance(dataset, str) else dataset:
            copied = dict(copy.deepcopy(row), dataset=name, config='')
            if not features:
                copied['features'] = {}
            rows.append(copied)
    path = tmp_path / 'two.jsonl'
    path.write_text(''.join(json.dumps(row, ensure_ascii=False) + '\n' for row in rows))
    return path


def header_cells(markdown: str) -> list:
    """The header cells of the table as a CommonMark + GFM renderer shows them (text)."""
    markdown_it = pytest.importorskip('markdown_it')
    import html
    import re
    rendered = markdown_it.MarkdownIt('commonmark').enable('table').enable(
        'strikethrough').render(markdown)
    head = re.search(r'<thead>(.*?)</thead>', rendered, re.S).group(1)
    cells = re.findall(r'<th[^>]*>(.*?)</th>', head, re.S)
    assert all('<' not in cell for cell in cells), cells  # no markup: text only
    return [html.unescape(cell) for cell in cells]


# ------------------------------------------------- ds_star ... ds_us2: a dataset name in a header
def test_a_dataset_name_in_a_markdown_header_is_text(tmp_path):
    """ds_* (wrong): the column headers were written raw: a dataset '*x*' showed an italic x,
    '<b>x</b>' bold, 'R&amp;D' as 'R&D', '[x](http://y)' a link."""
    from vpn_plugin.protocol.report import build_table, to_markdown
    from vpn_plugin.protocol.results import read_results
    table = build_table(read_results([two_datasets(tmp_path, MARKUP_NAMES)]),
                        ['success_rate'], num_resamples=20)
    shown = header_cells(to_markdown(table))
    for name in MARKUP_NAMES:
        assert f'{name} T=3 SR' in shown, (name, shown)


def test_plain_dataset_headers_are_written_as_before(tmp_path):
    """No false change: 'CrossTask T=3 SR' and a plain 'my data' are not escaped."""
    from vpn_plugin.protocol.report import build_table, to_markdown
    from vpn_plugin.protocol.results import read_results
    table = build_table(read_results([two_datasets(tmp_path, 'my data')]), ['success_rate'])
    assert to_markdown(table).splitlines()[0] == \
        '| Method | Params | CrossTask T=3 SR | my data T=3 SR |'


# ------------------------------------------------------------------- LT1a: T1's ',,' ligature
def test_two_commas_print_as_two_commas_with_t1_fonts(tmp_path):
    """LT1a (wrong): with \\usepackage[T1]{fontenc} TeX prints ',,' as a low double quote:
    'a,,b VPN' showed 'a„b VPN' in the paper. One comma and ', ,' stay as written."""
    from test_hostile_pass17_passP import renamed
    _, latex = tables(renamed(tmp_path, {'ViterbiPlanNet': 'a,,b VPN', 'Base Model': 'a, b, c'}))
    assert row_line(latex, 'a,').startswith('a,{},b VPN')
    assert row_line(latex, 'a, b').startswith('a, b, c\\textsuperscript')


# ---------------------------------------------------------------------- T01, T02: blank titles
def test_a_blank_or_dotted_title_reads_the_same_in_both_tables(tmp_path):
    """T01 (silent): a title of blanks gave the LaTeX caption a stray '. ' (the Markdown none);
    T02: a title '...' vanished from the caption (its dots stripped) while the Markdown showed
    it."""
    from test_hostile_pass17_passP import renamed
    path = renamed(tmp_path, {})
    markdown, latex = tables(path, title='   ')
    assert not markdown.startswith('**') and row_line(latex, r'\caption').startswith(
        r'\caption{Mean over seeds')
    markdown, latex = tables(path, title='...')
    assert markdown.startswith('**...**') and row_line(latex, r'\caption').startswith(
        r'\caption{... Mean over seeds')
    # as before: a period after a title, none added to one that ends a sentence
    assert row_line(tables(path, title='Results')[1], r'\caption').startswith(
        r'\caption{Results. Mean')
    assert row_line(tables(path, title='Results.')[1], r'\caption').startswith(
        r'\caption{Results. Mean')
    assert row_line(tables(path, title='Why?')[1], r'\caption').startswith(
        r'\caption{Why? Mean')


# --------------------------------------------------------------- FP_shortened_ws: a blank reason
def test_a_blank_shortened_reason_is_a_full_run(tmp_path):
    """FP_shortened_ws (silent): shortened '   ' was a reason, printed as a blank item in the
    caption ('ViterbiPlanNet:    , max_epochs=...'). Blanks are no reason, as ''."""
    def blank_seed0(row):
        if row['seed'] == 0:
            row['shortened'] = '   '
    message = tool_refusal('report', [str(rows_of(tmp_path, 'b0.jsonl', blank_seed0, T3))])
    assert "differ in shortened" in message and '"full run" (seed 0)' in message

    def blank(row):
        row['shortened'] = ' \t'
    from vpn_plugin.protocol.report import build_table, to_markdown
    from vpn_plugin.protocol.results import read_results
    table = build_table(read_results([rows_of(tmp_path, 'b.jsonl', blank, T3)]),
                        ['success_rate'])
    assert 'ViterbiPlanNet' not in table.shortened
    assert 'ViterbiPlanNet:  ' not in to_markdown(table)


# -------------------------------------------------------- K1: keep_results of a protocol gap
def incomplete_protocol(tmp_path) -> Path:
    from vpn_plugin.protocol.expected import add_expected
    from vpn_plugin.protocol.results import read_results
    results = tmp_path / 'runs' / 'results.jsonl'
    results.parent.mkdir()
    lines = T3.read_text().splitlines()
    rows = [dict(json.loads(line), per_sample_file='') for line in lines]
    results.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    add_expected(results, read_results(results))
    return results


def test_keep_results_refuses_a_protocol_with_missing_rows(tmp_path):
    """K1 (silent): keeping 11 of the 12 rows a protocol was asked for gave a kept file that
    report.py made into a table as complete (its cells of 2 seeds unmarked)."""
    results = incomplete_protocol(tmp_path)
    lines = results.read_text().splitlines()
    results.write_text(''.join(line + '\n' for line in lines[1:]))
    out = tmp_path / 'kept.jsonl'
    message = tool_refusal('keep_results', [str(results), '--out', str(out)])
    assert '1 results row(s) of the protocol are missing' in message
    assert 'train DVL / infer argmax seed=0 T=3' in message
    assert not out.exists() and not (tmp_path / 'kept').exists()


def test_keep_results_keeps_a_complete_protocol(tmp_path, capsys):
    """No false refusal: every expected row present."""
    results = incomplete_protocol(tmp_path)
    out = tmp_path / 'kept.jsonl'
    load_tool('keep_results').main([str(results), '--out', str(out)])
    assert 'kept 30 rows' in capsys.readouterr().out


# ------------------------------------------------------------- AV1, AV2: --average-datasets
def test_a_table_averaged_over_datasets_names_them_and_keeps_their_marks(tmp_path):
    """AV2 (silent): the header said 'T=3 SR' and nothing in the table said that its cells
    average datasets, nor which. AV1 (silent): one dataset without a features record dropped
    the other's synthetic mark and label ('Features: not recorded')."""
    from vpn_plugin.protocol.report import build_table, to_latex, to_markdown
    from vpn_plugin.protocol.results import mean_over_datasets, read_results
    rows = mean_over_datasets(read_results([two_datasets(tmp_path, 'other', features=False)]))
    table = build_table(rows, ['success_rate'])
    markdown, latex = to_markdown(table), to_latex(table)
    assert 'mean(crosstask,other) T=3 SR' in markdown.splitlines()[0]
    assert 'mean(crosstask,other) T=3 SR' in latex
    assert 'ViterbiPlanNet†‖' in markdown and 'synthetic (make_synthetic_features.py' in markdown
    assert 'not recorded' in markdown


def test_an_averaged_table_of_recorded_features_is_as_before_but_its_header(tmp_path):
    """No false caveat: both datasets synthetic: the same marks and feature sentence."""
    from vpn_plugin.protocol.report import build_table, to_markdown
    from vpn_plugin.protocol.results import mean_over_datasets, read_results
    rows = mean_over_datasets(read_results([two_datasets(tmp_path, 'other')]))
    markdown = to_markdown(build_table(rows, ['success_rate']))
    assert 'ViterbiPlanNet†‖' in markdown and 'not recorded' not in markdown


# ------------------------------------------- PP_tests_dict, PP_tests_empty, PP_variant_list
PROTOCOL = """protocol = 'pp'
seeds = [0]
dataset = 'niv'
runs = [dict(method='U', config='configs/baselines/uniform_emissions_{{dataset}}_t3.py',
             train=False{extra})]
"""


@pytest.mark.parametrize('extra, named', [
    (', tests=dict(horizon=4)', "runs[0].tests = {'horizon': 4}; expected a non-empty list"),
    (', tests=[]', 'runs[0].tests = []; expected a non-empty list of dicts'),
    (', variant=[1]', 'runs[0].variant = [1]; expected a dict'),
    (", cfg_options=[('model.x', 1)]", "runs[0].cfg_options = [('model.x', 1)]; expected a dict"),
    (', tests=[dict(variant=3)]', 'runs[0].tests[0].variant = 3; expected a dict')])
def test_protocol_run_fields_of_another_kind_are_refused_naming_them(tmp_path, extra, named):
    """PP_tests_dict (vague): a dict for tests was read as the list of its keys ("keys: 'h', 'o',
    ..."); PP_tests_empty (silent): tests=[] was read as the default one test; PP_variant_list
    (vague): a raw TypeError."""
    from vpn_plugin.protocol.runner import load_protocol
    path = tmp_path / 'pp.py'
    path.write_text(PROTOCOL.format(extra=extra))
    with pytest.raises(ValueError) as refused:
        load_protocol(str(path))
    assert named in str(refused.value) and str(path) in str(refused.value)


def test_protocol_runs_written_as_the_format_says_still_load(tmp_path):
    """No false refusal: tests, variant and cfg_options as the format gives them (and every
    repository protocol: checked by hand, 42 configs)."""
    from vpn_plugin.protocol.runner import load_protocol
    path = tmp_path / 'pp.py'
    path.write_text(PROTOCOL.format(extra=", variant=dict(a=1), cfg_options={}, tests=[dict(), "
                                          "dict(horizon=4, variant=dict(b=2), cfg_options={})]"))
    assert len(load_protocol(str(path)).runs[0]['tests']) == 2


# ---------------------------------------------------------- P08: a plain name in overlap --pair
def test_overlap_names_the_methods_when_a_pair_names_none_of_them():
    """P08 (vague): '--pair VPN ...' where the rows at T=3 are 'VPN (train T=4)' said "no
    results row of 'VPN' at T=3 has a per_sample_file" (they have one): now the methods there."""
    from vpn_plugin.protocol import plots
    from vpn_plugin.protocol.results import read_results
    with pytest.raises(ValueError) as refused:
        plots.error_overlap(read_results([T3]), 'VPN', 'Base Model', horizon=3)
    assert "'VPN' is not among the valid names" in str(refused.value)
    assert 'ViterbiPlanNet' in str(refused.value)


# ------------------------------------------------ P02: the log of a protocol's declared test
class _Log:
    def __init__(self):
        self.lines = []

    def warning(self, text):
        self.lines.append(('warning', text))

    def info(self, text):
        self.lines.append(('info', text))


def _overrides(monkeypatch, declared):
    import types
    from vpn_plugin.engine import checkpoint
    from vpn_plugin.runner import PlanningRunner
    named = ["model.cross_horizon: None in training, 'repeat_last' here",
             'test_dataloader.dataset.horizon: 4 in training, 3 here',
             "model.decode: 'viterbi' in training, 'emission_argmax' here"]
    monkeypatch.setattr(checkpoint, 'check_test_options', lambda *args, **kwargs: list(named))
    runner = types.SimpleNamespace(cfg={}, logger=_Log())
    if declared is not None:
        runner.declared_test_options = declared
    PlanningRunner.log_model_overrides(runner, {'meta': {}}, 'best.pth')
    assert runner.changed_from_training == named  # all recorded; test_caveats drops declared
    return [text for kind, text in runner.logger.lines if kind == 'warning']


def test_a_protocol_tests_own_options_are_not_logged_as_caveats(monkeypatch):
    """P02 (wrong, a false log record): a cross-horizon test of a protocol logged "... and its
    metrics say so (changed_from_training)" for the options the protocol itself sets, which
    its row rightly records as no caveat."""
    warnings = _overrides(monkeypatch, {'model.cross_horizon': 'repeat_last',
                                        'test_dataloader.dataset.horizon': 3})
    assert len(warnings) == 1 and 'model.decode' in warnings[0]
    assert 'cross_horizon' not in warnings[0] and 'dataset.horizon' not in warnings[0]


def test_a_plain_test_still_warns_about_every_changed_option(monkeypatch):
    """No lost warning: tools/test.py (no declared options) names all three."""
    warnings = _overrides(monkeypatch, None)
    assert len(warnings) == 1 and all(word in warnings[0] for word in
                                      ('cross_horizon', 'dataset.horizon', 'model.decode'))

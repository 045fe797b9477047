"""Session 12, hostile pass (passP): names in Markdown / LaTeX tables and figures, output stems,
bootstrap scores, a foreign config's literal reading, protocol test horizons, --status from
another folder. Each test fails on 22f9984 (the known items are marked so)."""
import json
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from test_hostile_pass15_fixrows import rows_of, tool_refusal
from tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[1]
T3 = ROOT / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'


def renamed(tmp_path, names: dict, source: Path = T3) -> Path:
    """A copy of a kept results file with methods renamed (``names``: old -> new)."""
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    for row in rows:
        row['per_sample_file'] = ''
        row['method'] = names.get(row['method'], row['method'])
    path = tmp_path / 'renamed.jsonl'
    path.write_text(''.join(json.dumps(row, ensure_ascii=False) + '\n' for row in rows))
    return path


def tables(path: Path, title: str = ''):
    from vpn_plugin.protocol.report import build_table, to_latex, to_markdown
    from vpn_plugin.protocol.results import read_results
    table = build_table(read_results([path]), ['success_rate'])
    return to_markdown(table, title=title), to_latex(table, title=title)


def row_line(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.lstrip('| ').startswith(start))


# ------------------------------------------------------------ R01, L04: `$` in Markdown (GitHub math)
def test_a_dollar_in_a_name_is_no_math_in_markdown(tmp_path):
    """R01, L04 (wrong): '$x$' was written raw; GitHub renders it as math (an italic x)."""
    markdown, _ = tables(renamed(tmp_path, {'ViterbiPlanNet': 'VPN $k$-best',
                                            'Base Model': 'Base $$x$$'}))
    assert r'VPN \$k\$-best' in row_line(markdown, 'VPN')
    assert r'Base \$\$x\$\$' in row_line(markdown, 'Base')


# ------------------------------------------------ L01, L03, H02, R50: names and titles in LaTeX
def test_tex_ligatures_and_line_breaks_in_names_print_the_name(tmp_path):
    """L01 (wrong): '--' printed an en dash, '?`' / '!`' printed ¿ / ¡. L03, H02 (wrong): a
    blank line in a name or title is \\par, which a tabular cell and \\caption refuse."""
    path = renamed(tmp_path, {'ViterbiPlanNet': 'VPN --no-pkg', 'Base Model': "?`x !`y ``q''",
                              'PKG + uniform emissions': 'two\n\nlines'})
    _, latex = tables(path, title='My\n\ntitle')
    assert row_line(latex, 'VPN').startswith('VPN -{}-no-pkg')
    # '' too (pass 18 NL_q2); a backquote is \textasciigrave (pass 19 H07b: ` printed ‘)
    assert row_line(latex, '?').startswith(r"?\textasciigrave{}x !\textasciigrave{}y "
                                           r"\textasciigrave{}\textasciigrave{}q'{}'")
    assert row_line(latex, 'two').startswith('two lines')
    caption = row_line(latex, r'\caption')
    assert caption.startswith(r'\caption{My title. ')
    assert '\n\n' not in latex


def test_the_damaged_features_mark_is_a_latex_symbol(tmp_path):
    """R50 (wrong): '☒' was written raw (pdfLaTeX stops at it); every other mark is mapped."""
    def damaged(row):
        if row['seed'] == 0:
            row['caveats'] = {'damaged_features': 'a.npz: 3 frames lost'}
    _, latex = tables(rows_of(tmp_path, 'd.jsonl', damaged))
    assert '☒' not in latex
    assert r'ViterbiPlanNet\textsuperscript{\dag}\textsuperscript{\textbardbl}' \
        r'\textsuperscript{$\otimes$}' in latex


def test_a_latex_table_with_unicode_says_which_engine_and_plain_tables_stay_as_they_were(
        tmp_path):
    """Known item (closing11): 'β' in a LaTeX name needs a Unicode engine: the file says so.
    No false note: an ASCII table has no such line and no '{}' where nothing ligates."""
    _, latex = tables(renamed(tmp_path, {'ViterbiPlanNet': 'β-VAE ≥ 2'}))
    assert latex.splitlines()[1].startswith(
        "% holds characters pdfLaTeX does not set with LaTeX's default fonts (β ≥)")
    _, plain = tables(T3)
    assert 'pdfLaTeX does not set' not in plain and '-{}' not in plain and '{}`' not in plain


def test_report_out_replaces_its_own_earlier_latex_with_the_note(tmp_path):
    """No false refusal: the note line does not hide the marker (the .tex is recognised)."""
    path = renamed(tmp_path, {'ViterbiPlanNet': 'β'})
    out = str(tmp_path / 'table')
    for _ in range(2):
        load_tool('report').main([str(path), '--out', out])
    assert (tmp_path / 'table.tex').read_text().splitlines()[1].startswith('% holds characters')


# ------------------------------------------------------------------- H01, F04: a stem with a dot
def test_a_stem_keeps_a_dot_that_is_no_output_suffix(tmp_path):
    """H01, F04 (silent): --out table.v2 wrote table.md, replacing the table of --out table."""
    from vpn_plugin.outputs import stem_files
    assert stem_files('docs/table.v2', ('.md', '.tex')) == [Path('docs/table.v2.md'),
                                                             Path('docs/table.v2.tex')]
    assert stem_files('docs/table.md', ('.md', '.tex')) == [Path('docs/table.md'),
                                                             Path('docs/table.tex')]
    assert stem_files('fig.PNG', ('.png', '.pdf')) == [Path('fig.png'), Path('fig.pdf')]
    assert stem_files('fig.png', ('.md',)) == [Path('fig.md')]
    report = load_tool('report')
    report.main([str(T3), '--out', str(tmp_path / 'table')])
    first = (tmp_path / 'table.md').read_text()
    report.main([str(rows_of(tmp_path, 'other.jsonl', lambda row: None)),
                 '--out', str(tmp_path / 'table.v2')])
    assert (tmp_path / 'table.md').read_text() == first
    assert (tmp_path / 'table.v2.md').is_file() and (tmp_path / 'table.v2.tex').is_file()


# ------------------------------------------------------------- F02, F03: figures of odd names
def drawn_params_figure(tmp_path, monkeypatch, path: Path):
    from vpn_plugin.protocol import plots
    from vpn_plugin.protocol.results import read_results
    kept = {}
    monkeypatch.setattr(plots, 'save_figure', lambda fig, stem: (plots.plain_texts(fig),
                                                                 kept.setdefault('fig', fig)))
    plots.plot_params_vs_metric(read_results([path]), 'success_rate', tmp_path / 'f')
    return kept['fig']


def test_figure_texts_are_drawn_as_written_and_dodged_markers_inside_the_axis(
        tmp_path, monkeypatch):
    """F02 (wrong): matplotlib read '$x$' of a method name as math. F03 (silent): the last of
    the markers spread side by side lay beyond the log axis' end, half cut."""
    fig = drawn_params_figure(tmp_path, monkeypatch, renamed(
        tmp_path, {'PKG + uniform emissions': 'pipe $x$'}))
    legend = [t for t in fig.legends[0].get_texts() if t.get_text().startswith('pipe')]
    assert legend and not legend[0].get_parse_math()
    ax = fig.axes[-1]
    low, high = ax.get_xlim()
    xs = [line.get_xdata()[0] for line in ax.lines if len(line.get_xdata()) == 1
          and line.get_transform() is not ax.transAxes and line.get_marker() not in ('', None)
          and not isinstance(line.get_marker(), list)]
    assert len(xs) >= 9 and all(low < x < high for x in xs), (low, high, sorted(xs))
    # tick labels keep their own formatting
    assert all(t.get_parse_math() for t in ax.get_xticklabels())


# ------------------------------------------------------------------ S13: Fraction scores
def test_fraction_scores_are_real_numbers():
    """S13 (wrong, false refusal): Fractions passed the entry check (numbers.Real) and were
    refused by the dtype check saying 'expected real numbers'."""
    from vpn_plugin.core.stats import bootstrap_ci, bootstrap_difference
    fractions = [Fraction(1, 3), Fraction(1, 2), Fraction(2, 3)]
    assert bootstrap_ci(fractions) == bootstrap_ci([1 / 3, 1 / 2, 2 / 3])
    assert bootstrap_difference(fractions, [0.1, 0.2, 0.3]) == \
        bootstrap_difference([1 / 3, 1 / 2, 2 / 3], [0.1, 0.2, 0.3])
    for bad in ([True, 1, 2], ['1', 2, 3], [None, 1, 2]):
        with pytest.raises(TypeError, match=r'scores\[0\]'):
            bootstrap_ci(bad)


# --------------------------------------------- C_uadd, C_exec, C_globals, C_vars: literal reading
def foreign(tmp_path, name: str, text: str) -> Path:
    (tmp_path / 'base.py').write_text('horizon = 3\n')
    path = tmp_path / f'{name}.py'
    path.write_text("_base_ = ['base.py']\n" + text)
    return path


def test_a_unary_plus_is_a_literal(tmp_path):
    """C_uadd (wrong, false refusal): `horizon = +6` (mmengine 6) was 'not a literal'."""
    from mmengine.config import Config
    from vpn_plugin.data_paths import literal_config
    for text, value in (('horizon = +6\n', 6), ('horizon = -(-6)\n', 6), ('horizon = +2.5\n', 2.5)):
        path = foreign(tmp_path, 'plus', text)
        assert literal_config(path)['horizon'] == value == Config.fromfile(path).horizon


@pytest.mark.parametrize('text', ['horizon = 6\nexec("horizon = 3")\n',
                                  'horizon = 6\nglobals()["horizon"] = 3\n',
                                  'horizon = 6\nvars().update(horizon=3)\n',
                                  'horizon = 6\ndef f():\n    globals()["horizon"] = 3\nf()\n'])
def test_a_config_that_sets_names_out_of_sight_is_refused(tmp_path, text):
    """C_exec, C_globals, C_vars (silent): mmengine builds horizon 3, the literal reading said
    6, and rows of T=6 were shown under a config that builds T=3."""
    from mmengine.config import Config
    from vpn_plugin.data_paths import literal_config
    path = foreign(tmp_path, 'code', text)
    assert Config.fromfile(path).horizon == 3
    with pytest.raises(ValueError, match=r'code\.py:\d: .*in this subset'):  # since passC s14
        literal_config(path)


def test_names_like_the_builtins_and_every_repository_config_still_read(tmp_path):
    """No false refusal: a name that merely contains one ('executor', 'my_vars') is read."""
    from vpn_plugin.data_paths import literal_config
    path = foreign(tmp_path, 'names', "executor = 'x'\nmy_vars = dict(a=1)\nhorizon = 6\n")
    assert literal_config(path)['horizon'] == 6
    # mmengine's own keys named as builtins: `compile = True` (Runner's torch.compile switch)
    path = foreign(tmp_path, 'own', "compile = True\nvars = dict(a=1)\nhorizon = 6\n"
                                    "flag = compile\nmodel = dict(compile=compile)\n")
    assert literal_config(path)['horizon'] == 6 and literal_config(path)['flag'] is True
    for config in ('configs/vpn_niv_t6.py', 'configs/protocol/standard_niv.py'):
        literal_config(ROOT / config)


# ------------------------------------------------------------- P06: a protocol test's horizon
def test_a_protocol_tests_horizon_is_checked_in_the_protocol(tmp_path):
    """P06 (vague): tests=[dict(horizon=4.0)] was refused naming the config's test_horizon."""
    from vpn_plugin.protocol.runner import load_protocol
    path = tmp_path / 'p.py'
    path.write_text("protocol = 'p'\ndataset = 'niv'\nruns = [dict(method='U', config="
                    "'configs/baselines/uniform_emissions_{dataset}_t3.py', train=False, "
                    "tests=[dict(), dict(horizon=4.0)])]\n")
    with pytest.raises(ValueError, match=r'p\.py: runs\[0\]\.tests\[1\]\.horizon=4\.0; '
                                         'expected an integer >= 1'):
        load_protocol(str(path))


# ------------------------------------------------------------ O34: --ours outside --methods
def test_ours_left_out_by_methods_is_named_as_left_out():
    """O34 (vague): 'Base Model' was 'not in the results' when --methods left it out."""
    message = tool_refusal('report', [str(T3), '--methods', 'ViterbiPlanNet',
                                      '--ours', 'Base Model'])
    assert "method 'Base Model' is not among the rows the table is made of" in message
    assert '--methods' in message


# ------------------------------------------------- known item: --status from another folder
def test_status_works_from_another_folder(tmp_path, monkeypatch, capsys):
    """Known item (closing11): run_protocol --status refused outside the repository (its
    protocol's configs are relative: configs/...)."""
    protocol = tmp_path / 'p.py'
    protocol.write_text("protocol = 'p'\ndataset = 'niv'\nseeds = [0, 1]\nruns = [dict("
                        "method='U', config='configs/baselines/uniform_emissions_{dataset}_t3.py',"
                        " train=False)]\n")
    monkeypatch.chdir(tmp_path)
    load_tool('run_protocol').main(['p.py', '--out', 'runs', '--smoke', '--status'])
    out = capsys.readouterr().out
    assert '2 units: 0 done, 2 not started' in out, out
    assert os.getcwd() == str(tmp_path)


# --------------------------------------- known item: a row's config with a nested horizon
def test_a_rows_config_whose_dataset_horizon_contradicts_its_own_is_refused(tmp_path):
    """Known item (closing11): the row checks compared only the top-level horizon: a config
    whose test dataset says horizon=4 under test_horizon 6 (its run would be refused) passed.
    No false refusal: a base's stale copy (vpn_niv_t6's datasets under horizon 6) passes."""
    base = f"_base_ = ['{ROOT / 'configs' / 'vpn_niv_t6.py'}']\n"
    nested = tmp_path / 'nested.py'
    nested.write_text(base + 'test_dataloader = dict(dataset=dict(horizon=4))\n')
    plain = tmp_path / 'plain.py'
    plain.write_text(base + 'horizon = 6\n')

    def config(path):
        def edit(row):
            if row['config'] == 'configs/vpn_niv_t6.py':
                row['config'] = str(path)
        return edit
    message = tool_refusal('report', [str(rows_of(tmp_path, 'n.jsonl', config(nested)))])
    assert 'test_dataloader.dataset.horizon=4 contradicts test_horizon=6' in message
    load_tool('report').main([str(rows_of(tmp_path, 'p.jsonl', config(plain)))])


def test_a_curve_marker_at_zero_is_drawn_whole(tmp_path, monkeypatch):
    """F06 (silent): the curve figure's y axis started at 0, so the markers of a method at
    SR 0 (Base Model at 5-25 % of the training windows) were cut in half."""
    from vpn_plugin.protocol import plots
    from vpn_plugin.protocol.results import read_results
    kept = {}
    monkeypatch.setattr(plots, 'save_figure', lambda fig, stem: kept.setdefault('fig', fig))
    rows = read_results([ROOT / 'docs' / 'results_data' / 'sample_efficiency_niv.jsonl'])
    plots.plot_curves(rows, 'train_fraction', 'success_rate', tmp_path / 'c', log_x=True)
    ax = kept['fig'].axes[0]
    assert ax.get_ylim()[0] < 0 and min(ax.get_yticks()) >= 0


def test_a_builtin_reached_as_an_attribute_is_refused_too(tmp_path):
    """As C_exec: `__import__('builtins').exec(...)` sets horizon 3 as well."""
    from mmengine.config import Config
    from vpn_plugin.data_paths import literal_config
    path = foreign(tmp_path, 'attr', "horizon = 6\n__import__('builtins').exec('horizon = 3')\n")
    assert Config.fromfile(path).horizon == 3
    with pytest.raises(ValueError, match=r'attr\.py:3: a statement outside the subset'):
        literal_config(path)

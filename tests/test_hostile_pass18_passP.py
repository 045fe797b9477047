"""Session 13, hostile pass (passP): JSON lines holding raw line separators, CSV metric cells in
other digits, control characters in method names, Markdown of names (report and overlap tables),
TeX quotes, '_' names in figure legends, figure styles past seven methods, an interrupted unit's
time, protocol field types, code that sets a foreign config's names. Each test fails on e251d41."""
import json
import time
from pathlib import Path

import pytest

from test_hostile_pass17_passP import T3, drawn_params_figure, foreign, renamed, row_line, tables
from tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[1]
EFFICIENCY = ROOT / 'docs' / 'results_data' / 'sample_efficiency_niv.jsonl'


def success_rates(path: Path) -> dict:
    from vpn_plugin.protocol.results import read_results
    return {(r.method, r.seed): r.metrics['success_rate'] for r in read_results([path])}


# ------------------------------------------- N_ls, N_nel, N_ps, N_ls_sel, K_ls: JSON line splits
@pytest.mark.parametrize('separator', ['\u2028', '\u2029', '\x85'])
def test_raw_unicode_line_separators_inside_json_strings_read(tmp_path, separator):
    """N_ls & co. (wrong, false refusal): JSON allows U+2028/U+2029/U+0085 raw inside a string
    (json.dumps(ensure_ascii=False) writes them so); str.splitlines cut the row there."""
    plain = success_rates(T3)
    name = 'ViterbiPlanNet' if separator == '\x85' else f'Viterbi{separator}PlanNet'  # NEL: Cc
    path = renamed(tmp_path, {'ViterbiPlanNet': name})
    text = path.read_text().replace('"selection": "', f'"selection": "x{separator}')
    assert separator in text
    path.write_text(text)
    got = success_rates(path)
    assert {(m.replace(separator, ''), s): v for (m, s), v in got.items()} == plain
    out = tmp_path / 'kept.jsonl'
    load_tool('keep_results').main([str(path), '--out', str(out)])
    assert success_rates(out) == got


# ------------------------------------------------------- Q_fw, Q_arabic: CSV metric cell digits
def test_a_csv_metric_in_other_digits_is_refused_and_plain_forms_read(tmp_path):
    """Q_fw, Q_arabic (silent): '３.125' and '٨' were read as 3.125 and 8 by float()."""
    from vpn_plugin.protocol.results import read_results, write_results_csv
    rows = [r for r in read_results([T3]) if r.metrics['success_rate'] > 10][:3]
    csv_path = tmp_path / 'r.csv'
    write_results_csv(csv_path, rows)
    text = csv_path.read_text()
    value = repr(rows[0].metrics['success_rate'])
    assert value in text
    digit = value[0]
    for bad in (value.replace(digit, chr(ord(digit) + 0xFEE0), 1),      # fullwidth
                value.replace(digit, chr(ord(digit) - 48 + 0x660), 1)):  # Arabic-Indic
        csv_path.write_text(text.replace(value, bad, 1))
        with pytest.raises(ValueError, match=r'r\.csv:2: field metrics\.success_rate='):
            read_results([csv_path])
    for good in (value + '000', ' ' + value):  # no false refusal: the same number
        csv_path.write_text(text.replace(value, good, 1))
        assert read_results([csv_path])[0].metrics == rows[0].metrics


# --------------------------------------------------- N_nul, NL_nul, N_bell, NL_bell: names
@pytest.mark.parametrize('control', ['\x00', '\x07', '\x1b'])
def test_a_control_character_in_a_method_name_is_refused(tmp_path, control):
    """N_nul/N_bell (wrong, silent): a NUL showed as U+FFFD in Markdown, a BEL as nothing, and
    both stopped pdfLaTeX ('invalid character'): the report's .tex did not compile."""
    from vpn_plugin.protocol.results import read_results
    path = renamed(tmp_path, {'ViterbiPlanNet': f'VPN{control}x'})
    with pytest.raises(ValueError, match=r'renamed\.jsonl:\d+: field method=.*control '
                                         'character'):
        read_results([path])
    # tabs and line breaks stay names (the renderers turn them into spaces / <br>)
    for name in ('VPN\tx', 'VPN\nx', 'VPN\rx'):
        assert (name, 0) in success_rates(renamed(tmp_path, {'ViterbiPlanNet': name}))


# ------------------------------------------------------------ N_cr, N_crlf, N_ent, T01: Markdown
def test_markdown_rows_keep_their_columns_and_names_their_text(tmp_path):
    """N_cr/N_crlf (wrong): a CR in a name was written raw and split the table row (CommonMark
    ends a line at CR). N_ent (wrong): '&amp;' rendered as '&'. T01 (wrong): a title with a
    trailing space gave '**Results **', which is no bold (literal asterisks)."""
    markdown, _ = tables(renamed(tmp_path, {'ViterbiPlanNet': 'Viterbi\r\nPlan\rNet',
                                            'Base Model': 'R&amp;D &lt;b&gt;'}),
                         title=' Results ')
    table = markdown.split('\n\n')[1]  # the caption below may hold the name's line breaks
    assert '\r' not in table and len(table.split('\n')) == 13, table
    assert row_line(markdown, 'Viterbi').startswith('| Viterbi<br>Plan<br>Net')
    assert row_line(markdown, 'R').startswith(r'| R\&amp;D \&lt;b\&gt;')
    assert markdown.startswith('**Results**\n')


# ------------------------------------------------------------------ O2: overlap table names
def test_the_overlap_table_escapes_names_as_the_report_does():
    """O2 (wrong): a name with '|' split the Method cell of plots overlap's Markdown table (every
    later column shifted), '*c*' was italic, '&amp;' an entity, '$x$' math."""
    from vpn_plugin.protocol.plots import Overlap, overlap3_table, overlap_table
    overlap = Overlap('_A|b *c* &amp; $x$', 'Ref', 3, 1, 0, 2, [0, 1, 2], (50.0, None, None),
                      (0.0, None, None))
    line = overlap_table([overlap]).splitlines()[2]
    assert line.startswith(r'| \_A\|b \*c\* \&amp; \$x\$ | Ref | 3 | 6 | 3 | 1 | 0 | 2 |')
    assert line.replace(r'\|', '').count('|') == 11


# ----------------------------------------------------------------- NL_q2, NL_dquote: TeX quotes
def test_tex_quotes_in_names_print_the_name(tmp_path):
    """NL_q2 (wrong): "''" printed a closing double quote (a TeX ligature). NL_dquote (wrong):
    OT1 prints '"' as a closing curly quote; the typewriter font has the straight one."""
    _, latex = tables(renamed(tmp_path, {'ViterbiPlanNet': "Base''", 'Base Model': 'a "b" c'}))
    assert row_line(latex, 'Base').startswith("Base'{}'")
    assert row_line(latex, 'a ').startswith(r'a \texttt{"}b\texttt{"} c')


# ------------------------------------------------------------------- F01, F02: '_' in legends
def test_names_starting_with_an_underscore_are_in_every_legend(tmp_path, monkeypatch):
    """F01 (wrong, false refusal): plots params refused '_VPN' with a bare KeyError. F02
    (silent): plots curve drew its line without a legend entry (matplotlib skips labels that
    start with '_' in get_legend_handles_labels)."""
    from vpn_plugin.protocol import plots
    from vpn_plugin.protocol.results import read_results
    fig = drawn_params_figure(tmp_path, monkeypatch, renamed(tmp_path, {'ViterbiPlanNet': '_VPN'}))
    assert any(t.get_text().startswith('_VPN') for t in fig.legends[0].get_texts())
    kept = {}
    monkeypatch.setattr(plots, 'save_figure', lambda fig, stem: kept.setdefault('fig', fig))
    rows = read_results([renamed(tmp_path, {'ViterbiPlanNet': '_VPN'}, EFFICIENCY)])
    plots.plot_curves(rows, 'train_fraction', 'success_rate', tmp_path / 'c')
    texts = [t.get_text() for t in kept['fig'].legends[0].get_texts()]
    assert len(texts) == 4 and any(t.startswith('_VPN') for t in texts), texts


# ------------------------------------------------------------------------ F05: figure styles
def test_every_method_of_a_figure_has_its_own_colour_and_marker():
    """F05 (wrong): with 20 methods 'VPN variant 04' and '16' were drawn alike (colours repeat
    past seven; the markers were not moved)."""
    from vpn_plugin.protocol.plots import figure_styles, method_styles
    many = [f'VPN variant {i:02d} with a rather long descriptive name' for i in range(20)]
    styles = figure_styles(many)
    assert len({(s['color'], s['marker']) for s in styles.values()}) == 20
    few = ['ViterbiPlanNet', 'SCHEMA', 'PDPP', 'KEPP', 'Base Model']  # unchanged below eight
    assert {m: s['marker'] for m, s in figure_styles(few).items()} == \
        {m: s['marker'] for m, s in method_styles(few).items()}


# ------------------------------------------------------------- P12: a killed unit's time
def test_an_interrupted_unit_shows_no_growing_time(tmp_path, capsys):
    """P12 (wrong): a killed unit's time was now - start (42 s, then hours: it grows with
    every --status); when it died is not recorded: '-'."""
    protocol = tmp_path / 'p.py'
    protocol.write_text("protocol = 'p'\ndataset = 'niv'\nseeds = [0]\nruns = [dict(method='U', "
                        "config='configs/baselines/uniform_emissions_{dataset}_t3.py', "
                        'train=False)]\n')
    work = tmp_path / 'runs' / 'p' / 'U' / 'T3' / 'seed0_smoke'
    work.mkdir(parents=True)
    (work / 'unit_state.json').write_text(json.dumps(dict(
        attempts=1, host='elsewhere', pid=1, started=time.time() - 7200, state='running')))
    load_tool('run_protocol').main([str(protocol), '--out', str(tmp_path / 'runs'), '--smoke',
                                    '--status'])
    line = row_line(capsys.readouterr().out, 'U T=3 seed=0')
    assert '| interrupted | - | - |' in line and ' h ' not in line, line


# -------------------------------------------------------------------- D3, D8: protocol types
@pytest.mark.parametrize('field, value, message', [
    ('train', "'no'", r"runs\[0\]\.train = 'no'; expected True or False"),
    ('dataset', "['niv']", r"dataset = \['niv'\]; expected a non-empty name")])
def test_protocol_train_and_dataset_are_checked(tmp_path, field, value, message):
    """D8 (silent): train='no' was true: the protocol trained. D3 (vague): dataset=['niv'] ended
    in a raw TypeError of str.replace."""
    from vpn_plugin.protocol.runner import expand_units, load_protocol
    fields = dict(train='False', dataset="'niv'")
    fields[field] = value
    path = tmp_path / 'p.py'
    path.write_text(f"protocol = 'p'\ndataset = {fields['dataset']}\nruns = [dict(method='U', "
                    "config='configs/baselines/uniform_emissions_niv_t3.py', "
                    f"train={fields['train']})]\n")
    with pytest.raises(ValueError, match=message):
        expand_units(load_protocol(str(path)))


# ------------------------------- C_global, C_decor, C_cls, C_fglobals, C_getattr, C_bsub: code
@pytest.mark.parametrize('text', [
    'horizon = 6\ndef f():\n    global horizon\n    horizon = 3\nf()\n',
    'horizon = 6\ndef deco(f):\n    global horizon\n    horizon = 3\n    return f\n'
    '@deco\ndef g():\n    pass\n',
    'horizon = 6\nclass C:\n    global horizon\n    horizon = 3\n',
    'horizon = 6\ndef f():\n    pass\nf.__globals__["horizon"] = 3\n',
    'horizon = 6\nimport builtins\ngetattr(builtins, "ex" + "ec")("horizon = 3")\n',
    'horizon = 6\n(__builtins__["exec"] if isinstance(__builtins__, dict) else '
    'getattr(__builtins__, "exec"))("horizon = 3")\n'])
def test_code_that_reaches_a_configs_names_is_refused(tmp_path, text):
    """C_* (silent): mmengine builds horizon 3, the literal reading said 6 (a `global` store in
    a function, decorator or class body: unread since main's passL fix; `__globals__`; exec
    through getattr/__builtins__: refused)."""
    from mmengine.config import Config
    from vpn_plugin.data_paths import literal_config
    path = foreign(tmp_path, 'code', text)
    assert Config.fromfile(path).horizon == 3
    with pytest.raises(ValueError, match=r'code\.py:\d+: .*in this subset'):  # since passC s14
        literal_config(path)


def test_plain_configs_still_read_after_the_code_rule(tmp_path):
    """No false refusal: annotated, augmented, unpacked assignments and an import beside them
    read as mmengine builds them; the repository's configs read."""
    from mmengine.config import Config
    from vpn_plugin.data_paths import literal_config
    for text in ('horizon: int = 6\n', 'horizon = 3\nhorizon *= 2\n', 'horizon, = [6]\n',
                 'horizon = 13 // 2\n'):
        path = foreign(tmp_path, 'plain', text)
        assert literal_config(path)['horizon'] == 6 == Config.fromfile(path).horizon
    for config in sorted((ROOT / 'configs').glob('*.py')):
        literal_config(config)

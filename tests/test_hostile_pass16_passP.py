"""Session 11, hostile pass (passP): a row's config read as literals, CSV results, one run
setting per cell, names in Markdown / LaTeX tables, duplicate rows. Each test fails on 72181f1."""
import json
from pathlib import Path

import pytest
from mmengine.config import Config

from test_hostile_pass15_fixrows import T6, rows_of, tool_refusal
from tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[1]

# a config's own assignment of `horizon` over a base's `horizon = 3` (mmengine reads 6)
SIX_OVER_THREE = {'annotated': 'horizon: int = 6\n',
                  'augmented': 'horizon = 3\nhorizon += 3\n',
                  'chained': 'horizon = test_horizon = 6\n',
                  'tuple': 'horizon, other = 6, 0\n',
                  'plain': 'horizon = 6\n'}
# assignments mmengine runs and a literal reading cannot follow (mmengine reads 6, then 3)
RUN_ONLY = {'if': 'horizon = 3\nif True:\n    horizon = 6\n',
            'for': 'horizon = 6\nfor _ in range(1):\n    horizon = 3\n',
            'update': 'cfg = dict(h=6)\ncfg.update(h=3)\nhorizon = 6\n'}


def foreign_config(tmp_path, name: str, text: str) -> Path:
    (tmp_path / 'base.py').write_text('horizon = 3\n')
    path = tmp_path / f'{name}.py'
    path.write_text("_base_ = ['base.py']\n" + text)
    return path


@pytest.mark.parametrize('name', sorted(SIX_OVER_THREE))
def test_a_foreign_configs_assignments_are_read_as_mmengine_reads_them(tmp_path, name):
    """L_ann, L_aug, L_chain, L_tuple (wrong, false refusals): the literal reading of a config
    outside configs/ read only `x = value` with one name: `horizon: int = 6`, `horizon += 3`,
    `horizon = test_horizon = 6`, `horizon, other = 6, 0` were skipped and the base's
    horizon = 3 reported, so valid rows were refused as "a row of another run or an edited
    one"."""
    from vpn_plugin.data_paths import literal_config
    from vpn_plugin.protocol.results import check_rows_match_configs, row_from_dict
    path = foreign_config(tmp_path, name, SIX_OVER_THREE[name])
    assert Config.fromfile(str(path)).horizon == 6
    assert literal_config(path)['horizon'] == 6
    check_rows_match_configs([row_from_dict({'method': 'VPN', 'seed': 0, 'horizon': 6,
                                             'config': str(path),
                                             'metrics': {'success_rate': 1.0}})])


@pytest.mark.parametrize('name', sorted(RUN_ONLY))
def test_a_value_set_by_code_the_literal_reading_cannot_follow_is_not_read(tmp_path, name):
    """L_for (silent), L_if (false refusal): an assignment inside `for`/`if` (or an object
    changed by a method call) was ignored: a row was compared with a value the config does not
    end with. Such names are now not literals: the row is refused saying so, not as edited."""
    from vpn_plugin.data_paths import literal_config
    from vpn_plugin.protocol.results import check_rows_match_configs, row_from_dict
    path = foreign_config(tmp_path, name, RUN_ONLY[name])
    with pytest.raises(ValueError, match=rf'{name}\.py:\d+: .*in this subset'):  # since passC s14
        literal_config(path)
    with pytest.raises(ValueError, match=rf'{name}\.py:\d+: .*in this subset'):
        check_rows_match_configs([row_from_dict({'method': 'VPN', 'seed': 0, 'horizon': 6,
                                                 'config': str(path),
                                                 'metrics': {'success_rate': 1.0}})])


def csv_copy(tmp_path, name='rows.csv') -> Path:
    from vpn_plugin.protocol.results import read_results, write_results_csv
    path = tmp_path / name
    rows = read_results(rows_of(tmp_path, 'rows.jsonl', lambda row: None))
    write_results_csv(path, rows)
    return path


def test_a_csv_results_file_with_a_byte_order_mark_is_read(tmp_path):
    """C04 (false refusal): Excel's "CSV UTF-8" starts with a BOM: the first column was read
    as '\\ufeffmethod' and every row refused as lacking 'method'."""
    from vpn_plugin.protocol.results import read_results
    plain = csv_copy(tmp_path)
    bom = tmp_path / 'bom.csv'
    bom.write_bytes(b'\xef\xbb\xbf' + plain.read_bytes())
    assert read_results(bom) == read_results(plain)


@pytest.mark.parametrize('damage, expected', [
    ('delimiter', 'rows.csv:2: 28 cells, but the header (line 1) has 1 columns'),
    ('column twice', "rows.csv:1: the CSV header names the column(s) ['metric/success_rate'] "
                     'twice'),
    ('underscore', "field metrics.success_rate='1_7.5'")])
def test_a_malformed_csv_is_refused_naming_its_line(tmp_path, damage, expected):
    """C05 (vague: raw AttributeError on a ';'-separated file), C15 (vague: a column named
    twice, the last silently kept), C07 (silent: '1_7.5' read as 17.5 by float())."""
    import csv
    from vpn_plugin.protocol.results import read_results
    path = csv_copy(tmp_path)
    records = list(csv.DictReader(path.open(newline='')))
    header = list(records[0])
    if damage == 'underscore':
        records[0]['metric/success_rate'] = '1_7.5'
    with path.open('w', newline='') as handle:
        writer = csv.writer(handle, delimiter=';' if damage == 'delimiter' else ',')
        writer.writerow(header + (['metric/success_rate'] if damage == 'column twice' else []))
        for record in records:
            writer.writerow([record[name] for name in header]
                            + (['99.0'] if damage == 'column twice' else []))
    with pytest.raises(ValueError) as refused:
        read_results(path)
    assert expected in ' '.join(str(refused.value).split())


def test_a_null_training_horizon_is_the_rows_own_horizon_in_a_cell(tmp_path):
    """C14 (false refusal): one row with train_horizon null (= trained at its own T=6) beside
    rows with train_horizon 6 was refused as "differ in train_horizon"."""
    from vpn_plugin.protocol.report import build_table
    from vpn_plugin.protocol.results import read_results
    rows = read_results(T6)
    vpn = [row for row in rows if row.method == 'ViterbiPlanNet']
    vpn[0].train_horizon = None
    table = build_table(rows, ['success_rate'])
    cell = table.cells[('ViterbiPlanNet', ('niv', 6, 'success_rate'))]
    assert cell.mean == pytest.approx(sum(r.metrics['success_rate'] for r in vpn) / len(vpn))


NAMES = {'ViterbiPlanNet': '*VPN*', 'Base Model': '_base_', 'SCHEMA w/ PKG': 'V|P <b>'}


def renamed_rows(tmp_path):
    from vpn_plugin.protocol.results import read_results
    rows = [json.loads(line) for line in T6.read_text().splitlines()]
    for row in rows:
        row['method'] = NAMES.get(row['method'], row['method'])
        row['per_sample_file'] = ''
    path = tmp_path / 'names.jsonl'
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return read_results(path)


def test_a_markdown_table_shows_a_methods_name_not_markup(tmp_path):
    """D09 (wrong): '*VPN*' rendered as an italic "VPN", '_base_' as an italic "base" and
    '<b>' as HTML, in the rows and the caption."""
    from vpn_plugin.protocol.report import build_table, to_markdown
    text = to_markdown(build_table(renamed_rows(tmp_path), ['success_rate']))
    assert '| \\*VPN\\*' in text and '| \\_base\\_' in text and 'V\\|P \\<b\\>' in text
    caption = text.split('\n\n')[1]
    assert '*VPN*' not in caption.replace('\\*', '') and '\\*VPN\\*' in caption


def test_a_latex_table_prints_bars_and_angle_brackets_as_text(tmp_path):
    """H19 (wrong): in LaTeX's default OT1 text font '|' prints an em dash and '<' '>' print
    inverted marks: 'V|P <b>' read "V—P ¡b¿"."""
    from vpn_plugin.protocol.report import build_table, to_latex
    text = to_latex(build_table(renamed_rows(tmp_path), ['success_rate']))
    assert r'V\textbar{}P \textless{}b\textgreater{}' in text
    assert 'V|P' not in text and '<b>' not in text


def test_one_method_spelled_in_two_unicode_forms_is_refused_naming_the_rows(tmp_path):
    """D08 (silent): 'Café' composed (NFC) and decomposed (NFD) were two table rows of one
    visible name; D07 (vague): the refusal of a spelling named no file or line."""
    import unicodedata
    from vpn_plugin.protocol.results import read_results
    path = rows_of(tmp_path, 'nfd.jsonl', lambda row: row.update(method='Viterbi Café'))
    lines = path.read_text().splitlines()
    first = next(n for n, line in enumerate(lines) if 'Viterbi' in line)
    lines[first] = lines[first].replace('Viterbi Caf\\u00e9',
                                        json.dumps(unicodedata.normalize('NFD', 'Viterbi Café'))[1:-1])
    path.write_text('\n'.join(lines) + '\n')
    with pytest.raises(ValueError) as refused:
        read_results(path)
    assert f'{path}:{first + 1}' in str(refused.value)


def test_a_duplicate_row_is_refused_naming_both_files(tmp_path):
    """H14, H15, C20 (vague): the same rows in two files were refused naming neither file."""
    copy = tmp_path / 'copy.jsonl'
    copy.write_bytes(T6.read_bytes())
    message = tool_refusal('report', [str(T6), str(copy), '--metrics', 'success_rate'])
    assert f'{T6}:1' in message and f'{copy}:1' in message
    message = tool_refusal('keep_results', [str(T6), str(copy), '--out',
                                            str(tmp_path / 'kept.jsonl')])
    assert f'{T6}:1' in message and f'{copy}:1' in message
    assert not (tmp_path / 'kept.jsonl').exists()

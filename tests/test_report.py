"""Report tables on synthetic results files with known answers."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.core.stats import bootstrap_ci
from vpn_plugin.protocol.report import build_table, format_params, to_latex, to_markdown
from vpn_plugin.protocol.results import (ResultRow, append_result, filter_rows, read_results,
                                         write_results_csv)

SEEDS = [0, 1, 2, 3, 4]


def load_tool(name):
    path = Path(__file__).resolve().parents[1] / 'tools' / f'{name}.py'
    spec = importlib.util.spec_from_file_location(f'tool_{name}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_rows(method, sr_per_seed, horizon=3, params=None, miou=None):
    rows = []
    for seed, sr in zip(SEEDS, sr_per_seed):
        metrics = {'success_rate': sr, 'mean_accuracy': sr + 20.0}
        if miou is not None:
            metrics['miou_set'] = miou
        rows.append(ResultRow(method=method, seed=seed, horizon=horizon, metrics=metrics,
                              params=params, dataset='crosstask', protocol='standard'))
    return rows


@pytest.fixture
def three_methods():
    return (make_rows('Ours', [60.0] * 5, params=1_500_000)
            + make_rows('Second', [50.0] * 5, params=20_000)
            + make_rows('Third', [40.0] * 5))


def test_constant_seeds_give_zero_width_ci(three_methods):
    table = build_table(three_methods, ['success_rate'])
    cell = table.cells[('Ours', ('crosstask', 3, 'success_rate'))]
    assert (cell.mean, cell.low, cell.high) == (60.0, 60.0, 60.0)


def test_cell_ci_is_the_core_bootstrap_over_seeds():
    values = [31.0, 35.5, 29.0, 40.25, 33.0]
    table = build_table(make_rows('A', values) + make_rows('B', [1.0] * 5), ['success_rate'])
    cell = table.cells[('A', ('crosstask', 3, 'success_rate'))]
    assert cell.mean == pytest.approx(np.mean(values))
    expected = bootstrap_ci(np.array(values), num_resamples=100, level=0.90, seed=0)
    assert (cell.mean, cell.low, cell.high) == pytest.approx(tuple(map(float, expected)))
    assert min(values) <= cell.low <= cell.mean <= cell.high <= max(values)
    assert cell.low < cell.high


def test_best_bold_second_underlined(three_methods):
    table = build_table(three_methods, ['success_rate', 'mean_accuracy'])
    markdown = to_markdown(table)
    assert '**60.00 ± 0.00**' in markdown and '**80.00 ± 0.00**' in markdown
    assert '<u>50.00 ± 0.00</u>' in markdown and '<u>70.00 ± 0.00</u>' in markdown
    third_line = next(line for line in markdown.splitlines() if line.startswith('| Third'))
    assert '**' not in third_line and '<u>' not in third_line
    latex = to_latex(table, label='tab:std')
    assert r'\textbf{60.00{\scriptsize$\pm$0.00}}' in latex
    assert r'\underline{50.00{\scriptsize$\pm$0.00}}' in latex
    assert r'\label{tab:std}' in latex and latex.count(r' \\') == 5  # header, 3 rows, delta


def test_ties_share_the_mark():
    rows = make_rows('A', [50.0] * 5) + make_rows('B', [50.0] * 5) + make_rows('C', [10.0] * 5)
    table = build_table(rows, ['success_rate'])
    column = ('crosstask', 3, 'success_rate')
    assert table.best[column] == {'A', 'B'} and table.second[column] == {'C'}


def test_constant_improvement_is_significant(three_methods):
    rng = np.random.default_rng(1)
    base = rng.uniform(30, 50, size=5)
    rows = make_rows('Ours', base + 10.0) + make_rows('Other', base)
    imp = build_table(rows, ['success_rate']).improvements[('crosstask', 3, 'success_rate')]
    assert (imp.ours, imp.reference, imp.num_seeds) == ('Ours', 'Other', 5)
    assert imp.delta == pytest.approx(10.0)
    assert imp.low == pytest.approx(10.0) and imp.high == pytest.approx(10.0)
    assert imp.significant
    assert '+10.00* [+10.00, +10.00]' in to_markdown(build_table(rows, ['success_rate']))


def test_noisy_tie_is_not_significant():
    # paired differences +1, -1, +1, -1, 0: mean 0, any resample CI contains 0
    rows = make_rows('A', [51, 49, 51, 49, 50]) + make_rows('B', [50.0] * 5)
    imp = build_table(rows, ['success_rate']).improvements[('crosstask', 3, 'success_rate')]
    assert imp.delta == pytest.approx(0.0)
    assert imp.low <= 0 <= imp.high
    assert not imp.significant
    assert '*' not in to_markdown(build_table(rows, ['success_rate'])).split('Δ')[1].split('\n')[0]


def test_named_reference(three_methods):
    table = build_table(three_methods, ['success_rate'], ours='Third', reference='Ours')
    imp = table.improvements[('crosstask', 3, 'success_rate')]
    assert (imp.ours, imp.reference, imp.delta) == ('Third', 'Ours', pytest.approx(-20.0))
    with pytest.raises(ValueError, match='Missing'):
        build_table(three_methods, ['success_rate'], reference='Missing')


def test_pairing_uses_common_seeds_only():
    a = make_rows('A', [60, 61, 62, 63, 64])
    b = [r for r in make_rows('B', [50, 50, 50, 50, 50]) if r.seed in (1, 3)]
    imp = build_table(a + b, ['success_rate']).improvements[('crosstask', 3, 'success_rate')]
    assert imp.num_seeds == 2 and imp.delta == pytest.approx(((61 - 50) + (63 - 50)) / 2)


def test_columns_per_horizon_and_params(three_methods):
    rows = three_methods + make_rows('Ours', [30.0] * 5, horizon=4, params=1_500_000)
    table = build_table(rows, ['success_rate'])
    assert table.columns == [('crosstask', 3, 'success_rate'), ('crosstask', 4, 'success_rate')]
    markdown = to_markdown(table)
    assert '| Method | Params | T=3 SR | T=4 SR |' in markdown
    assert '| Ours | 1.50M |' in markdown and '| Second | 20.00K |' in markdown
    assert '| Third | - |' in markdown
    assert format_params(999) == '999' and format_params(None) == '-'


def test_duplicate_runs_are_rejected(three_methods):
    with pytest.raises(ValueError, match='duplicate results.*Ours.*seed=0'):
        build_table(three_methods + three_methods[:1], ['success_rate'])


def test_jsonl_csv_roundtrip_and_errors(tmp_path, three_methods):
    jsonl = tmp_path / 'r.jsonl'
    for row in three_methods:
        append_result(jsonl, row)
    assert read_results(jsonl) == three_methods
    csv_path = tmp_path / 'r.csv'
    write_results_csv(csv_path, three_methods)
    assert read_results(csv_path) == three_methods
    bad = tmp_path / 'bad.jsonl'
    bad.write_text(json.dumps({'method': 'x', 'seed': 0, 'metrics': {'success_rate': 1}}) + '\n')
    with pytest.raises(ValueError, match=r'bad.jsonl:1.*horizon'):
        read_results(bad)
    bad.write_text(json.dumps({'method': 'x', 'seed': 'a', 'horizon': 3,
                               'metrics': {'success_rate': 1}}) + '\n')
    with pytest.raises(ValueError, match='"seed" must be an integer'):
        read_results(bad)
    with pytest.raises(ValueError, match='no results rows match'):
        filter_rows(three_methods, protocol='ablation')


def test_cli_writes_markdown_and_latex(tmp_path, three_methods, capsys):
    results = tmp_path / 'results.jsonl'
    for row in three_methods:
        append_result(results, row)
    load_tool('report').main([str(results), '--metrics', 'success_rate',
                              '--out', str(tmp_path / 'tab'),
                              '--title', 'Standard T=3'])
    markdown = (tmp_path / 'tab.md').read_text()
    assert markdown in capsys.readouterr().out
    assert '**60.00 ± 0.00**' in markdown
    assert r'\begin{tabular}' in (tmp_path / 'tab.tex').read_text()


def test_cli_selects_orders_and_renames(tmp_path, three_methods, capsys):
    results = tmp_path / 'results.jsonl'
    for row in three_methods:
        append_result(results, row)
    load_tool('report').main([str(results), '--metrics', 'success_rate', '--methods', 'Third',
                              'Ours', '--rename', 'Ours=VPN (ours)', '--reference', 'Third'])
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith('| ')]
    assert [l.split(' | ')[0] for l in lines[1:]] == ['| Third', '| VPN (ours)', '| Δ']
    assert '+20.00*' in lines[-1]


def test_lower_is_better_and_descriptive_metrics():
    rows = []
    for method, jsd in (('A', 0.2), ('B', 0.5), ('C', 0.9)):
        rows += [ResultRow(method, s, 3, {'plan_jsd': jsd + 0.01 * s, 'plan_entropy': jsd})
                 for s in SEEDS]
    table = build_table(rows, ['plan_jsd', 'plan_entropy'])
    jsd, entropy = ('', 3, 'plan_jsd'), ('', 3, 'plan_entropy')
    assert table.best[jsd] == {'A'} and table.second[jsd] == {'B'}
    assert table.improvements[jsd].delta == pytest.approx(0.2 - 0.5)
    assert table.best[entropy] == set() and table.improvements[entropy] is None

"""Report tables on synthetic results files with known answers."""
import importlib.util
import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.protocol.report import build_table, format_params, to_latex, to_markdown
from vpn_plugin.protocol.results import (ResultRow, append_result, filter_rows, read_results,
                                         write_results_csv)

SEEDS = [0, 1, 2, 3, 4]
REPO = Path(__file__).resolve().parents[1]


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


def percentile_bootstrap_by_hand(values, num_resamples, seed=0):
    """Oracle: K resamples of the n values (numpy Generator, seed 0), 5th/95th percentiles."""
    values = np.asarray(values, dtype=float)
    index = np.random.default_rng(seed).integers(0, len(values), (num_resamples, len(values)))
    means = np.sort(values[index].mean(1))
    # numpy's default 'linear' percentile, written out: position q/100 * (K - 1)
    def percentile(q):
        position = q / 100 * (num_resamples - 1)
        below = int(np.floor(position))
        above = min(below + 1, num_resamples - 1)
        return means[below] + (position - below) * (means[above] - means[below])
    return percentile(5), percentile(95)


def test_cell_ci_is_a_90_percent_bootstrap_with_100_resamples():
    values = [31.0, 35.5, 29.0, 40.25, 33.0]
    table = build_table(make_rows('A', values) + make_rows('B', [1.0] * 5), ['success_rate'])
    cell = table.cells[('A', ('crosstask', 3, 'success_rate'))]
    assert cell.mean == pytest.approx(sum(values) / 5)
    low, high = percentile_bootstrap_by_hand(values, 100)
    assert (cell.low, cell.high) == pytest.approx((low, high))
    assert (cell.low, cell.high) != pytest.approx(percentile_bootstrap_by_hand(values, 1000))
    assert min(values) <= cell.low < cell.mean < cell.high <= max(values)
    assert f'{cell.mean:.2f} ± {(high - low) / 2:.2f}' in to_markdown(table)


@pytest.mark.parametrize('diffs', [[3.0, -1.0, 2.0, 0.5, 1.5], [4.0, -3.0, 2.0, -2.5, 1.5]])
def test_improvement_is_a_paired_bootstrap_with_1000_resamples(diffs):
    base = np.array([40.0, 45.0, 38.0, 50.0, 42.0])  # per-seed differences matter, not levels
    rows = make_rows('Ours', base + np.array(diffs)) + make_rows('Ref', base)
    table = build_table(rows, ['success_rate'])
    imp = table.improvements[('crosstask', 3, 'success_rate')]
    low, high = percentile_bootstrap_by_hand(diffs, 1000)
    assert imp.delta == pytest.approx(np.mean(diffs))
    assert (imp.low, imp.high) == pytest.approx((low, high))
    significant = not low <= 0 <= high
    assert imp.significant == significant
    delta_cell = to_markdown(table).split('| Δ |')[1].split('|')[0].strip()
    assert delta_cell == (f'{np.mean(diffs):+.2f}{"*" if significant else ""} '
                          f'[{low:+.2f}, {high:+.2f}]')


def test_the_two_improvement_cases_differ_in_significance():
    """Guards the parametrized test above: one case must be significant, the other not."""
    verdicts = []
    for diffs in ([3.0, -1.0, 2.0, 0.5, 1.5], [4.0, -3.0, 2.0, -2.5, 1.5]):
        low, high = percentile_bootstrap_by_hand(diffs, 1000)
        verdicts.append(not low <= 0 <= high)
    assert verdicts == [True, False]


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
    assert r'+10.00$^{*}$ {\scriptsize[+10.00, +10.00]}' in to_latex(
        build_table(rows, ['success_rate']))


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


def docs_commands(tool):
    """The ``tools/<tool>.py`` commands of docs/results.md's bash block, continuation lines
    joined, as argument lists (``$R`` kept as a token)."""
    text = (REPO / 'docs' / 'results.md').read_text()
    blocks = [part.split('```', 1)[0] for part in text.split('```bash')[1:]]
    lines = '\n'.join(blocks).replace('\\\n', ' ').splitlines()
    return [shlex.split(line)[2:] for line in lines
            if line.strip().startswith(f'.venv/bin/python tools/{tool}.py')]


def protocol_results(tmp_path, seeds=(0, 1, 2, 3)):
    """A results file with every test of the protocol docs/results.md ran (random metrics)."""
    import os
    from vpn_plugin.protocol.runner import expand_units, load_protocol
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        protocol = load_protocol('configs/protocol/main_and_ablation_t3_crosstask.py')
    finally:
        os.chdir(cwd)
    rng = np.random.default_rng(0)
    path = tmp_path / 'results.jsonl'
    for unit in expand_units(protocol, seeds=list(seeds)):
        for spec in unit.tests:
            metrics = {m: float(rng.uniform(0, 100)) for m in
                       ('success_rate', 'mean_accuracy', 'miou_set')}
            metrics.update(plan_entropy=float(rng.uniform(1, 2)), plan_jsd=float(rng.random()))
            append_result(path, ResultRow(spec.method, unit.seed, spec.horizon, metrics,
                                          params=None if not unit.train else 1000,
                                          dataset='crosstask', protocol=protocol.protocol))
    return path


def first_column(markdown):
    return [line.split(' | ')[0][2:] for line in markdown.splitlines()
            if line.startswith('| ')][1:]


def test_docs_results_commands_match_the_cli_and_the_protocol(tmp_path, capsys):
    """The commands in docs/results.md run on the protocol's method names and give tables with
    the rows of the committed docs/results_synthetic_*.md."""
    results = str(protocol_results(tmp_path))
    commands = docs_commands('report')
    assert len(commands) == 2
    for argv in commands:
        argv = [results if a == '$R' else a for a in argv]
        stem = argv[argv.index('--out') + 1]
        argv[argv.index('--out') + 1] = str(tmp_path / Path(stem).name)
        load_tool('report').main(argv)
        made = (tmp_path / Path(stem).name).with_suffix('.md').read_text()
        committed = (REPO / stem).with_suffix('.md').read_text()
        assert first_column(made) == first_column(committed)
        assert made.splitlines()[2] == committed.splitlines()[2]  # same header
    plots = load_tool('plots')
    assert [argv[0] for argv in docs_commands('plots')] == ['params', 'overlap', 'qualitative']
    for argv in docs_commands('plots'):
        argv = [results if a == '$R' else a for a in argv]
        argv[argv.index('--out') + 1] = str(tmp_path / 'figure')
        if argv[0] in ('qualitative', 'overlap'):  # need a checkpoint / per-sample dumps
            assert plots.parse_args(argv).out
            continue
        plots.main(argv)
        assert (tmp_path / 'figure.png').is_file() and (tmp_path / 'figure.pdf').is_file()
    capsys.readouterr()

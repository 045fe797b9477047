"""Report tables on synthetic results files with known answers."""
import json
import re
import shlex
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.protocol.report import (DIGITS, build_table, format_params, ranked, to_latex,
                                        to_markdown)
from vpn_plugin.protocol.results import (ResultRow, append_result, filter_rows, read_results,
                                         write_results_csv)
from tool_modules import load_tool

SEEDS = [0, 1, 2, 3, 4]
REPO = Path(__file__).resolve().parents[1]


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


def authors_interval(values, num_resamples=1000, seed=42):
    """Oracle: the authors' calculate_results.py bootstrap, transcribed: ``random.seed(42)``,
    ``random.choice`` per drawn seed, ``np.mean``, then numpy's default ('linear') 5th/95th
    percentile, written out: position q/100 * (K - 1) in the sorted means."""
    import random
    random.seed(seed)
    means = np.sort([np.mean([random.choice(list(values)) for _ in values])
                     for _ in range(num_resamples)])
    def percentile(q):
        position = q / 100 * (num_resamples - 1)
        below = int(np.floor(position))
        above = min(below + 1, num_resamples - 1)
        return means[below] + (position - below) * (means[above] - means[below])
    return percentile(5), percentile(95)


def exact_interval(deltas):
    """5th/95th percentiles of an enumerated, equally likely bootstrap distribution."""
    return tuple(np.percentile(deltas, [5, 95]))


def exact_means(values):
    """Means of all n^n equally likely resamples of ``values``."""
    n = len(values)
    return np.array(np.meshgrid(*[np.asarray(values, float)] * n)).reshape(n, -1).mean(0)


def test_cell_is_mean_plus_minus_the_full_width_of_the_authors_interval():
    values = [31.0, 35.5, 29.0, 40.25, 33.0]
    rows = make_rows('A', values) + make_rows('B', [1.0] * 5)
    table = build_table(rows, ['success_rate'])
    cell = table.cells[('A', ('crosstask', 3, 'success_rate'))]
    assert cell.mean == pytest.approx(sum(values) / 5)
    low, high = authors_interval(values)
    assert (cell.low, cell.high) == pytest.approx((low, high))
    assert (cell.low, cell.high) != pytest.approx(authors_interval(values, 100))
    assert min(values) <= cell.low < cell.mean < cell.high <= max(values)
    assert f'| **{cell.mean:.2f} ± {high - low:.2f}** |' in to_markdown(table)
    half = to_markdown(build_table(rows, ['success_rate'], ci_style='half-width'))
    assert f'| **{cell.mean:.2f} ± {(high - low) / 2:.2f}** |' in half
    assert 'half-width (p95 - p5)/2' in half
    with pytest.raises(ValueError, match='ci_style'):
        build_table(rows, ['success_rate'], ci_style='sd')


@pytest.mark.parametrize('diffs, significant', [([3.0, -1.0, 2.0, 0.5, 1.5], True),
                                                ([4.0, -3.0, 2.0, -2.5, 1.5], False)])
def test_paired_improvement_resamples_the_common_seeds_jointly(diffs, significant):
    base = np.array([40.0, 45.0, 38.0, 50.0, 42.0])  # per-seed differences matter, not levels
    rows = make_rows('Ours', base + np.array(diffs)) + make_rows('Ref', base)
    table = build_table(rows, ['success_rate'], paired=True)
    imp = table.improvements[('crosstask', 3, 'success_rate')]
    low, high = exact_interval(exact_means(diffs))
    assert imp.delta == pytest.approx(np.mean(diffs))
    assert (imp.low, imp.high) == pytest.approx((low, high), abs=0.15)
    assert (not low <= 0 <= high) == imp.significant == significant
    delta_cell = to_markdown(table).split('| Δ |')[1].split('|')[0].strip()
    assert delta_cell == (f'{np.mean(diffs):+.2f}{"*" if significant else ""} ± '
                          f'{imp.high - imp.low:.2f}')
    assert 'paired bootstrap over the common seeds' in to_markdown(table)


def test_improvement_resamples_each_method_independently_by_default():
    """The paper's Δ: seed i of two models is no pair. A tracks B seed by seed (+1.5), the
    seeds spread widely: independent resampling is wide and not significant."""
    ref = np.array([30.0, 45.0, 60.0, 38.0, 52.0])
    ours = ref + 1.5
    table = build_table(make_rows('Ours', ours) + make_rows('Ref', ref), ['success_rate'])
    imp = table.improvements[('crosstask', 3, 'success_rate')]
    low, high = exact_interval(np.subtract.outer(exact_means(ours), exact_means(ref)))
    assert imp.num_seeds == (5, 5) and imp.delta == pytest.approx(1.5)
    assert (imp.low, imp.high) == pytest.approx((low, high), abs=1.5)
    assert not imp.significant and imp.high - imp.low > 15
    paired = build_table(make_rows('Ours', ours) + make_rows('Ref', ref), ['success_rate'],
                         paired=True).improvements[('crosstask', 3, 'success_rate')]
    assert paired.significant and paired.high - paired.low == pytest.approx(0.0)
    markdown = to_markdown(table)
    assert f'| +1.50 ± {imp.high - imp.low:.2f} |' in markdown
    assert 'Ours minus Ref (5 and 5 seeds)' in markdown
    assert "resamples each method's seeds independently" in markdown


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
    assert ranked(table, column, DIGITS) == ({'A', 'B'}, {'C'})


def test_constant_improvement_is_significant(three_methods):
    base = np.full(5, 42.0)
    rows = make_rows('Ours', base + 10.0) + make_rows('Other', base)
    imp = build_table(rows, ['success_rate']).improvements[('crosstask', 3, 'success_rate')]
    assert (imp.ours, imp.reference, imp.num_seeds) == ('Ours', 'Other', (5, 5))
    assert imp.delta == pytest.approx(10.0)
    assert imp.low == pytest.approx(10.0) and imp.high == pytest.approx(10.0)
    assert imp.significant
    assert '+10.00* ± 0.00' in to_markdown(build_table(rows, ['success_rate']))
    assert r'+10.00$^{*}${\scriptsize$\pm$0.00}' in to_latex(
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
    b = [r for r in make_rows('B', [50, 52, 49, 51, 50]) if r.seed in (1, 2, 3)]
    imp = build_table(a + b, ['success_rate'], paired=True).improvements[
        ('crosstask', 3, 'success_rate')]
    assert imp.num_seeds == (3, 3)
    assert imp.delta == pytest.approx(((61 - 52) + (62 - 49) + (63 - 51)) / 3)
    unpaired = build_table(a + b, ['success_rate']).improvements[('crosstask', 3, 'success_rate')]
    assert unpaired.num_seeds == (5, 3) and unpaired.delta == pytest.approx(62 - (52 + 49 + 51) / 3)


def test_fewer_than_three_seeds_show_no_ci_and_no_mark():
    rows = [r for r in make_rows('A', [60, 70, 65, 61, 62]) if r.seed < 2] + \
        [r for r in make_rows('B', [10, 12, 11, 10, 12]) if r.seed < 2]
    table = build_table(rows, ['success_rate'])
    cell = table.cells[('A', ('crosstask', 3, 'success_rate'))]
    imp = table.improvements[('crosstask', 3, 'success_rate')]
    assert cell.low is None and imp.low is None and not imp.significant
    markdown = to_markdown(table)
    assert '| **65.00** |' in markdown and '| +54.00 |' in markdown and '±' not in \
        markdown.split('\n\n')[0]
    assert 'n=2: no CI and no significance mark' in markdown
    assert 'Mean over seeds (n=2); best in bold' in markdown and 'full width' not in markdown
    assert 'Δ: A minus B (2 and 2 seeds).' in markdown
    assert r'A & \textbf{65.00} \\' in to_latex(table)


def test_shortened_runs_are_marked_in_table_and_caption(tmp_path):
    rows = make_rows('Full', [50.0] * 5) + make_rows('Quick', [40.0] * 5)
    results = tmp_path / 'r.jsonl'
    for row in rows:
        record = asdict(row)
        if row.method == 'Quick':
            record['shortened'] = 'max_epochs=3' if row.seed else True
        results.write_text((results.read_text() if results.exists() else '')
                           + json.dumps(record) + '\n')
    table = build_table(read_results(results), ['success_rate'])
    assert table.shortened == {'Quick': ['max_epochs=3', 'shortened']}
    markdown = to_markdown(table)
    assert '| Quick† |' in markdown and '| Full |' in markdown
    assert '† shortened runs (Quick: max_epochs=3, shortened)' in markdown
    assert r'Quick\textsuperscript{\dag}' in to_latex(table)
    csv_path = tmp_path / 'r.csv'
    write_results_csv(csv_path, read_results(results))
    assert build_table(read_results(csv_path), ['success_rate']).shortened == table.shortened
    bad = tmp_path / 'bad.jsonl'
    bad.write_text(json.dumps({**asdict(rows[0]), 'shortened': 3}) + '\n')
    with pytest.raises(ValueError, match=r'bad.jsonl:1: field shortened=3; expected a string'):
        read_results(bad)


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
    with pytest.raises(ValueError, match="bad.jsonl:1: field seed='a'; expected an integer"):
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
    assert capsys.readouterr().out == markdown  # ends with one newline
    assert '**60.00 ± 0.00**' in markdown
    latex = (tmp_path / 'tab.tex').read_text()
    assert r'\begin{tabular}' in latex
    load_tool('report').main([str(results), '--metrics', 'success_rate', '--format', 'latex',
                              '--title', 'Standard T=3'])
    printed = capsys.readouterr().out
    assert printed == latex and printed.endswith('\\end{table}\n')


def test_cli_two_methods_five_seeds_paper_conventions(tmp_path, capsys):
    """Done-when of issue 17: the default table has the paper's "±" and Δ semantics."""
    ours_values, ref_values = [52.1, 55.3, 49.8, 58.0, 54.4], [47.5, 50.2, 51.1, 46.3, 48.9]
    results = tmp_path / 'results.jsonl'
    for row in make_rows('Ours', ours_values) + make_rows('Ref', ref_values):
        append_result(results, row)
    load_tool('report').main([str(results), '--metrics', 'success_rate'])
    markdown = capsys.readouterr().out
    low, high = authors_interval(ours_values)
    assert f'**{np.mean(ours_values):.2f} ± {high - low:.2f}**' in markdown
    d_low, d_high = exact_interval(np.subtract.outer(exact_means(ours_values),
                                                     exact_means(ref_values)))
    delta_cell = markdown.split('| Δ |')[1].split('|')[0].strip()
    delta_text, width_text = delta_cell.split(' ± ')
    assert delta_text == f'{np.mean(ours_values) - np.mean(ref_values):+.2f}*'
    assert float(width_text) == pytest.approx(d_high - d_low, abs=0.4)
    assert 'full width p95 - p5 of the 90% percentile-bootstrap interval' in markdown
    assert "each replicate resamples each method's seeds independently" in markdown
    load_tool('report').main([str(results), '--metrics', 'success_rate', '--paired',
                              '--ci-style', 'half-width', '--num-resamples', '100'])
    other = capsys.readouterr().out
    low, high = authors_interval(ours_values, 100)
    assert f'**{np.mean(ours_values):.2f} ± {(high - low) / 2:.2f}**' in other
    assert 'paired bootstrap over the common seeds' in other and '(K=100 resamples' in other


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
    assert ranked(table, jsd, DIGITS) == ({'A'}, {'B'})
    assert table.improvements[jsd].delta == pytest.approx(0.2 - 0.5)
    assert ranked(table, entropy, DIGITS) == (set(), set()) and table.improvements[entropy] is None


def docs_lines():
    """The lines of docs/results.md's bash blocks, continuation lines joined."""
    text = (REPO / 'docs' / 'results.md').read_text()
    blocks = [part.split('```', 1)[0] for part in text.split('```bash')[1:]]
    return '\n'.join(blocks).replace('\\\n', ' ').splitlines()


def docs_commands(tool):
    """The ``tools/<tool>.py`` commands of docs/results.md, as argument lists (``$X`` kept)."""
    return [shlex.split(line)[2:] for line in docs_lines()
            if line.strip().startswith(f'.venv/bin/python tools/{tool}.py')]


def docs_results_files():
    """``{'$X': path}`` of docs/results.md's ``X=docs/results_data/<name>.jsonl`` lines: the
    committed per-seed results (``tools/keep_results.py``) every table and figure is drawn
    from; each is traced to the ``keep_results.py`` line that writes it."""
    lines = '\n'.join(docs_lines())
    kept = {argv[argv.index('--out') + 1] for argv in docs_commands('keep_results')}
    found = {}
    for variable, path in re.findall(r'^(\w)=(docs/results_data/\S+\.jsonl)$', lines, re.M):
        assert (REPO / path).is_file() and path in kept, path
        found[f'${variable}'] = path
    return found


def kept_commands(tool, files):
    """The ``tools/<tool>.py`` commands of docs/results.md that read only kept results, with
    their ``$X`` replaced by the kept file."""
    commands = []
    for argv in docs_commands(tool):
        if any(a.startswith('$') for a in argv if a not in files):
            continue  # a table of a run whose per-seed results were not kept
        commands.append([files.get(a, a) for a in argv])
    return commands


def test_docs_results_tables_and_figures_are_drawn_from_the_committed_results(tmp_path,
                                                                              monkeypatch):
    """Every report command of docs/results.md that reads kept per-seed results
    (docs/results_data/) writes exactly the committed table (.md and .tex); every figure of
    docs/figures is drawn by a plots command from kept results (the qualitative one from its
    checkpoint: its arguments are parsed)."""
    monkeypatch.chdir(REPO)
    files = docs_results_files()
    commands = kept_commands('report', files)
    assert len(commands) >= 2 and files
    for argv in commands:
        stem = argv[argv.index('--out') + 1]
        argv[argv.index('--out') + 1] = str(tmp_path / Path(stem).name)
        load_tool('report').main(argv)
        for suffix in ('.md', '.tex'):
            made = (tmp_path / Path(stem).name).with_suffix(suffix).read_text()
            assert made == (REPO / stem).with_suffix(suffix).read_text(), (stem, suffix)
    plots = load_tool('plots')
    drawn = set()
    for argv in docs_commands('plots'):
        drawn.add(argv[argv.index('--out') + 1])
        if argv[0] == 'qualitative':
            assert plots.parse_args(argv).out
            continue
        assert all(a in files for a in argv if a.startswith('$')), argv
        argv = [files.get(a, a) for a in argv]
        argv[argv.index('--out') + 1] = str(tmp_path / 'figure')
        plots.main(argv)
        assert (tmp_path / 'figure.png').is_file() and (tmp_path / 'figure.pdf').is_file()
    committed = {str(f.with_suffix('').relative_to(REPO))
                 for f in (REPO / 'docs' / 'figures').glob('*.png')}
    # the whole-training comparisons' loss curves: drawn by compare_official_training.py's
    # documented commands (docs/reproducibility.md), from official runs not kept here
    official = set(re.findall(r'--figure (docs/figures/\S+)',
                              (REPO / 'docs' / 'reproducibility.md').read_text()))
    assert official and all(name.startswith('docs/figures/official_') for name in official)
    assert committed == drawn | official


def test_failed_windows_of_llm_rows_are_shown_next_to_the_method(tmp_path):
    rows = make_rows('Ours', [50.0] * 5) + make_rows('LLM', [20.0] * 5)
    results = tmp_path / 'r.jsonl'
    lines = []
    for row in rows:
        record = asdict(row)
        if row.method == 'LLM' and row.seed in (0, 3):
            record['failures'] = {'timeout': 2, 'connection': 1} if row.seed else {'timeout': 4}
        lines.append(json.dumps(record))
    results.write_text('\n'.join(lines) + '\n')
    table = build_table(read_results(results), ['success_rate'])
    assert table.failures == {'LLM': {'timeout': 6, 'connection': 1}}
    markdown = to_markdown(table)
    assert '| LLM (failed: 7 windows: connection 1, timeout 6) |' in markdown
    assert '| Ours |' in markdown
    assert 'LLM (failed: 7 windows' in to_latex(table)


def test_caption_names_how_the_tested_checkpoints_were_selected(tmp_path):
    rows = make_rows('Ours', [50.0] * 5) + make_rows('Base', [40.0] * 5)
    for row in rows:
        row.selection = ('authors: best plan/authors_selection' if row.method == 'Ours'
                         else 'unified: last epoch')
    markdown = to_markdown(build_table(rows, ['success_rate']))
    assert ('Tested checkpoints: authors: best plan/authors_selection; unified: last epoch.'
            in markdown)
    assert 'Tested checkpoints' not in to_markdown(build_table(make_rows('A', [1.0] * 3),
                                                               ['success_rate']))


def test_stand_in_text_features_are_marked_in_table_and_caption():
    label = "stand-in all-MiniLM-L6-v2 (mean-pooled, zero-padded to 768-d), not the paper's CLIP"
    rows = make_rows('Paper', [50.0] * 5) + make_rows('COIN run', [40.0] * 5)
    for row in rows[5:]:
        row.variant = {'text_features': label}
    table = build_table(rows, ['success_rate'])
    assert table.stand_ins == {'COIN run': [label]}
    markdown = to_markdown(table)
    assert '| COIN run‡ |' in markdown and '| Paper |' in markdown
    assert f'‡ text features: {label}.' in markdown
    assert r'COIN run\textsuperscript{\ddag}' in to_latex(table)


def test_oracle_rows_are_named_and_never_the_default_delta_and_llm_rows_show_their_cost():
    oracle = make_rows('gpt [oracle first/last]', [60.0, 61.0, 62.0])
    for row in oracle:
        row.variant = {'anchors': 'oracle'}
        row.usage = {'total_tokens': 1_200_000 + row.seed, 'paid_tokens': 1000 * row.seed,
                     'cost_of_answers': 3.0 + row.seed, 'cost_paid': 0.5 * row.seed}
    rows = oracle + make_rows('ViterbiPlanNet', [30.0, 31.0, 32.0]) + \
        make_rows('PKG beam search', [20.0, 21.0, 22.0])
    table = build_table(rows, ['success_rate'], num_resamples=50, num_diff_resamples=50)
    improvement = table.improvements[('crosstask', 3, 'success_rate')]
    assert (improvement.ours, improvement.reference) == ('ViterbiPlanNet', 'PKG beam search')
    assert improvement.delta == pytest.approx(10.0)
    markdown, latex = to_markdown(table), to_latex(table)
    assert 'ORACLE rows (gpt [oracle first/last]) are upper bounds' in markdown
    assert '| Method | Tokens | Paid tokens | Cost | Paid |' in markdown
    assert '| gpt [oracle first/last] | 1.20M | 1.00K | 4.00 | 0.50 |' in markdown.replace('**', '')
    assert 'Paid: what the run\'s own requests cost' in markdown
    assert 'ORACLE rows' in latex and r'Method & Tokens & Paid tokens & Cost & Paid &' in latex
    for row in oracle:  # a row written before issue 34: 'cost' = of the answers used
        row.usage = {'total_tokens': 1_200_000 + row.seed, 'cost': 3.0 + row.seed}
    legacy = to_markdown(build_table(rows, ['success_rate'], num_resamples=50,
                                     num_diff_resamples=50))
    assert '| Method | Tokens | Cost |' in legacy and 'Paid' not in legacy
    explicit = build_table(rows, ['success_rate'], reference='gpt [oracle first/last]',
                           ours='ViterbiPlanNet', num_resamples=50, num_diff_resamples=50)
    assert explicit.improvements[('crosstask', 3, 'success_rate')].reference == \
        'gpt [oracle first/last]'  # named on purpose: allowed
    plain = to_markdown(build_table(rows[3:], ['success_rate'], num_resamples=50,
                                    num_diff_resamples=50))
    assert 'ORACLE' not in plain and 'Tokens' not in plain

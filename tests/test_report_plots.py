"""Protocol figures: the plotted data (seed means, CIs, counts), files are PNG + PDF."""
import json
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.protocol.plots import (ONE_COLUMN, curve_points, curve_values,
                                       efficiency_points, error_overlap, log_ticks,
                                       overlap_table, params_points,
                                       pkg_quality_panels, plot_curves, plot_error_overlap,
                                       plot_params_vs_metric, plot_pkg_quality, plot_qualitative,
                                       plot_sample_efficiency, top_actions)
from vpn_plugin.protocol.results import ResultRow, append_result
from tool_modules import load_tool



def assert_publication_files(paths, max_width=ONE_COLUMN):
    """PNG + PDF; the PDF embeds TrueType fonts (editable text, pdf.fonttype 42); the PNG is
    at most ``max_width`` inches wide at 300 dpi."""
    from PIL import Image
    png, pdf = paths[:2]
    assert (png.suffix, pdf.suffix) == ('.png', '.pdf')
    assert b'/FontFile2' in pdf.read_bytes() and b'/Type3' not in pdf.read_bytes()
    with Image.open(png) as image:
        assert image.size[0] <= max_width * 300 + 1


def study_rows():
    rows = []
    for seed in range(3):
        for fraction, base in ((0.1, 20.0), (0.5, 30.0), (1.0, 35.0)):
            rows.append(ResultRow('VPN', seed, 3, {'success_rate': base + seed}, params=1000,
                                  variant=dict(train_fraction=fraction)))
            rows.append(ResultRow('Base', seed, 3, {'success_rate': base - 10}, params=10,
                                  variant=dict(train_fraction=fraction)))
    return rows


def test_curve_points_are_seed_means(tmp_path):
    curves = curve_points(study_rows(), 'train_fraction', 'success_rate')
    assert [p[0] for p in curves['VPN']] == [0.1, 0.5, 1.0]
    assert [p[1] for p in curves['VPN']] == pytest.approx([21.0, 31.0, 36.0])  # mean of +0,+1,+2
    assert all(low <= mean <= high for _, mean, low, high in curves['VPN'])
    assert [p[1:] for p in curves['Base']] == [(10.0, 10.0, 10.0), (20.0, 20.0, 20.0),
                                               (25.0, 25.0, 25.0)]
    paths = plot_curves(study_rows(), 'train_fraction', 'success_rate', tmp_path / 'curve')
    assert [p.suffix for p in paths] == ['.png', '.pdf'] and all(p.stat().st_size for p in paths)


def test_reference_point_joins_every_perturbation_line():
    rows = [ResultRow('VPN', 0, 3, {'success_rate': 40.0},
                      variant=dict(perturbation='none', level=0.0))]
    rows += [ResultRow('VPN', 0, 3, {'success_rate': 40.0 - 10 * level},
                       variant=dict(perturbation=kind, level=level))
             for kind in ('edge_dropout', 'label_noise') for level in (0.5, 1.0)]
    curves = curve_points(rows, 'level', 'success_rate', group_key='perturbation')
    assert set(curves) == {'edge_dropout', 'label_noise'}
    assert [(x, m) for x, m, _, _ in curves['edge_dropout']] == [(0.0, 40.0), (0.5, 35.0),
                                                                 (1.0, 30.0)]
    with pytest.raises(ValueError, match="no variant 'fraction'"):
        curve_points(rows, 'fraction', 'success_rate')


def test_params_plot(tmp_path):
    full = [r for r in study_rows() if r.variant['train_fraction'] == 1.0]
    points = params_points(full, 'success_rate')
    assert points['VPN'][0] == 1000 and points['VPN'][1] == pytest.approx(36.0)
    assert points['Base'][:2] == (10, pytest.approx(25.0))
    assert_publication_files(plot_params_vs_metric(full, 'success_rate', tmp_path / 'p'))
    with pytest.raises(ValueError, match="rows of method 'VPN'.*differ in variant"):
        params_points(study_rows(), 'success_rate')  # a point never pools study settings


def test_log_ticks_are_round_and_enough_on_a_narrow_range():
    ticks = log_ticks(0.63e6 / 1.15, 0.86e6 * 1.15)
    assert len(ticks) >= 3 and ticks == sorted(ticks)
    assert all(t % 50_000 == 0 for t in ticks)
    assert ticks[0] >= 0.63e6 / 1.15 and ticks[-1] <= 0.86e6 * 1.15


def test_qualitative_figure_and_shape_check(tmp_path):
    rng = np.random.default_rng(0)
    names = [f'action {i}' for i in range(12)]
    emissions = rng.random((3, 12))
    soft = emissions / emissions.sum(1, keepdims=True)
    paths = plot_qualitative(emissions, soft, names, tmp_path / 'q', gt_plan=[0, 1, 2],
                             pred_plan=[0, 3, 2])
    assert_publication_files(paths)
    with pytest.raises(ValueError, match=r'\(T, 12\)'):
        plot_qualitative(emissions[:, :4], soft, names, tmp_path / 'bad', gt_plan=[0, 1, 2],
                         pred_plan=[0, 1, 2])


def test_top_actions_keep_plans_then_highest_peaks():
    emissions = np.zeros((2, 10))
    soft = np.zeros((2, 10))
    emissions[0, 7], emissions[1, 3], soft[1, 4], soft[0, 9] = 0.9, 0.2, 0.8, 0.1
    # ground truth 2, 3; prediction 3, 5; emission argmax 7, 3; then by peak: 4 (0.8), 9 (0.1)
    assert top_actions(emissions, soft, [2, 3], [3, 5], k=5) == [2, 3, 4, 5, 7]
    # plans and emission argmax always shown
    assert top_actions(emissions, soft, [2, 3], [3, 5], k=2) == [2, 3, 5, 7]


def figure_markers(monkeypatch):
    """``{panel title: {legend label: [row per step]}}`` of the scatter markers of every figure
    drawn while the returned dict is alive."""
    from vpn_plugin.protocol import plots
    found, save = {}, plots.save_figure

    def recording(fig, out_stem):
        for ax in fig.axes:
            for collection in ax.collections:
                if collection.get_label() and not collection.get_label().startswith('_'):
                    found.setdefault(ax.get_title(), {})[collection.get_label()] = [
                        int(round(y)) for _, y in collection.get_offsets()]
        return save(fig, out_stem)
    monkeypatch.setattr(plots, 'save_figure', recording)
    return found


def test_qualitative_emission_panel_marks_the_emissions_argmax_not_the_plan(tmp_path,
                                                                           monkeypatch):
    """Issue 38: the emission panel's dots were the DVL plan; now each step's emission argmax
    (a diamond, named in the legend) there, the predicted plan in the soft-plan panel."""
    markers = figure_markers(monkeypatch)
    emissions = np.full((3, 4), 0.1)
    emissions[[0, 1, 2], [3, 3, 0]] = 0.7  # the network alone says 3, 3, 0
    soft = np.full((3, 4), 0.1)
    soft[[0, 1, 2], [0, 1, 2]] = 0.7       # the decoding says 0, 1, 2
    plot_qualitative(emissions, soft, list('abcd'), tmp_path / 'q', gt_plan=[0, 1, 2],
                     pred_plan=[0, 1, 2])
    assert markers['Emissions'] == {'ground truth': [0, 1, 2], 'emission argmax': [3, 3, 0]}
    assert markers['Soft plan (DVL)'] == {'ground truth': [0, 1, 2],
                                          'predicted plan': [0, 1, 2]}


def test_curve_cli_groups_perturbations(tmp_path, capsys):
    """tools/plots.py curve on a results file, lines per PKG perturbation (PNG + PDF)."""
    results = tmp_path / 'pkg_quality.jsonl'
    for seed in range(2):
        append_result(results, ResultRow('VPN', seed, 3, {'success_rate': 40.0 + seed},
                                         protocol='pkg_quality',
                                         variant=dict(perturbation='none', level=0.0)))
        for kind in ('edge_dropout', 'weight_noise'):
            for level in (0.1, 0.5):
                append_result(results, ResultRow(
                    'VPN', seed, 3, {'success_rate': 40.0 - 20 * level}, protocol='pkg_quality',
                    variant=dict(perturbation=kind, level=level)))
    load_tool('plots').main(['curve', str(results), '--x', 'level', '--group', 'perturbation',
               '--protocol', 'pkg_quality', '--out', str(tmp_path / 'robustness')])
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / 'robustness.png'), str(tmp_path / 'robustness.pdf')]
    assert all(Path(p).stat().st_size > 1000 for p in printed)


def efficiency_rows():
    """SR = 10 * T + 20 * fraction + seed (ViterbiPlanNet), 5 less without the PKG."""
    return [ResultRow(method, seed, horizon,
                      {'success_rate': 10 * horizon + 20 * fraction + seed - drop},
                      variant=dict(train_fraction=fraction))
            for seed in range(3) for horizon in (3, 4, 5, 6) for fraction in (0.1, 0.5, 1.0)
            for method, drop in (('ViterbiPlanNet', 0), ('w/o PKG', 5))]


def test_sample_efficiency_points_per_method_and_horizon(tmp_path):
    points = efficiency_points(efficiency_rows())
    assert list(points)[:2] == [('ViterbiPlanNet', 3), ('w/o PKG', 3)]  # ordered by T
    assert len(points) == 8
    line = points[('w/o PKG', 5)]
    assert [p[0] for p in line] == [10.0, 50.0, 100.0]  # percent of the training windows
    assert [p[1] for p in line] == pytest.approx([50 + 20 * f + 1 - 5 for f in (0.1, 0.5, 1.0)])
    assert all(low <= mean <= high and high > low for _, mean, low, high in line)
    with pytest.raises(ValueError, match="variant 'train_fraction'"):
        efficiency_points([ResultRow('A', 0, 3, {'success_rate': 1.0})])
    assert_publication_files(plot_sample_efficiency(efficiency_rows(), tmp_path / 'eff',
                                                    dashed=['w/o PKG']))


def pkg_rows():
    rows = [ResultRow('VPN', seed, 3, {'success_rate': 40.0 + seed},
                      variant=dict(perturbation='none', level=0.0)) for seed in range(2)]
    for kind, levels in (('edge_dropout', (0.1, 0.5)), ('weight_noise', (0.5, 1.0)),
                         ('data_fraction', (0.5, 0.25)), ('label_noise', (0.25,))):
        rows += [ResultRow('VPN', seed, 3, {'success_rate': 30.0 + seed - level},
                           variant=dict(perturbation=kind, level=level))
                 for seed in range(2) for level in levels]
    return rows


def test_pkg_quality_panels(tmp_path):
    (dropout, noise, data), references = pkg_quality_panels(pkg_rows())
    assert list(dropout) == [('VPN', 'edge dropout')] and not references
    assert list(noise) == [('VPN', 'weight noise')]
    assert list(data) == [('VPN', 'partial data'), ('VPN', 'label noise')]
    assert [c for x, m, _, _ in dropout['VPN', 'edge dropout'] for c in (x, m)] == \
        pytest.approx([0.0, 40.5, 10.0, 30.4, 50.0, 30.0])  # x in percent; reference at 0
    assert [x for x, *_ in noise['VPN', 'weight noise']] == [0.0, 0.5, 1.0]  # sigma as is
    # partial data: level = fraction kept, x = percent missing
    assert [c for x, m, _, _ in data['VPN', 'partial data'] for c in (x, m)] == \
        pytest.approx([0.0, 40.5, 50.0, 30.0, 75.0, 30.25])
    with pytest.raises(ValueError, match="perturbation 'blur'"):
        pkg_quality_panels([ResultRow('VPN', 0, 3, {'success_rate': 1.0},
                                      variant=dict(perturbation='blur', level=0.1))])
    assert_publication_files(plot_pkg_quality(pkg_rows(), tmp_path / 'pkg'), max_width=6.9)


def write_dump(path, solved, gt):
    path.write_text(json.dumps(dict(sample_idx=list(range(len(solved))), gt_plan=gt.tolist(),
                                    pred_plan=gt.tolist(),
                                    scores=dict(success_rate=[100.0 * s for s in solved]))))
    return str(path)


def overlap_rows(tmp_path, num_windows=40, seeds=(0, 1, 2)):
    """Random per-window successes of two methods; returns (rows, {(method, seed): solved})."""
    rng = np.random.default_rng(0)
    gt = rng.integers(0, 9, size=(num_windows, 3))
    rows, solved = [], {}
    for seed in seeds:
        for method in ('VPN', 'Base'):
            solved[method, seed] = rng.random(num_windows) < 0.4
            dump = write_dump(tmp_path / f'{method}_{seed}.json', solved[method, seed], gt)
            rows.append(ResultRow(method, seed, 6, {'success_rate': 0.0}, per_sample_file=dump))
    return rows, solved


def test_error_overlap_counts_match_set_arithmetic(tmp_path):
    rows, solved = overlap_rows(tmp_path)
    overlap = error_overlap(rows, 'VPN', 'Base', horizon=6)
    fixed = introduced = both_fail = both_solve = 0
    fixed_pct = []
    for seed in range(3):
        ours = {i for i, s in enumerate(solved['VPN', seed]) if s}
        theirs = {i for i, s in enumerate(solved['Base', seed]) if s}
        every = set(range(40))
        fixed += len(ours - theirs)
        introduced += len(theirs - ours)
        both_solve += len(ours & theirs)
        both_fail += len(every - ours - theirs)
        fixed_pct.append(100 * len(ours - theirs) / len(every - theirs))
    assert (overlap.fixed, overlap.introduced, overlap.both_solve, overlap.both_fail) == (
        fixed, introduced, both_solve, both_fail)
    assert overlap.total == 120 and overlap.seeds == [0, 1, 2]
    assert overlap.fixed_pct[0] == pytest.approx(np.mean(fixed_pct))
    assert f'| VPN | Base | 3 | 120 | {both_fail} | {fixed} | {introduced} |' in overlap_table(
        [overlap])
    paths = plot_error_overlap([overlap], tmp_path / 'venn')
    assert_publication_files(paths)
    assert paths[2].read_text().startswith(overlap_table([overlap]))


def test_error_overlap_refuses_mismatched_dumps(tmp_path):
    rows, _ = overlap_rows(tmp_path, seeds=(0,))
    other = np.zeros((40, 3), dtype=int)
    rows[1].per_sample_file = write_dump(tmp_path / 'other.json', [True] * 40, other)
    with pytest.raises(ValueError, match='sample 0: ground truth'):
        error_overlap(rows, 'VPN', 'Base')
    with pytest.raises(ValueError, match="'LLM' is not among the valid names"):  # pass 19 P08
        error_overlap(rows, 'LLM', 'Base')
    rows[1].per_sample_file = str(tmp_path / 'missing.json')
    with pytest.raises(FileNotFoundError, match='missing.json'):
        error_overlap(rows, 'VPN', 'Base')


def test_cli_efficiency_pkg_quality_and_overlap(tmp_path, capsys):
    rows, _ = overlap_rows(tmp_path)
    for name, made in (('eff', efficiency_rows()), ('pkg', pkg_rows()), ('ovl', rows)):
        for row in made:
            append_result(tmp_path / f'{name}.jsonl', row)
    tool = load_tool('plots')
    tool.main(['efficiency', str(tmp_path / 'eff.jsonl'), '--dashed', 'w/o PKG',
               '--out', str(tmp_path / 'f1')])
    tool.main(['pkg-quality', str(tmp_path / 'pkg.jsonl'), '--out', str(tmp_path / 'f2')])
    tool.main(['overlap', str(tmp_path / 'ovl.jsonl'), '--pair', 'VPN', 'Base', '--pair',
               'Base', 'VPN', '--out', str(tmp_path / 'f3')])
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / name) for name in (
        'f1.png', 'f1.pdf', 'f2.png', 'f2.pdf', 'f3.png', 'f3.pdf', 'f3.md')]
    table = (tmp_path / 'f3.md').read_text().splitlines()
    assert table[2].startswith('| VPN | Base |') and table[3].startswith('| Base | VPN |')


def test_log_ticks_on_a_wide_range_follow_the_1_2_5_series():
    ticks = log_ticks(0.855e6 / 1.15, 5.55e6 * 1.15)
    assert ticks == [1e6, 2e6, 5e6]


def test_many_methods_get_distinct_colour_and_marker_pairs():
    from vpn_plugin.protocol.plots import method_style
    styles = [tuple(method_style(i).values()) for i in range(20)]
    assert len(set(styles)) == 20
    first = styles[:8]
    assert len({c for c, _ in first}) == 8 and len({m for _, m in first}) == 8


def test_params_plot_keeps_planners_without_parameters_and_names_the_uncounted(tmp_path,
                                                                               capsys):
    from vpn_plugin.protocol.plots import keep_y_span, methods_without_count
    rows = [r for r in study_rows() if r.variant['train_fraction'] == 1.0]
    rows += [ResultRow('Uniform', s, 3, {'success_rate': 5.0}, params=0)
                           for s in range(3)]
    rows += [ResultRow('LLM', s, 3, {'success_rate': 9.0}, params=None) for s in range(3)]
    points = params_points(rows, 'success_rate')
    assert points['Uniform'] == (0, 5.0, 5.0, 5.0) and 'LLM' not in points
    assert methods_without_count(rows, 'success_rate') == ['LLM']
    for row in rows:
        append_result(tmp_path / 'r.jsonl', row)
    paths = load_tool('plots').main(['params', str(tmp_path / 'r.jsonl'), '--out',
                                     str(tmp_path / 'c')])
    assert_publication_files(paths)
    assert 'not drawn, no parameter count in their rows: LLM' in capsys.readouterr().err
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    keep_y_span(ax, 30.9, 31.2, percent=True)  # one method, a narrow CI
    low, high = ax.get_ylim()
    assert high - low >= 10 and low < 30.9 and high > 31.2
    keep_y_span(ax, 0.5, 99.0, percent=True)
    assert ax.get_ylim() == (0.0, 100.0)
    plt.close(fig)


def test_overlap_figure_says_its_width(tmp_path):
    from vpn_plugin.protocol.plots import TWO_COLUMNS, overlap_width
    rows, _ = overlap_rows(tmp_path)
    overlap = error_overlap(rows, 'VPN', 'Base')
    two = plot_error_overlap([overlap, overlap], tmp_path / 'two')
    assert_publication_files(two)  # two comparisons fit one column
    assert 'one column wide (3.3 in)' in two[2].read_text()
    assert (overlap_width(1), overlap_width(3)) == (ONE_COLUMN, TWO_COLUMNS)


# ------------------------------------------ issue 34: a figure groups rows as report.py does
def figure_texts(monkeypatch):
    """Every text of the figures drawn while the returned list is alive (titles, legends,
    notes), captured just before saving."""
    import matplotlib.text
    from vpn_plugin.protocol import plots
    texts, save = [], plots.save_figure

    def recording(fig, out_stem):
        fig.canvas.draw()  # tick labels are made at draw time
        texts.extend(t.get_text() for t in fig.findobj(matplotlib.text.Text))
        texts.append(f'<{len(fig.axes)} axes>')
        return save(fig, out_stem)
    monkeypatch.setattr(plots, 'save_figure', recording)
    return texts


def two_horizon_rows():
    """The issue's example: T=3 and T=4 rows of one study, T=4 higher by 10 points."""
    return [ResultRow('ViterbiPlanNet', seed, horizon,
                      {'mean_accuracy': 10.0 * horizon + 20 * fraction + seed},
                      variant=dict(train_fraction=fraction), dataset='niv')
            for seed in range(3) for horizon in (3, 4) for fraction in (0.1, 0.5, 1.0)]


def test_curve_draws_a_panel_per_horizon_and_never_averages_them(tmp_path, monkeypatch):
    from vpn_plugin.protocol.plots import seeds_per_point
    panels = curve_values(two_horizon_rows(), 'train_fraction', 'mean_accuracy')
    assert list(panels) == [('niv', 3), ('niv', 4)]
    for (_, horizon), lines in panels.items():
        by_x = lines['ViterbiPlanNet']
        assert {x: np.mean(v) for x, v in by_x.items()} == pytest.approx(
            {f: 10.0 * horizon + 20 * f + 1 for f in (0.1, 0.5, 1.0)})  # that horizon only
        assert seeds_per_point(lines) == [3, 3, 3]  # 3 seeds per point, not 6 rows
    with pytest.raises(ValueError, match=r'horizons T=3, 4: .*--horizon'):
        curve_points(two_horizon_rows(), 'train_fraction', 'mean_accuracy')
    texts = figure_texts(monkeypatch)
    paths = plot_curves(two_horizon_rows(), 'train_fraction', 'mean_accuracy', tmp_path / 'c')
    assert_publication_files(paths, max_width=6.9)
    assert {'T=3', 'T=4', '<2 axes>', 'Share of training windows'} <= set(texts)
    assert 'Bands: 90% bootstrap CI over 3 seeds per point\nFeatures: not recorded in the rows.' \
        in texts
    assert {'0.1', '0.5', '1'} <= set(texts)  # every plotted x value is a tick label


def test_a_point_never_pools_two_run_settings_or_a_seed_twice():
    rows = two_horizon_rows()
    rows[0].config = 'configs/other.py'
    with pytest.raises(ValueError, match="'ViterbiPlanNet'.*T=3.*differ in config"):
        curve_values(rows, 'train_fraction', 'mean_accuracy')
    twice = two_horizon_rows() + [two_horizon_rows()[0]]
    with pytest.raises(ValueError, match="two rows of 'ViterbiPlanNet' seed 0"):
        efficiency_points(twice, 'mean_accuracy')
    mixed = efficiency_rows() + [ResultRow('ViterbiPlanNet', 0, 3, {'success_rate': 1.0},
                                           variant=dict(train_fraction=0.1), dataset='coin')]
    with pytest.raises(ValueError, match=r"datasets '', 'coin': .*--dataset"):
        efficiency_points(mixed)
    with pytest.raises(ValueError, match=r'horizons T=3, 4: .*--horizon'):
        pkg_quality_panels(pkg_rows() + [ResultRow('VPN', 0, 4, {'success_rate': 1.0},
                                                   variant=dict(perturbation='none',
                                                                level=0.0))])


def test_overlap_and_params_refuse_a_horizon_mix(tmp_path):
    rows, _ = overlap_rows(tmp_path)
    other = [ResultRow(r.method, r.seed, 3, r.metrics, per_sample_file=r.per_sample_file)
             for r in rows]
    with pytest.raises(ValueError, match=r'horizons T=3, 6: .*--horizon'):
        error_overlap(rows + other, 'VPN', 'Base')
    assert error_overlap(rows + other, 'VPN', 'Base', horizon=6).total == 120
    with pytest.raises(ValueError, match=r'^no rows at T=5; present: T=3, 6$'):
        error_overlap(rows + other, 'VPN', 'Base', horizon=5)
    params = [ResultRow('A', s, h, {'success_rate': 1.0}, params=5)
              for s in range(2) for h in (3, 4)]
    with pytest.raises(ValueError, match=r'horizons T=3, 4'):
        params_points(params, 'success_rate')


def test_cli_horizon_without_rows_names_the_horizons_present(tmp_path, capsys):
    for row in two_horizon_rows():
        row.params = 10
        append_result(tmp_path / 'r.jsonl', row)
    tool = load_tool('plots')
    for kind in (['params'], ['curve', '--x', 'train_fraction'], ['efficiency']):
        with pytest.raises(SystemExit) as exit_:
            tool.main(kind + [str(tmp_path / 'r.jsonl'), '--horizon', '5', '--metric',
                              'mean_accuracy', '--out', str(tmp_path / 'f')])
        assert str(exit_.value.code).startswith('error: no rows at T=5; present: T=3, 4\n')
    paths = tool.main(['curve', str(tmp_path / 'r.jsonl'), '--x', 'train_fraction',
                       '--horizon', '3', '--metric', 'mean_accuracy', '--out',
                       str(tmp_path / 'one')])
    assert_publication_files(paths)  # one horizon: one panel, one column


def test_a_method_has_one_colour_in_every_figure():
    from vpn_plugin.protocol.plots import distinct_colours, figure_styles, method_styles
    alone = method_styles(['ViterbiPlanNet'])['ViterbiPlanNet']
    for others in (['SCHEMA', 'KEPP'], ['CEFITO', 'PDPP', 'Base Model'], ['Some new method']):
        assert method_styles(others + ['ViterbiPlanNet'])['ViterbiPlanNet'] == alone
        assert figure_styles(others + ['ViterbiPlanNet'])['ViterbiPlanNet'] == alone
    names = ['ViterbiPlanNet', 'SCHEMA', 'PDPP', 'KEPP', 'CEFITO', 'Base Model']
    colours = [method_styles([m])[m]['color'] for m in names]
    assert len(set(colours)) == len(names)  # the main methods: six colours
    assert method_styles(['My method'])['My method'] == method_styles(['x', 'My method'])[
        'My method']  # an unknown name: the same slot from its name in every figure
    # a variant beside its family gets a colour of its own, the same in every such figure
    venn = distinct_colours(['SCHEMA w/o PKG', 'SCHEMA w/ PKG', 'ViterbiPlanNet'])
    assert len(set(venn.values())) == 3 and venn['SCHEMA w/ PKG'] == method_styles(
        ['SCHEMA'])['SCHEMA']['color']
    assert distinct_colours(['ViterbiPlanNet', 'SCHEMA w/ PKG', 'SCHEMA w/o PKG']) == venn


def test_figures_of_shortened_runs_say_so(tmp_path, monkeypatch):
    texts = figure_texts(monkeypatch)
    rows = [r for r in study_rows() if r.variant['train_fraction'] == 1.0]
    for row in rows:
        row.shortened = 'max_epochs=3' if row.method == 'VPN' else ''
    plot_params_vs_metric(rows, 'success_rate', tmp_path / 'p')
    assert 'VPN†' in texts and 'Base' in texts
    assert any('† shortened runs: max_epochs=3' in t for t in texts)
    texts.clear()
    overlap, _ = overlap_rows(tmp_path)
    for row in overlap:
        row.shortened = 'limit=10'
    plot_error_overlap([error_overlap(overlap, 'VPN', 'Base')], tmp_path / 'v')
    assert any('† shortened runs: limit=10' in t for t in texts)
    assert any(t.startswith('VPN† fails') for t in texts)


def test_overlap_percentages_name_their_denominators(tmp_path, monkeypatch):
    texts = figure_texts(monkeypatch)
    rows, _ = overlap_rows(tmp_path)
    overlap = error_overlap(rows, 'VPN', 'Base')
    plot_error_overlap([overlap], tmp_path / 'v')
    note = next(t for t in texts if t.startswith('both solve')).replace('\n  ', ' ')
    assert f"fixed: {overlap.fixed_pct[0]:.1f}% of Base's failures" in note
    assert f'introduced: {overlap.introduced_pct[0]:.1f}% of its successes' in note


def test_qualitative_long_action_names_are_numbered_with_a_key(tmp_path, monkeypatch):
    texts = figure_texts(monkeypatch)
    names = [f'a long action name number {i} that does not fit' for i in range(5)]
    soft = np.full((3, 5), 0.2)
    plot_qualitative(soft, soft, names, tmp_path / 'q', gt_plan=[0, 1, 2], pred_plan=[0, 1, 2])
    key = next(t for t in texts if t.startswith('1  '))
    assert all(f'{i + 1}  {n}' in key.replace('\n    ', ' ') for i, n in enumerate(names))
    assert '0.25' in texts and '0.75' in texts  # intermediate colour-bar ticks
    texts.clear()
    plot_qualitative(soft, soft, ['a', 'b', 'c', 'd', 'e'], tmp_path / 'q', gt_plan=[0, 1, 2],
                     pred_plan=[0, 1, 2], shortened='checkpoint of epoch 100 of 500')
    assert '† shortened run: checkpoint of epoch 100 of 500' in texts and 'a' in texts


def test_a_point_pools_the_seeds_of_a_per_seed_pretraining_stage():
    """The frozen-encoder study pre-trains once per seed: settings.pretrained.seed is the
    row's seed, not another run setting; any other difference of the stage still is."""
    rows = [ResultRow('VPN', seed, 3, {'success_rate': 10.0 + seed},
                      variant=dict(train_fraction=fraction), settings=dict(
                          pretrained=dict(stage='pretrain_encoder', seed=seed, max_epochs=30)))
            for seed in range(3) for fraction in (0.1, 1.0)]
    assert [p[1] for p in efficiency_points(rows)[('VPN', 3)]] == pytest.approx([11.0, 11.0])
    rows[0].settings['pretrained']['max_epochs'] = 5
    with pytest.raises(ValueError, match='differ in settings'):
        efficiency_points(rows)


def two_seed_rows():
    return [ResultRow(method, seed, 3, {'success_rate': base + 1.5 * seed}, params=params)
            for seed in (0, 1) for method, base, params in (('VPN', 22.6, 5_549_602),
                                                            ('Base', 10.0, 5_549_602))]


def test_two_seeds_get_no_interval_in_figures_as_in_tables(tmp_path, monkeypatch):
    """Issue 38: plots.py params / overlap drew a '90% bootstrap CI over 2 seeds' where
    report.py refuses one; one rule (core.stats.seed_interval) decides for both."""
    from vpn_plugin.protocol.report import build_table
    rows = two_seed_rows()
    points = params_points(rows, 'success_rate')
    assert points['VPN'][1:] == (pytest.approx(23.35), None, None)
    cell = build_table(rows, ['success_rate']).cells[('VPN', ('', 3, 'success_rate'))]
    assert (cell.mean, cell.low, cell.high) == (points['VPN'][1], None, None)
    texts = figure_texts(monkeypatch)
    plot_params_vs_metric(rows, 'success_rate', tmp_path / 'p')
    assert any(t.startswith('No error bars: means over 2 seeds per point (no CI with fewer '
                            'than 3 seeds)') for t in texts)
    assert not any('bootstrap CI over 2' in t for t in texts)
    overlap_input, _ = overlap_rows(tmp_path, seeds=(0, 1))
    overlap = error_overlap(overlap_input, 'VPN', 'Base')
    assert overlap.fixed_pct[1:] == (None, None)
    table = overlap_table([overlap])
    assert f'| {overlap.fixed_pct[0]:.1f} |' in table and '[' not in table.split('\n')[2]
    assert '(n=2: no CI, fewer than 3 seeds)' in table
    # points of 3 seeds keep their bands, and the note says which points have none
    curve = curve_points(study_rows()[:-2], 'train_fraction', 'success_rate')
    assert curve['VPN'][-1][2] is None and curve['VPN'][0][2] is not None
    texts.clear()
    plot_curves(study_rows()[:-2], 'train_fraction', 'success_rate', tmp_path / 'c')
    assert any(t.startswith('Bands: 90% bootstrap CI over 3 seeds per point; points of 2 '
                            'seeds: mean only') for t in texts)
    from vpn_plugin.core.stats import seed_interval, shows_ci  # the one rule
    assert not shows_ci(2) and shows_ci(3)
    assert seed_interval([1.0, 2.0, 4.0])[1] is not None and seed_interval([1.0, 2.0])[1] is None


def test_markers_at_one_parameter_count_are_dodged(tmp_path, monkeypatch):
    """Issue 38: ViterbiPlanNet and the Base Model (same 5.55M parameters) hid each other's
    error bars; markers at one x are spread symmetrically in log space, a lone one stays."""
    from vpn_plugin.protocol import plots
    lines, save = {}, plots.save_figure

    def recording(fig, out_stem):
        for ax in fig.axes:
            lines.update({bars.get_label(): float(bars.lines[0].get_xdata()[0])
                          for bars in ax.containers})
        return save(fig, out_stem)
    monkeypatch.setattr(plots, 'save_figure', recording)
    texts = figure_texts(monkeypatch)
    rows = [ResultRow(m, seed, 3, {'success_rate': 20.0 + seed}, params=5_549_602)
            for seed in range(3) for m in ('VPN', 'Base')]
    plot_params_vs_metric(rows, 'success_rate', tmp_path / 'p')
    assert lines['VPN'] != lines['Base']
    assert any(plots.DODGED_NOTE in ' '.join(text.split()) for text in texts)  # the note says so
    texts.clear()
    plot_params_vs_metric([r for r in rows if r.method == 'VPN'], 'success_rate', tmp_path / 'q')
    assert texts and not any(plots.DODGED_NOTE in text for text in texts)  # nothing dodged
    drawn, spread = plots.dodged_positions({'A': (5e6, 20.0, 19.0, 21.0),
                                            'B': (5e6, 20.5, None, None),
                                            'C': (1e5, 20.0, 19.0, 21.0)}, log=True)
    assert drawn['C'] == pytest.approx(1e5) and spread == [['A', 'B']]
    assert np.log10(drawn['B']) - np.log10(drawn['A']) == pytest.approx(plots.DODGE_DECADES)
    assert np.sqrt(drawn['A'] * drawn['B']) == pytest.approx(5e6)
    assert plots.dodged_positions({'U': (0, 3.0, None, None), 'L': (0, 3.0, None, None)},
                                  log=False)[0] == {
        'U': pytest.approx(-plots.DODGE_ZERO / 2), 'L': pytest.approx(plots.DODGE_ZERO / 2)}


def test_pkg_quality_reference_key_says_when_no_band_is_drawn(tmp_path, monkeypatch):
    """Issue 38: the caption promised a band around the graph-less reference that was not
    drawn (its seeds agreed: an interval of width 0); the key says what the line is."""
    texts = figure_texts(monkeypatch)
    rows = [ResultRow('VPN', seed, 3, {'success_rate': 30.0 - 10 * level + seed},
                      variant=dict(perturbation=kind, level=level))
            for seed in range(3) for kind, level in (('none', 0.0), ('edge_dropout', 0.5))]
    rows += [ResultRow('SCHEMA w/o PKG', seed, 3, {'success_rate': 4.05},
                       variant=dict(perturbation='none', level=0.0)) for seed in range(3)]
    plot_pkg_quality(rows, tmp_path / 'pq')
    assert 'SCHEMA w/o PKG (line: mean; no band: every seed gives 4.0)' in texts
    from vpn_plugin.protocol.plots import reference_band
    assert reference_band((5.0, 4.0, 6.0)) == 'line: mean, band: 90% CI'
    assert reference_band((5.0, None, None)) == 'line: mean; no band (fewer than 3 seeds)'
    assert reference_band((4.05, 3.9, 4.2), y_span=25.0) == (
        'line: mean 4.0; 90% CI [3.9, 4.2], narrower than the line')


def test_kept_results_redraw_the_same_overlap(tmp_path, monkeypatch):
    """tools/keep_results.py: the rows as they were, the dumps of the named methods copied
    beside them (the overlap figure reads the copies), the others' dump paths emptied."""
    from vpn_plugin.protocol.results import read_results
    from test_hostile_tools import user_error
    rows, _ = overlap_rows(tmp_path)
    rows.append(ResultRow('Other', 0, 6, {'success_rate': 0.0}, per_sample_file=str(
        tmp_path / 'VPN_0.json')))
    results = tmp_path / 'run' / 'results.jsonl'
    for row in rows:
        append_result(results, row)
    monkeypatch.chdir(tmp_path)
    load_tool('keep_results').main([str(results), '--out', 'kept/niv.jsonl', '--dumps', 'VPN',
                                    'Base'])
    kept = read_results(tmp_path / 'kept/niv.jsonl')
    assert [(r.method, r.seed, r.metrics) for r in kept] == [(r.method, r.seed, r.metrics)
                                                             for r in rows]
    assert {r.per_sample_file for r in kept if r.method == 'Other'} == {''}
    assert all(r.per_sample_file.startswith(str(tmp_path / 'kept/niv/'))
               for r in kept if r.method != 'Other')
    assert {r.work_dir for r in kept} == {''}  # the run's work dirs are not kept
    written = [json.loads(line) for line in (tmp_path / 'kept/niv.jsonl').read_text().splitlines()]
    assert all(r['per_sample_file'].startswith('niv/') for r in written if r['method'] != 'Other')
    original = error_overlap(rows[:-1], 'VPN', 'Base')
    for dump in tmp_path.glob('*_[0-9].json'):
        dump.unlink()  # the run's dumps are gone: the copies remain
    again = error_overlap(kept, 'VPN', 'Base')
    assert (again.fixed, again.introduced, again.both_fail, again.seeds) == (
        original.fixed, original.introduced, original.both_fail, [0, 1, 2])
    assert 'exists; give --overwrite' in user_error('keep_results', [
        results, '--out', 'kept/niv.jsonl'])


def test_keep_results_never_deletes_a_folder_it_did_not_write(tmp_path, monkeypatch):
    """Before: --overwrite removed <out without .jsonl>/ whatever it held: with --out
    run.jsonl beside the protocol folder run/, the very results being kept and every work dir
    in it."""
    from test_hostile_tools import user_error
    rows, _ = overlap_rows(tmp_path)
    results = tmp_path / 'run' / 'results.jsonl'
    for row in rows:
        append_result(results, row)
    monkeypatch.chdir(tmp_path)
    for dumps in (['VPN', 'Base'], ['VPN']):  # its own folder of dumps: replaced
        load_tool('keep_results').main([str(results), '--out', 'kept.jsonl', '--overwrite',
                                        '--dumps', *dumps])
    assert len(list((tmp_path / 'kept').iterdir())) == 3
    before = sorted(p.name for p in (tmp_path / 'run').iterdir())
    message = user_error('keep_results', [results, '--out', 'run.jsonl', '--overwrite'])
    assert f'{Path("run")}/ holds ' in message and 'does not name as a kept dump' in message
    assert sorted(p.name for p in (tmp_path / 'run').iterdir()) == before
    assert not (tmp_path / 'run.jsonl').exists()
    kept = sorted((tmp_path / 'kept').iterdir())
    (tmp_path / 'VPN_1.json').unlink()  # a dump gone: the kept folder stays as it was
    assert 'has no per-sample dump to keep' in user_error('keep_results', [
        results, '--out', 'kept.jsonl', '--overwrite', '--dumps', 'VPN'])
    assert sorted((tmp_path / 'kept').iterdir()) == kept
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith('.kept')) == []


@pytest.mark.parametrize('reference, method', [
    ('Base', 'VPN'),
    ('PKG + uniform emissions and a much longer name', 'ViterbiPlanNet with a long name too')])
def test_venn_labels_never_cover_each_other_or_leave_the_figure(tmp_path, monkeypatch,
                                                               reference, method):
    """Fourth hostile pass: with a long reference name the notes block (both solve, fixed,
    introduced) grew upward over the method's label."""
    import dataclasses
    import matplotlib.text
    from vpn_plugin.protocol import plots
    rows, _ = overlap_rows(tmp_path)
    overlap = dataclasses.replace(error_overlap(rows, 'VPN', 'Base'), reference=reference,
                                  method=method)
    boxes, save = {}, plots.save_figure

    def recording(fig, out_stem):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for text in fig.axes[0].findobj(matplotlib.text.Text):
            if text.get_text():
                boxes[text.get_text()] = text.get_window_extent(renderer)
        boxes['<figure>'] = fig.bbox
        return save(fig, out_stem)
    monkeypatch.setattr(plots, 'save_figure', recording)
    assert_publication_files(plot_error_overlap([overlap], tmp_path / 'venn'))
    labels = [t for t in boxes if t.endswith('fails') or t.startswith('both solve')]
    assert len(labels) == 3, list(boxes)
    for i, a in enumerate(labels):
        assert boxes['<figure>'].contains(boxes[a].x0, boxes[a].y0), a
        assert boxes['<figure>'].contains(boxes[a].x1, boxes[a].y1), a
        for b in labels[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)

"""Protocol figures: the plotted points are the seed means, files are PNG + PDF."""
import numpy as np
import pytest

from vpn_plugin.protocol.plots import (curve_points, params_points, plot_curves,
                                       plot_params_vs_metric, plot_qualitative)
from vpn_plugin.protocol.results import ResultRow


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
    points = params_points(study_rows(), 'success_rate')
    assert points['VPN'][0] == 1000 and points['VPN'][1] == pytest.approx(np.mean(
        [20 + s for s in range(3)] + [30 + s for s in range(3)] + [35 + s for s in range(3)]))
    assert plot_params_vs_metric(study_rows(), 'success_rate', tmp_path / 'p')[0].is_file()


def test_qualitative_figure_and_shape_check(tmp_path):
    rng = np.random.default_rng(0)
    names = [f'action {i}' for i in range(5)]
    emissions = rng.random((3, 5))
    soft = emissions / emissions.sum(1, keepdims=True)
    pkg = rng.random((5, 5))
    pkg /= pkg.sum(1, keepdims=True)
    paths = plot_qualitative(emissions, soft, pkg, names, tmp_path / 'q', gt_plan=[0, 1, 2],
                             pred_plan=[0, 3, 2], title='sample')
    assert all(p.is_file() for p in paths)
    with pytest.raises(ValueError, match=r'\(T, 5\)'):
        plot_qualitative(emissions[:, :4], soft, pkg, names, tmp_path / 'bad')


def test_curve_cli_groups_perturbations(tmp_path, capsys):
    """tools/plots.py curve on a results file, lines per PKG perturbation (PNG + PDF)."""
    import importlib.util
    from pathlib import Path
    from vpn_plugin.protocol.results import append_result
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
    path = Path(__file__).resolve().parents[1] / 'tools' / 'plots.py'
    spec = importlib.util.spec_from_file_location('tool_plots', path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.main(['curve', str(results), '--x', 'level', '--group', 'perturbation',
               '--protocol', 'pkg_quality', '--out', str(tmp_path / 'robustness')])
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / 'robustness.png'), str(tmp_path / 'robustness.pdf')]
    assert all(Path(p).stat().st_size > 1000 for p in printed)

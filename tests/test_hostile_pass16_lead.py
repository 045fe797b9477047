"""Lead fixes of session 11 (the thirteenth hostile pass's merge)."""
import json

import pytest

from vpn_plugin.outputs import KINDS


@pytest.mark.parametrize('extra, ours', [
    ({}, True),
    ({'horizon': 3, 'train_horizon': 6}, True),  # what tools/test.py writes since fixrows2
    ({'damaged_features': ['a.npz: 2 chunks unreadable']}, True),  # since fixleft
    ({'horizon': '3'}, False),
    ({'train_horizon': True}, False),
    ({'damaged_features': [3]}, False),
    ({'epoch': 3}, False),  # not a key of ours: another program's JSON
])
def test_a_metrics_json_of_tools_test_is_recognised_with_its_horizons(tmp_path, extra, ours):
    """Before: the horizons test.py now writes beside the numbers made its own metrics JSON
    'not recognisably an earlier output' (a second test into the same --out-metrics refused)."""
    path = tmp_path / 'metrics.json'
    path.write_text(json.dumps({'plan/success_rate': 27.4, 'not_compared': [], **extra}))
    assert KINDS['metrics'].recognise(path) is ours


def test_a_params_figure_keeps_its_legend_notes_and_markers_inside_one_column(monkeypatch):
    """passP F01 (noticed): with three methods and a smoke note, the legend's last row was cut
    at the figure's bottom edge, the shortened-runs line was one unwrapped line twice the
    column's width (a smoke reason repeats the --limit reason beside it: said twice), and two
    markers of 5.48M and 5.49M parameters were drawn at 5.28M and 5.72M (a fixed factor of
    spacing is a third of an axis whose counts lie within 1%)."""
    import numpy as np
    from test_report import make_rows
    from vpn_plugin.protocol import plots
    rows = (make_rows('VPN', [2.0, 3.0, 1.0, 4.0, 2.5], params=5_480_000)
            + make_rows('VPN (train T=4)', [0.5, 0.7, 0.4, 0.9, 0.6], params=5_490_000)
            + make_rows('PKG + uniform', [3.1] * 5, params=0))
    for row in rows:
        row.shortened = ('smoke: 1 epoch of 4 steps of 8 windows (config: 500 epochs); '
                         'limit=32 of 270 test windows' if row.method == 'VPN'
                         else 'limit=32 of 270 test windows')
    seen = {}

    def measure(fig, out_stem):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legend = fig.legends[0]
        seen['legend'] = legend.get_window_extent(renderer)
        seen['texts'] = [t.get_window_extent(renderer) for t in fig.findobj(
            lambda a: hasattr(a, 'get_text') and a.get_visible() and a.get_text().strip())]
        seen['figure'] = fig.bbox
        seen['note'] = legend.get_title().get_text()
        seen['x'] = {line.get_label(): float(np.asarray(line.get_xdata())[0])
                     for ax in fig.axes for line in ax.lines if not line.get_label()
                     .startswith('_')}
        seen['x'] |= {c.get_label(): float(c.lines[0].get_xdata()[0])
                      for ax in fig.axes for c in ax.containers}
        return []
    monkeypatch.setattr(plots, 'save_figure', measure)
    plots.plot_params_vs_metric(rows, 'success_rate', 'unused', horizon=3)
    figure, legend = seen['figure'], seen['legend']
    assert legend.y0 >= figure.y0 - 1 and legend.y1 <= figure.y1 + 1
    assert all(box.x1 <= figure.x1 + 1 and box.x0 >= figure.x0 - 1 for box in seen['texts'])
    assert seen['note'].count('limit=32 of 270 test windows') == 1
    for method, count in (('VPN', 5_480_000), ('VPN (train T=4)', 5_490_000)):
        assert abs(seen['x'][method] / count - 1) < 0.02, (method, seen['x'][method])
    assert seen['x']['VPN'] < seen['x']['VPN (train T=4)']  # spread in the order of counts

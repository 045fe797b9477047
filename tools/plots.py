"""Protocol figures (PNG + PDF): study curves, parameters vs SR, the qualitative figure.

    # metric vs a study setting (one line per method, or per variant group)
    .venv/bin/python tools/plots.py curve work_dirs/protocol/sample_efficiency/results.jsonl \
        --x train_fraction --out docs/figures/sample_efficiency
    .venv/bin/python tools/plots.py curve work_dirs/protocol/pkg_quality/results.jsonl \
        --x level --group perturbation --out docs/figures/pkg_quality
    # parameters vs success rate, one point per method
    .venv/bin/python tools/plots.py params work_dirs/protocol/standard/results.jsonl --horizon 3 \
        --out docs/figures/params_vs_sr
    # emissions / soft plan heatmaps of one test sample + the PKG
    .venv/bin/python tools/plots.py qualitative configs/vpn_crosstask_t3.py CKPT --index 0 \
        --out docs/figures/qualitative
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vpn_plugin.protocol import plots  # noqa: E402
from vpn_plugin.protocol.results import filter_rows, read_results  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='kind', required=True)
    curve = sub.add_parser('curve', help='metric vs a variant setting')
    curve.add_argument('results', nargs='+')
    curve.add_argument('--x', required=True, help='variant key on the x axis')
    curve.add_argument('--group', help='variant key naming the lines (default: method)')
    curve.add_argument('--log-x', action='store_true')
    params = sub.add_parser('params', help='parameters vs a metric')
    params.add_argument('results', nargs='+')
    params.add_argument('--horizon', type=int)
    for p in (curve, params):
        p.add_argument('--metric', default='success_rate')
        p.add_argument('--protocol')
        p.add_argument('--methods', nargs='+')
    quali = sub.add_parser('qualitative', help='heatmaps of one test sample')
    quali.add_argument('config')
    quali.add_argument('checkpoint')
    quali.add_argument('--index', type=int, default=0, help='test sample index')
    quali.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE')
    for p in (curve, params, quali):
        p.add_argument('--title', default='')
        p.add_argument('--out', required=True, help='output stem (writes .png and .pdf)')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.kind == 'qualitative':
        import vpn_plugin.mm  # noqa: F401  (registration)
        options = dict(item.split('=', 1) for item in args.cfg_options)
        data = plots.qualitative_from_checkpoint(args.config, args.checkpoint, args.index,
                                                 {k: _literal(v) for k, v in options.items()})
        title = args.title or data.pop('title')
        data.pop('title', None)
        paths = plots.plot_qualitative(**data, out_stem=args.out, title=title)
    else:
        rows = filter_rows(read_results(args.results), protocol=args.protocol,
                           methods=args.methods)
        if args.kind == 'curve':
            paths = plots.plot_curves(rows, args.x, args.metric, args.out, group_key=args.group,
                                      log_x=args.log_x, title=args.title)
        else:
            paths = plots.plot_params_vs_metric(rows, args.metric, args.out,
                                                horizon=args.horizon, title=args.title)
    for path in paths:
        print(path)


def _literal(text):
    import ast
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


if __name__ == '__main__':
    main()

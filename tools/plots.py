"""Protocol figures (PNG + PDF, publication grade) from results files and per-sample dumps.

    R=work_dirs/protocol
    # parameters vs success rate, one marker per method (90% CI over seeds)
    .venv/bin/python tools/plots.py params $R/standard/results.jsonl --horizon 3 \
        --out docs/figures/params_vs_sr
    # sample efficiency: colour = T, dashed = without the PKG
    .venv/bin/python tools/plots.py efficiency $R/sample_efficiency/results.jsonl \
        --dashed 'w/o PKG (uniform graph)' 'Base Model' --out docs/figures/sample_efficiency
    # PKG quality: edge dropout | weight noise | partial / noisy data
    .venv/bin/python tools/plots.py pkg-quality $R/pkg_quality/results.jsonl \
        --out docs/figures/pkg_quality
    # windows fixed / introduced (Venn of failures + table .md), from the per-sample dumps
    .venv/bin/python tools/plots.py overlap $R/pkg_and_task/results.jsonl --horizon 3 \
        --pair ViterbiPlanNet 'Base Model' --out docs/figures/error_overlap
    # the paper's three-set Venn (NIV T=6)
    .venv/bin/python tools/plots.py overlap $R/main_t6_niv/results.jsonl --horizon 6 \
        --sets 'SCHEMA w/o PKG' 'SCHEMA w/ PKG' ViterbiPlanNet --out docs/figures/error_overlap3
    # emissions / soft plan of one test window over the top-k actions of its task
    .venv/bin/python tools/plots.py qualitative configs/vpn_crosstask_t3.py CKPT --index 0 \
        --out docs/figures/qualitative
    # any metric vs any variant setting (one panel per dataset and horizon, or --horizon)
    .venv/bin/python tools/plots.py curve RESULTS --x level --group perturbation --out FIG

Every figure groups rows as report.py's tables do: a point pools the seeds of ONE run setting
(method, dataset, horizon, config, variant); methods from shortened runs carry a †, on synthetic
features a ‖, on unusable ones (random S3D weights) a ✗; the note names the features (rows of one
dataset on several feature sources are refused unless --allow-mixed-features).
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vpn_plugin.errors import (NON_NEGATIVE_INT, POSITIVE_INT, check_given_once,  # noqa: E402
                               check_names, parse_once, path_argument, tool_main)
from vpn_plugin.outputs import add_overwrite_argument, check_output, stem_files  # noqa: E402
# the figures and results readers (vpn_plugin.protocol: torch) are imported after the
# arguments are parsed (--help and refusals answer in ~0.1 s; tests/test_import_purity.py)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='kind', required=True)
    kinds = {name: sub.add_parser(name, help=text) for name, text in (
        ('curve', 'metric vs a variant setting'), ('params', 'parameters vs a metric'),
        ('efficiency', 'sample efficiency curves (T=3..6, dashed = without PKG)'),
        ('pkg-quality', 'three panels: edge dropout, weight noise, partial / noisy data'),
        ('overlap', 'test windows fixed / introduced between methods (Venn + table)'),
        ('qualitative', 'heatmaps of one test window'))}
    for name, p in kinds.items():
        if name != 'qualitative':
            p.add_argument('results', type=path_argument, nargs='+',
                           help='results files (.jsonl / .csv)')
            p.add_argument('--protocol')
            p.add_argument('--methods', nargs='+')
            p.add_argument('--horizon', type=POSITIVE_INT,
                           help='test horizon T of the rows to draw (a figure never pools '
                                'horizons: curve draws a panel per T, the others refuse a mix)')
            p.add_argument('--dataset', help='dataset of the rows to draw (curve: a panel per '
                                             'dataset; the others refuse a mix)')
            p.add_argument('--allow-mixed-features', action='store_true',
                           help='allow rows of one dataset trained or tested on different '
                                'feature sources (refused by default; the note names each)')
        if name not in ('qualitative', 'overlap'):
            p.add_argument('--metric', default='success_rate')
        p.add_argument('--out', type=path_argument,
                       required=True, help='output stem (writes .png and .pdf)')
        add_overwrite_argument(p, '<out>.png / .pdf (/ .md)')
    kinds['curve'].add_argument('--x', required=True, help='variant key on the x axis')
    kinds['curve'].add_argument('--group', help='variant key naming the lines (default: method)')
    kinds['curve'].add_argument('--log-x', action='store_true')
    kinds['efficiency'].add_argument('--dashed', nargs='+', default=[],
                                     help='methods without the PKG (drawn dashed)')
    sets = kinds['overlap'].add_mutually_exclusive_group(required=True)
    sets.add_argument('--pair', nargs=2, action='append', metavar=('METHOD', 'REFERENCE'),
                      help='one two-set Venn per pair')
    sets.add_argument('--sets', nargs=3, metavar='METHOD',
                      help='one three-set Venn of these methods (the paper\'s figure) and the '
                           'fixed / introduced table of each later method against each earlier')
    quali = kinds['qualitative']
    quali.add_argument('config', type=path_argument)
    quali.add_argument('checkpoint', type=path_argument)
    quali.add_argument('--index', type=NON_NEGATIVE_INT, default=0, help='test sample index')
    quali.add_argument('--top-k', type=POSITIVE_INT, default=8, help='actions shown')
    quali.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE')
    return parse_once(parser, argv)


def check_output_files(args) -> None:
    """<out>.png, <out>.pdf (and overlap's <out>.md table) may replace neither an input nor
    an existing file of another kind (vpn_plugin/outputs.py), checked before drawing."""
    inputs = ([args.config, args.checkpoint] if args.kind == 'qualitative'
              else list(args.results))
    kinds = ['figure', 'figure'] + (['overlap_table'] if args.kind == 'overlap' else [])
    suffixes = ('.png', '.pdf', '.md')[:len(kinds)]
    for path, kind in zip(stem_files(args.out, suffixes), kinds):
        check_output(path, kind, '--out', inputs, args.overwrite)


def figure_from_results(args, rows):
    from vpn_plugin.protocol import plots
    # seeds in order, as report.py's cells: a point's bootstrap draws positions, so the
    # rows' order in the file (a job array's tasks end in any order) must not move a band
    rows = sorted(rows, key=lambda row: row.seed)
    if args.kind == 'curve':
        return plots.plot_curves(rows, args.x, args.metric, args.out, group_key=args.group,
                                 log_x=args.log_x)
    if args.kind == 'params':
        missing = plots.methods_without_count(rows, args.metric, args.horizon)
        if missing:
            print(f'not drawn, no parameter count in their rows: {", ".join(missing)}',
                  file=sys.stderr)
        return plots.plot_params_vs_metric(rows, args.metric, args.out, horizon=args.horizon)
    if args.kind == 'efficiency':
        check_names(args.dashed, list(dict.fromkeys(r.method for r in rows)), '--dashed')
        return plots.plot_sample_efficiency(rows, args.out, metric=args.metric,
                                            dashed=args.dashed)
    if args.kind == 'pkg-quality':
        return plots.plot_pkg_quality(rows, args.out, metric=args.metric)
    if args.sets:
        return plots.plot_error_overlap3(plots.error_overlap3(rows, args.sets, args.horizon),
                                         args.out)
    overlaps = [plots.error_overlap(rows, method, reference, args.horizon)
                for method, reference in args.pair]
    return plots.plot_error_overlap(overlaps, args.out)


def qualitative_figure(args):
    import vpn_plugin.mm  # noqa: F401  (registration)
    from vpn_plugin.protocol import plots
    options = {key: _literal(value) for key, value in
               (item.split('=', 1) for item in args.cfg_options)}
    data = plots.qualitative_from_checkpoint(args.config, args.checkpoint, args.index, options)
    print(f'caption: {data.pop("caption")}', file=sys.stderr)
    return plots.plot_qualitative(**data, out_stem=args.out, k=args.top_k)


@tool_main
def main(argv=None):
    args = parse_args(argv)
    check_given_once(getattr(args, 'methods', None), '--methods',
                     'a figure draws each method once')  # as report.py's tables
    check_given_once(getattr(args, 'dashed', None), '--dashed', 'each line is dashed once')
    check_given_once(getattr(args, 'sets', None), '--sets',
                     'the diagram of three methods needs three different ones')
    for pair in getattr(args, 'pair', None) or ():
        check_given_once(pair, '--pair', 'a method compared with itself shares every error')
    check_given_once(map(tuple, getattr(args, 'pair', None) or ()), '--pair',
                     'the figure would draw the pair twice')
    from vpn_plugin.protocol import plots
    from vpn_plugin.protocol.provenance import check_feature_mix
    from vpn_plugin.protocol.results import (METRIC_RANGES, check_rows_match_configs,
                                             filter_rows, read_results, rename_methods)
    check_output_files(args)
    if args.kind == 'qualitative':
        paths = qualitative_figure(args)
    else:
        if getattr(args, 'metric', None):
            check_names([args.metric], METRIC_RANGES, '--metric')
        rows = filter_rows(read_results(args.results), protocol=args.protocol,
                           methods=args.methods)
        check_rows_match_configs(rows)
        rows = rename_methods(rows, [])  # rows trained at another horizon say so
        rows = plots.select_horizon(plots.select_dataset(rows, args.dataset), args.horizon)
        check_feature_mix(rows, args.allow_mixed_features)
        paths = figure_from_results(args, rows)
    for path in paths:
        print(path)
    return paths


def _literal(text):
    import ast
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


if __name__ == '__main__':
    main()

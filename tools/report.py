"""Paper tables (Markdown + LaTeX) from protocol results files.

Example::

    python tools/report.py work_dirs/protocol/standard/results.jsonl \
        --metrics success_rate mean_accuracy miou_set --out docs/results_standard

writes ``docs/results_standard.md`` and ``docs/results_standard.tex`` and prints the Markdown
(``--format latex``: the LaTeX; each ends with one newline, so shell redirection gives a
complete file).
Statistics follow the paper by default: ``mean ± (p95 - p5)`` of K=1000 bootstrap resamples
of the seeds, improvements resample each method's seeds independently; ``--ci-style
half-width`` and ``--paired`` switch to the other conventions (the caption says which).
The results-file format is documented in ``vpn_plugin/protocol/results.py``.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vpn_plugin.core.stats import AUTHORS_RESAMPLES  # noqa: E402
from vpn_plugin.protocol.report import (CI_STYLES, DEFAULT_METRICS, build_table,  # noqa: E402
                                         to_latex, to_markdown)
from vpn_plugin.protocol.results import (filter_rows, mean_over_datasets,  # noqa: E402
                                          read_results, rename_methods)
from vpn_plugin.errors import NON_NEGATIVE_INT, POSITIVE_INT, tool_main  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('results', nargs='+', help='.jsonl/.json/.csv results files')
    parser.add_argument('--metrics', nargs='+', default=list(DEFAULT_METRICS))
    parser.add_argument('--protocol', help='keep only rows of this protocol')
    parser.add_argument('--dataset', help='keep only rows of this dataset')
    parser.add_argument('--horizons', nargs='+', type=POSITIVE_INT, help='keep only these test horizons')
    parser.add_argument('--variant', nargs='*', default=[], metavar='KEY=VALUE',
                        help='keep only rows whose variant has these settings')
    parser.add_argument('--methods', nargs='+', help='methods to show, in this order')
    parser.add_argument('--average-datasets', action='store_true',
                        help='one column per horizon: each seed\'s metric averaged over the '
                             'datasets of its rows (the dataset-independent PKG table)')
    parser.add_argument('--rename', nargs='+', default=[], metavar='OLD=NEW',
                        help='display names (applied after --methods selects rows)')
    parser.add_argument('--ours', help='method whose improvement is reported (default: best)')
    parser.add_argument('--reference', help='method to compare against (default: second best)')
    parser.add_argument('--ci-style', choices=CI_STYLES, default='width',
                        help="number after ±: 'width' = p95 - p5 (the paper's), "
                             "'half-width' = (p95 - p5) / 2")
    parser.add_argument('--paired', action='store_true',
                        help='improvements: paired bootstrap over the common seeds instead of '
                             "the paper's independent resampling of each method's seeds")
    parser.add_argument('--num-resamples', type=POSITIVE_INT, default=AUTHORS_RESAMPLES,
                        help='bootstrap resamples K of each cell (the authors: 1000)')
    parser.add_argument('--num-diff-resamples', type=POSITIVE_INT, default=AUTHORS_RESAMPLES,
                        help='bootstrap resamples K of each improvement')
    parser.add_argument('--allow-mixed-features', action='store_true',
                        help='allow rows of one dataset trained or tested on different feature '
                             'sources (refused by default; the caption names each)')
    parser.add_argument('--title', default='')
    parser.add_argument('--label', default='', help='LaTeX \\label')
    parser.add_argument('--digits', type=NON_NEGATIVE_INT, default=2)
    parser.add_argument('--out', help='output stem: writes <out>.md and <out>.tex')
    parser.add_argument('--format', choices=('markdown', 'latex'), default='markdown',
                        help='the table printed to stdout')
    return parser.parse_args(argv)


@tool_main
def main(argv=None):
    args = parse_args(argv)
    rows = filter_rows(read_results(args.results), protocol=args.protocol, dataset=args.dataset,
                       horizons=args.horizons, variant=args.variant, methods=args.methods)
    if args.average_datasets:
        rows = mean_over_datasets(rows)
    rows = rename_methods(rows, args.rename)
    order = [dict(i.split('=', 1) for i in args.rename).get(m, m) for m in args.methods or []]
    table = build_table(rows, args.metrics, methods=order or None, ours=args.ours,
                        reference=args.reference, ci_style=args.ci_style, paired=args.paired,
                        num_resamples=args.num_resamples,
                        num_diff_resamples=args.num_diff_resamples,
                        allow_mixed_features=args.allow_mixed_features)
    markdown = to_markdown(table, title=args.title, digits=args.digits)
    latex = to_latex(table, title=args.title, label=args.label, digits=args.digits)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix('.md').write_text(markdown)
        out.with_suffix('.tex').write_text(latex)
        print(f'wrote {out.with_suffix(".md")} and {out.with_suffix(".tex")}', file=sys.stderr)
    sys.stdout.write((latex if args.format == 'latex' else markdown).rstrip('\n') + '\n')


if __name__ == '__main__':
    main()

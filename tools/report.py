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
An incomplete protocol (rows that ``tools/run_protocol.py`` was asked for but has not written:
``results.expected`` beside ``results.jsonl``, ``vpn_plugin/protocol/expected.py``) gives no
table but the list of the missing rows (method, seed, T, config); ``--allow-missing`` makes the
table anyway, its incomplete cells marked ¶ and the caption saying what is missing.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vpn_plugin.tool_choices import AUTHORS_RESAMPLES, CI_STYLES, DEFAULT_METRICS  # noqa: E402
from vpn_plugin.errors import (NON_NEGATIVE_INT, POSITIVE_INT, at_least,  # noqa: E402
                               check_given_once, parse_once, path_argument, text_argument,
                               tool_main, write_texts_atomically)
from vpn_plugin.outputs import add_overwrite_argument, check_output, stem_files  # noqa: E402
# the table and results readers (vpn_plugin.core, vpn_plugin.protocol: torch) are imported
# after the arguments are parsed (--help and refusals answer in ~0.1 s;
# tests/test_import_purity.py)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('results', type=path_argument, nargs='+',
                        help='.jsonl/.json/.csv results files')
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
    parser.add_argument('--ours', type=text_argument,
                        help='method whose improvement is reported (default: best)')
    parser.add_argument('--reference', type=text_argument,
                        help='method to compare against (default: second best)')
    parser.add_argument('--ci-style', choices=CI_STYLES, default='width',
                        help="number after ±: 'width' = p95 - p5 (the paper's), "
                             "'half-width' = (p95 - p5) / 2")
    parser.add_argument('--paired', action='store_true',
                        help='improvements: paired bootstrap over the common seeds instead of '
                             "the paper's independent resampling of each method's seeds")
    parser.add_argument('--num-resamples', type=resamples_argument, default=AUTHORS_RESAMPLES,
                        help='bootstrap resamples K of each cell (the authors: 1000)')
    parser.add_argument('--num-diff-resamples', type=resamples_argument, default=AUTHORS_RESAMPLES,
                        help='bootstrap resamples K of each improvement')
    parser.add_argument('--allow-mixed-features', action='store_true',
                        help='allow rows of one dataset trained or tested on different feature '
                             'sources (refused by default; the caption names each)')
    parser.add_argument('--allow-missing', action='store_true',
                        help='make the table although rows of the protocol are missing (not '
                        'run yet, or failed): their cells are marked and the caption lists '
                        'them')
    parser.add_argument('--title', default='')
    parser.add_argument('--label', default='', type=latex_label, help='LaTeX \\label')
    parser.add_argument('--digits', type=NON_NEGATIVE_INT, default=2)
    parser.add_argument('--out', type=path_argument,
                        help='output stem: writes <out>.md and <out>.tex')
    parser.add_argument('--format', choices=('markdown', 'latex'), default='markdown',
                        help='the table printed to stdout')
    add_overwrite_argument(parser, '<out>.md / <out>.tex')
    return parse_once(parser, argv)


def output_files(args) -> tuple:
    """(<out>.md, <out>.tex), both checked (vpn_plugin/outputs.py) before either is written:
    never an input (a results file), nor an existing file of another kind."""
    if args.out is None:
        return ()
    files = stem_files(args.out, ('.md', '.tex'))
    return tuple(check_output(path, kind, '--out', args.results, args.overwrite)
                 for path, kind in zip(files, ('report_markdown', 'report_latex')))


def resamples_argument(text: str) -> int:
    """An argparse ``type``: a bootstrap K within the one bound (``stats.check_resamples``),
    written as every integer flag (``NON_NEGATIVE_INT``: ASCII digits, no ``_``)."""
    from vpn_plugin.core.stats import check_resamples
    value = NON_NEGATIVE_INT(text)
    try:
        return check_resamples(value, 'K')
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def latex_label(text: str) -> str:
    """An argparse ``type``: a LaTeX ``\\label`` key, written as it is (a brace, backslash,
    ``%`` or ``#`` would break the .tex file)."""
    bad = sorted({c for c in text if c in '{}\\%#'})
    if bad:
        raise argparse.ArgumentTypeError(f'{text!r} holds {" ".join(bad)}; expected a LaTeX '
                                         'label key such as tab:results')
    return text


@tool_main
def main(argv=None):
    args = parse_args(argv)
    from vpn_plugin.protocol.expected import missing_rows
    from vpn_plugin.protocol.report import build_table, to_latex, to_markdown
    from vpn_plugin.protocol.results import (filter_rows, mean_over_datasets, read_results,
                                             rename_methods)
    for flag, given in (('--methods', args.methods), ('--metrics', args.metrics)):
        check_given_once(given, flag, 'the table would show it twice')
    files = output_files(args)
    rows = read_results(args.results)
    missing = missing_rows(args.results, rows)
    kept = filter_rows(rows + missing, protocol=args.protocol, dataset=args.dataset,
                       horizons=args.horizons, variant=args.variant, methods=args.methods)
    rows, missing = split_missing(kept, missing, args)
    if args.average_datasets:
        rows = mean_over_datasets(rows)
    known = {r.method for r in rows + missing}
    before = rows + missing
    rows, missing = (rename_methods(rows, args.rename, known),
                     rename_methods(missing, args.rename, known))
    order = [name for m in args.methods or [] for name in dict.fromkeys(
        new.method for old, new in zip(before, rows + missing) if old.method == m) or [m]]
    def followed(name):  # a plain name given for rows named '(train T=6)' by the rule above
        new = {n.method for o, n in zip(before, rows + missing) if o.method == name}
        return new.pop() if len(new) == 1 and next(iter(new)).startswith(
            f'{name} (train T=') else name
    table = build_table(rows, args.metrics, methods=order or None, ours=followed(args.ours),
                        reference=followed(args.reference), ci_style=args.ci_style,
                        paired=args.paired,
                        num_resamples=args.num_resamples,
                        num_diff_resamples=args.num_diff_resamples, missing=missing,
                        allow_mixed_features=args.allow_mixed_features)
    markdown = to_markdown(table, title=args.title, digits=args.digits)
    latex = to_latex(table, title=args.title, label=args.label, digits=args.digits)
    if files:
        write_texts_atomically(dict(zip(files, (markdown, latex))), 'table')
        print(f'wrote {files[0]} and {files[1]}', file=sys.stderr)
    sys.stdout.write((latex if args.format == 'latex' else markdown).rstrip('\n') + '\n')


def split_missing(kept: list, missing: list, args) -> tuple:
    """(rows, missing rows) of the filtered ``kept``; without ``--allow-missing`` a missing
    row ends the report naming every one."""
    from vpn_plugin.protocol.expected import describe_row, expected_file
    ids = {id(row) for row in missing}
    missing = [row for row in kept if id(row) in ids]
    rows = [row for row in kept if id(row) not in ids]
    if not missing:
        return rows, missing
    listed = '\n'.join(f'  {describe_row(row)}' for row in missing)
    if not args.allow_missing:
        lists = ', '.join(str(expected_file(path)) for path in args.results
                          if expected_file(path).is_file())
        raise ValueError(
            f'{len(missing)} of the {len(kept)} results rows of the protocol are missing (not '
            f'run yet, or failed; the rows it was asked for: {lists}):\n{listed}\ngive '
            '--allow-missing to make the table anyway (its incomplete cells marked), or '
            'finish the protocol: rerunning the same tools/run_protocol.py command runs only '
            'the missing rows')
    if args.average_datasets:
        raise ValueError('--average-datasets needs every dataset\'s row of each seed; '
                         f'{len(missing)} are missing:\n{listed}')
    print(f'INCOMPLETE: {len(missing)} of the {len(kept)} results rows are missing (marked in '
          f'the table):\n{listed}', file=sys.stderr)
    return rows, missing


if __name__ == '__main__':
    main()

"""Keep the per-seed results of a run beside the docs, to redraw its tables and figures later.

Its work dirs are then no longer needed.

    .venv/bin/python tools/keep_results.py work_dirs/docs/niv_t6/main_t6_niv/results_*.jsonl \
        --out docs/results_data/main_t6_niv.jsonl --dumps ViterbiPlanNet 'SCHEMA w/ PKG'

Writes the rows of the results files (every field as it is: metrics, settings, features, ...)
to ``--out``; the ``PlanningMetric`` per-sample dumps of the ``--dumps`` methods (what
``tools/plots.py overlap`` reads) are copied into ``<out without .jsonl>/`` and the rows point
to the copies; the other rows' ``per_sample_file`` is emptied (their dumps are not kept, and a
path into a work dir that is gone would be a dangling reference), and so is every row's
``work_dir``. Refuses an existing ``--out`` unless ``--overwrite``, and never deletes a folder
of anything else than the dumps it kept.
"""
import argparse
import os
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vpn_plugin.errors import (check_names, parse_once, path_argument, tool_main,  # noqa: E402
                               write_text_atomically)
from vpn_plugin.outputs import check_output  # noqa: E402
# torch and OpenMMLab are imported after the arguments are parsed (--help and refusals answer
# in ~0.1 s; tests/test_import_purity.py)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('results', type=path_argument, nargs='+',
                        help='results files (.jsonl / .csv)')
    parser.add_argument('--out', type=path_argument, required=True,
                        help='the kept results file (.jsonl)')
    parser.add_argument('--dumps', nargs='+', default=[], metavar='METHOD',
                        help='methods whose per-sample dumps are copied beside it')
    parser.add_argument('--overwrite', action='store_true')
    return parse_once(parser, argv)


def check_own_folder(folder: Path, out: Path) -> None:
    """``folder`` (replaced by ``--overwrite``) must hold only the dumps that the kept file
    ``out`` names: a folder of anything else (a work dir, a protocol folder with the very
    results being kept) is never deleted."""
    from vpn_plugin.protocol.results import read_results
    if not folder.exists():
        return
    if not folder.is_dir():
        raise ValueError(f'{folder} is a file; keep_results.py writes the kept dumps into a '
                         f'folder of that name beside --out {out}: choose another --out')
    named = {Path(row.per_sample_file).resolve() for row in
             (read_results(out, empty_ok=True) if out.is_file() else []) if row.per_sample_file}
    foreign = sorted(p for p in folder.rglob('*') if p.is_dir() or p.resolve() not in named)
    if foreign:
        raise ValueError(f'{folder}/ holds {foreign[0]}, which {out} does not name as a kept '
                         'dump; --overwrite replaces only a folder of dumps that keep_results.py '
                         'wrote: choose another --out')


def check_distinct_rows(rows) -> None:
    """The same row twice (a results file copied into another) is refused, not kept twice."""
    from vpn_plugin.protocol.results import row_source
    seen, runs = {}, {}
    for row in rows:
        key = repr(replace(row, work_dir='', per_sample_file=''))
        if key in seen:
            raise ValueError(f'the row of {row.method!r} seed {row.seed} T={row.horizon} '
                             f'(protocol {row.protocol!r}) is in the results twice '
                             f'({row_source(seen[key])} and {row_source(row)}); every row '
                             'is kept once: drop the copy')
        seen[key] = row
        other = runs.setdefault(row.key(), row)
        if other is not row:  # one run's identity, other metrics: two measurements of it
            changed = sorted(name for name in set(row.metrics) | set(other.metrics)
                             if row.metrics.get(name) != other.metrics.get(name))
            raise ValueError(f'two rows of one run: {row.method!r} seed {row.seed} '
                             f'T={row.horizon} (protocol {row.protocol!r}) with other '
                             f'{", ".join(changed) or "paths or provenance"} '
                             + (f'({changed[0]} {other.metrics.get(changed[0])} and '
                                f'{row.metrics.get(changed[0])})' if changed else '')
                             + '; a kept file holds one row per run (report.py would refuse '
                             'it): keep the one you mean')


def check_complete(results: list, rows) -> None:
    """Rows a protocol was asked for but never wrote (``expected.missing_rows``) end the
    command naming them: the kept file has no list of the expected rows, so report.py would
    make the table of an incomplete protocol as a complete one, its cells of fewer seeds
    unmarked."""
    from vpn_plugin.protocol.expected import describe_row, expected_file, missing_rows
    missing = missing_rows(results, rows)
    if missing:
        lists = ', '.join(str(expected_file(path)) for path in results
                          if expected_file(path).is_file())
        listed = '\n'.join(f'  {describe_row(row)}' for row in missing)
        raise ValueError(f'{len(missing)} results row(s) of the protocol are missing (not run '
                         f'yet, or failed; the rows it was asked for: {lists}):\n{listed}\n'
                         'the kept file would not say so (report.py would make its table as '
                         'complete): finish the protocol first (rerunning the same '
                         'tools/run_protocol.py command runs only the missing rows)')


def kept_rows(rows, dumps: set, staging: Path, folder: Path) -> list:
    """The rows with ``per_sample_file`` pointing to a copy in ``folder`` (methods in
    ``dumps``) or emptied; the copies are written into ``staging`` (renamed to ``folder``
    once every copy is made: a failure leaves a kept folder as it was)."""
    from vpn_plugin.protocol.plots import check_row_dump
    kept, names = [], set()
    for row in rows:
        row = replace(row, work_dir='')  # the run's work dir is not kept
        if row.method not in dumps:
            kept.append(replace(row, per_sample_file=''))
            continue
        if not row.per_sample_file or not Path(row.per_sample_file).is_file():
            raise FileNotFoundError(f'the row of {row.method!r} seed {row.seed} T={row.horizon} '
                                    f'has no per-sample dump to keep (per_sample_file '
                                    f'{row.per_sample_file!r})')
        check_row_dump(row)  # a truncated dump or one of another test is not archived
        slug = re.sub(r'[^a-z0-9]+', '_', row.method.lower()).strip('_')
        variant = ''.join(f'_{k}-{v}' for k, v in sorted(row.variant.items()))
        name = f'{slug}_T{row.horizon}{variant}_seed{row.seed}.json'
        if name in names:
            raise ValueError(f'two kept rows would share the dump {folder / name}')
        names.add(name)
        staging.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(row.per_sample_file, staging / name)
        kept.append(replace(row, per_sample_file=str(folder / name)))
    return kept


@tool_main
def main(argv=None):
    args = parse_args(argv)
    from vpn_plugin.protocol.results import check_rows_match_configs, read_results, results_text
    check_output(args.out, 'results', '--out', args.results, args.overwrite)
    out = Path(args.out)  # as given: the rows name their dumps relative to it
    folder = out.with_suffix('')
    if (out.exists() or folder.exists()) and not args.overwrite:
        raise ValueError(f'{out} (or {folder}/) exists; give --overwrite to replace it')
    rows = read_results(args.results)
    check_distinct_rows(rows)
    check_rows_match_configs(rows)  # a row that report.py would refuse is not archived
    check_complete(args.results, rows)
    check_names(args.dumps, list(dict.fromkeys(r.method for r in rows)), '--dumps')
    check_own_folder(folder, out)
    staging = folder.with_name(f'.{folder.name}.{os.getpid()}.tmp')
    try:
        kept = kept_rows(rows, set(args.dumps), staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if folder.exists():
        shutil.rmtree(folder)
    if staging.exists():
        staging.rename(folder)
    write_text_atomically(out, results_text(kept, out), 'kept results')
    print(f'kept {len(kept)} rows in {out}'
          + (f', {sum(bool(r.per_sample_file) for r in kept)} per-sample dumps in {folder}/'
             if args.dumps else ''))


if __name__ == '__main__':
    main()

"""Keep the per-seed results of a run beside the docs, so that its tables and figures can be
redrawn later without the work dirs.

    .venv/bin/python tools/keep_results.py work_dirs/docs/niv_t6/main_t6_niv/results_*.jsonl \
        --out docs/results_data/main_t6_niv.jsonl --dumps ViterbiPlanNet 'SCHEMA w/ PKG'

Writes the rows of the results files (every field as it is: metrics, settings, features, ...)
to ``--out``; the ``PlanningMetric`` per-sample dumps of the ``--dumps`` methods (what
``tools/plots.py overlap`` reads) are copied into ``<out without .jsonl>/`` and the rows point
to the copies; the other rows' ``per_sample_file`` is emptied (their dumps are not kept, and a
path into a work dir that is gone would be a dangling reference). Refuses an existing ``--out``
unless ``--overwrite``.
"""
import argparse
import re
import shutil
import sys
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vpn_plugin.errors import check_names, tool_main, write_text_atomically  # noqa: E402
from vpn_plugin.outputs import check_output  # noqa: E402
from vpn_plugin.protocol.results import read_results  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('results', nargs='+', help='results files (.jsonl / .csv)')
    parser.add_argument('--out', required=True, help='the kept results file (.jsonl)')
    parser.add_argument('--dumps', nargs='+', default=[], metavar='METHOD',
                        help='methods whose per-sample dumps are copied beside it')
    parser.add_argument('--overwrite', action='store_true')
    return parser.parse_args(argv)


def kept_rows(rows, dumps: set, folder: Path) -> list:
    """The rows with ``per_sample_file`` pointing to a copy in ``folder`` (methods in
    ``dumps``) or emptied; the copies are written."""
    kept = []
    for row in rows:
        if row.method not in dumps:
            kept.append(replace(row, per_sample_file=''))
            continue
        if not row.per_sample_file or not Path(row.per_sample_file).is_file():
            raise FileNotFoundError(f'the row of {row.method!r} seed {row.seed} T={row.horizon} '
                                    f'has no per-sample dump to keep (per_sample_file '
                                    f'{row.per_sample_file!r})')
        slug = re.sub(r'[^a-z0-9]+', '_', row.method.lower()).strip('_')
        variant = ''.join(f'_{k}-{v}' for k, v in sorted(row.variant.items()))
        copy = folder / f'{slug}_T{row.horizon}{variant}_seed{row.seed}.json'
        if copy.exists():
            raise ValueError(f'two kept rows would share the dump {copy}')
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(row.per_sample_file, copy)
        kept.append(replace(row, per_sample_file=str(copy)))
    return kept


@tool_main
def main(argv=None):
    import json
    args = parse_args(argv)
    check_output(args.out, 'results', '--out', args.results, args.overwrite)
    out = Path(args.out)  # as given: the rows name their dumps relative to it
    folder = out.with_suffix('')
    if (out.exists() or folder.exists()) and not args.overwrite:
        raise ValueError(f'{out} (or {folder}/) exists; give --overwrite to replace it')
    rows = read_results(args.results)
    check_names(args.dumps, list(dict.fromkeys(r.method for r in rows)), '--dumps')
    if folder.exists():
        shutil.rmtree(folder)
    kept = kept_rows(rows, set(args.dumps), folder)
    write_text_atomically(out, ''.join(json.dumps(asdict(r), sort_keys=True) + '\n'
                                       for r in kept), 'kept results')
    print(f'kept {len(kept)} rows in {out}'
          + (f', {sum(bool(r.per_sample_file) for r in kept)} per-sample dumps in {folder}/'
             if args.dumps else ''))


if __name__ == '__main__':
    main()

"""The rows a protocol run was asked for, beside its results file: ``<results>.expected``.

``tools/run_protocol.py`` (every launcher: ``ProtocolRunner.expect``) adds the rows of the units
it selected (``--seeds``, ``--methods``, ``--horizons``), finished or not, before it runs or
submits them, so ``tools/report.py`` can tell a finished protocol from an incomplete one and
name what is missing (:func:`missing_rows`). The file ``results.jsonl`` has
``results.expected`` (``results_max_epochs-3.jsonl``: ``results_max_epochs-3.expected``): JSON
Lines, one row identity each (the fields of ``ResultRow.key`` and the unit's ``work_dir``),
the union over every call; written atomically under the results file's lock. A ``work_dir``
inside the file's folder is written relative to it and read from it, as the results rows'
paths are (a moved or copied protocol folder names its own work dirs); an absolute one of a
file written before (the folder's old place) is read as the folder's own work dir at the same
place under it when that exists (:func:`_moved_work_dir`). Results files
without one (written by hand, by ``llm_eval.py``, by an older version) are taken as complete.
"""
from __future__ import annotations

import json
from pathlib import Path

from vpn_plugin.errors import json_lines, read_text, unique_keys, write_text_atomically
from vpn_plugin.config_types import check_value
from .results import ROW_SCHEMA, ResultRow, locked_results, resolve_row_paths, row_line

SUFFIX = '.expected'
IDENTITY = ('protocol', 'dataset', 'method', 'config', 'seed', 'horizon', 'train_horizon',
            'variant', 'settings', 'work_dir')  # ResultRow.key's fields and where it runs


def expected_file(results_file) -> Path:
    """``results.jsonl`` -> ``results.expected``."""
    return Path(results_file).with_suffix(SUFFIX)


def add_expected(results_file, rows: list[ResultRow]) -> None:
    """Add ``rows`` (their identities) to the expected rows of ``results_file``."""
    path = expected_file(results_file)
    with locked_results(results_file):
        known = {row.key(): row for row in read_expected(results_file) or []}
        for row in rows:
            known.setdefault(row.key(), row)
        lines = [json.dumps({name: json.loads(row_line(row, path))[name] for name in IDENTITY},
                            sort_keys=True) for row in known.values()]
        write_text_atomically(path, ''.join(line + '\n' for line in lines), 'expected rows')


def read_expected(results_file) -> list[ResultRow] | None:
    """The expected rows of ``results_file`` (without metrics); None when it has no list."""
    path = expected_file(results_file)
    if not path.is_file():
        return None
    rows = []
    for number, line in enumerate(json_lines(read_text(path, 'expected rows')), 1):
        if not line.strip():
            continue
        try:
            fields = json.loads(line, object_pairs_hook=unique_keys(f'{path}:{number}',
                                                                    'expected row'))
            for name in IDENTITY:  # the same kinds as the results rows' (ROW_SCHEMA)
                check_value(f'{path}:{number}: field {name}', fields[name], ROW_SCHEMA[name])
            fields['work_dir'] = _moved_work_dir(fields['work_dir'], path.parent)
            rows.append(ResultRow(metrics={}, **{k: fields[k] for k in IDENTITY}))
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(f'{path}:{number}: not an expected row ({error}); the file is '
                             'written by tools/run_protocol.py: delete it to report without '
                             'it') from None
    return resolve_row_paths(rows, path)


def _moved_work_dir(work_dir, folder: Path):
    """An absolute ``work_dir`` that is gone (written before the relative form, at the protocol
    folder's old place) is the work dir at the same place under ``folder`` when one exists
    there (its last parts: ``<method>/T3/seed0``); else as written."""
    if not work_dir or not Path(work_dir).is_absolute() or Path(work_dir).exists():
        return work_dir
    parts = Path(work_dir).parts
    found = [i for i in range(1, len(parts)) if (folder / Path(*parts[i:])).is_dir()]
    return str(folder.resolve() / Path(*parts[min(found):])) if found else work_dir


def missing_rows(results_files, rows: list[ResultRow]) -> list[ResultRow]:
    """The expected rows of ``results_files`` that no row of ``rows`` has the identity of."""
    present = {row.key() for row in rows}
    missing = {}
    for results_file in [results_files] if isinstance(results_files, (str, Path)) \
            else results_files:
        expected = read_expected(results_file) or []
        check_expected_is_its_own(results_file, expected)
        for row in expected:
            if row.key() not in present:
                missing.setdefault(row.key(), row)
    return list(missing.values())


APPENDED_PROTOCOLS = ('llm',)  # rows tools/llm_eval.py may append to a protocol's results


def check_expected_is_its_own(results_file, expected: list[ResultRow]) -> None:
    """The expected rows must be of the protocol of the results file's rows: an ``.expected``
    copied beside another protocol's results would list that protocol's rows as missing and
    leave this one's gaps unmarked."""
    from .results import read_results
    if not expected:
        return
    own = {row.protocol for row in read_results(results_file, empty_ok=True)
           if row.protocol not in APPENDED_PROTOCOLS}
    named = {row.protocol for row in expected}
    if own and not own & named:
        raise ValueError(
            f'{expected_file(results_file)} lists the rows of protocol(s) {sorted(named)}, '
            f'while {results_file} holds rows of {sorted(own)}: it is the list of another '
            'results file (copied or renamed beside this one?); delete it (the table is then '
            'taken as complete) or put back the list its tools/run_protocol.py run wrote')


def describe_row(row: ResultRow) -> str:
    """``ViterbiPlanNet seed=2 T=3 configs/vpn_crosstask_t3.py`` (+ training horizon,
    variant and the run's --cfg-options when they say more)."""
    text = f'{row.method} seed={row.seed} T={row.horizon} {row.config}'
    if row.train_horizon not in (None, row.horizon):
        text += f' (trained at T={row.train_horizon})'
    if row.variant:
        text += ' ' + ', '.join(f'{k}={v}' for k, v in sorted(row.variant.items()))
    options = (row.settings or {}).get('cfg_options')
    if options:  # a row of the same method and seed with other options may be there
        text += ' with ' + ', '.join(f'{k}={v!r}' for k, v in sorted(options.items()))
    return text

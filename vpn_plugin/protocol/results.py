"""The results-file format shared by the protocol runner, the LLM planners and the report.

A results file holds one row per (run, test setting): one trained model (or one prompted
planner) with one seed, evaluated at one test horizon. Two encodings are accepted:

* **JSON Lines** (``.jsonl``, preferred: append-only, so interrupted protocols resume):
  one JSON object per line, exactly the fields below.
* **CSV** (``.csv``): the same fields; ``metrics`` become columns ``metric/<name>``,
  ``variant`` entries become ``variant/<name>``; ``params`` may be empty; ``settings`` and
  ``failures`` are JSON texts.

Fields of a row (their kinds are declared once, in :data:`ROW_SCHEMA`, and every row read is
held to them: a value of another kind is refused naming the file, line, field, value and kind,
``results.jsonl:3: field seed=True; expected an integer >= 0 ...``):

=============== ======== ===============================================================
field           type     meaning
=============== ======== ===============================================================
method          str      display name of the method (table row), e.g. ``ViterbiPlanNet``
seed            int      random seed of the run (a JSON integer: ``true`` is refused)
horizon         int      test horizon T (number of planned steps)
metrics         dict     metric name -> value in percent; the keys of
                         ``vpn_plugin.core.planning_metrics``: ``success_rate``,
                         ``mean_accuracy``, ``miou_set``, ``miou_legacy``,
                         ``first_accuracy``, ``last_accuracy`` (a subset is allowed),
                         each in [0, 100]; the protocol adds ``plan_entropy`` (in
                         [0, 64]) and ``plan_jsd`` (in [0, 1]) (decoding diversity in
                         bits, ``vpn_plugin.core.diversity``). Other names, values outside
                         these ranges and NaN are refused (:data:`METRIC_RANGES`)
metric_bounds   dict     metric name -> the largest value this row's evaluation could give
                         (default ``{}``): ``plan_entropy``'s is log2 of its largest group
                         of windows (an empirical distribution of n plans has at most
                         log2 n bits); a metric above its bound is refused
params          int|None number of model parameters (``None`` when not applicable)
dataset         str      ``crosstask`` | ``niv`` | ``coin`` | anything (default ``''``)
config          str      config file (or model name for prompted planners; default ``''``)
train_horizon   int|None horizon the model was trained at (``None`` = same as ``horizon``); an
                         untrained planner tested at another horizon than its run's records
                         its run's (its PKG is counted on those training windows)
protocol        str      protocol name, e.g. ``standard``, ``ablation`` (default ``''``)
variant         dict     study settings, e.g. ``{"train_fraction": 0.1}`` (default ``{}``)
per_sample_file str      optional path to the ``PlanningMetric`` per-sample dump
work_dir        str      optional run directory
shortened       str      why the run is not the full one, e.g. ``max_epochs=3``,
                         ``limit=100`` (``true`` is read as ``shortened``); empty or absent
                         = a full run. ``tools/report.py`` marks such rows (``†``).
pkg_source      str      ``test-set PKG`` when the run's PKG was not counted on its training
                         videos but read from a file (KEPP's ``model.released_graph``, as
                         KEPP's released graphs, which hold test videos; derived from the
                         config);
                         ``tools/report.py`` marks such rows (``§``) and the protocols
                         of the main table refuse them; empty = the run's own PKG
features        dict     what the model was trained and tested on
                         (``vpn_plugin.datasets.provenance``): ``kind`` (``synthetic``,
                         ``extracted``, ``random-weights``, ``converted``, ``user``,
                         ``none`` for planners that read no features, ``mixed``),
                         ``label`` (printed in every caption), ``fingerprint`` of the
                         feature folder, ``folder`` and the record's details (generator
                         and seed, recipe and weights hash, ...); ``trained_on`` when the
                         training read other features. Empty = not recorded (rows written
                         before this field). ``tools/report.py`` and ``tools/plots.py``
                         mark synthetic and unusable rows and refuse to mix sources
settings        dict     everything else that changes the result, part of the run's
                         identity (default ``{}``): protocol runs ``max_epochs``,
                         ``val_interval``, ``batch_size`` (``None`` = the config's),
                         ``cfg_options``, ``data_root`` (only when ``--data-root`` moved
                         the annotations: other windows, another row); LLM runs ``base_url``, ``temperature``,
                         ``max_tokens``, ``limit``, ``sample_seed``, ...
selection       str      which checkpoint was tested (default ``''``: not recorded), e.g.
                         ``unified: best plan/success_rate`` (held-out training videos),
                         ``authors: best plan/authors_selection`` (the test windows, as the
                         authors' scripts) or ``unified: last epoch``
failures        dict     failure kind -> number of windows that got no answer (request
                         failed after the retries; ``connection``, ``timeout``,
                         ``http_<status>``, ``malformed_response``); only rows written with
                         ``llm_eval.py --allow-failures`` have any (default ``{}``)
usage           dict     what a prompted run consumed (LLM rows; default ``{}``): the
                         backend's counts ``requests``, ``retries``, ``failed``,
                         ``cache_hits``, ``prompt_tokens`` / ``completion_tokens`` (paid
                         in this run), ``cached_prompt_tokens`` /
                         ``cached_completion_tokens`` (answered from the cache, paid
                         earlier); ``total_tokens`` (prompt + completion tokens of the
                         answers used, cached ones included), ``paid_tokens`` (of the
                         requests sent in this run); with ``llm_eval.py --price-per-1k``:
                         ``price_per_1k`` [prompt, completion], ``cost_of_answers`` and
                         ``cost_paid`` (in the price's unit; rows written before these
                         two have ``cost`` = the cost of the answers used)
caveats         dict     what the test recorded about its own trust (default ``{}``; rows
                         written before this field have none): ``changed_from_training``
                         (options of the test that differ from the checkpoint's
                         training, e.g. ``model.decode``), ``not_compared`` (what the
                         checkpoint did not record, so it was not compared, e.g. its
                         feature statistics), each a list of lines (or one '; '-joined
                         text, as test_metrics.json held it first); ``feature_scale`` (the
                         test features' mean / std far from the training features');
                         ``task_source`` = ``ground_truth`` (the true task given to the
                         planner: an oracle input, CEFITO's ``oracle_task``);
                         ``damaged_features`` ('<file>: <note>' of each test feature file
                         read that records a damaged video: extract_features' ``damage``;
                         'training file <file>: <note>' of each the checkpoint was trained
                         on); ``reduced_precision`` (the tested checkpoint's tensors stored
                         in a coarser float than the model's, float16 / bfloat16: the
                         model ran with their rounded values).
                         ``tools/report.py`` marks such rows, one mark per kind
=============== ======== ===============================================================

Identity (:meth:`ResultRow.key`): every field except ``metrics``, ``params``, the paths,
``shortened`` and ``pkg_source`` (derived from ``settings``), ``selection`` (derived from the
config), ``features`` (a record of the data the config read), ``failures``, ``usage``,
``metric_bounds`` and ``caveats``.
A results file holds one row per identity:
:func:`replace_result` swaps a rerun's row in, :func:`append_result` skips a row that is
already there.

Concurrency: every write (:func:`append_result`, :func:`replace_result`) reads and rewrites
the file holding its lock (:func:`locked_results`: ``.<name>.lock`` beside it, an ``flock``;
``vpn_plugin.locks``), so processes sharing one results file (two ``llm_eval.py``
runs, two ``run_protocol.py``) never lose or double a row; a reader sees the file before or
after a write, never in between (rewrites are atomic renames, appends single writes).
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import hashlib
import io
import json
import math
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Iterable, Literal, Optional, Union

from vpn_plugin.config_types import (Count, NonNegative, NonNegativeInt, PathLike, Range, Seed,
                                     Text, check_value, checked_arguments)

from vpn_plugin.errors import (check_file, check_names, decimal_number, json_lines, read_text,
                               unique_keys)

from vpn_plugin.locks import exclusive_lock, lock_path_of
from vpn_plugin.outputs import name_suffix
from .provenance import averaged_features

METRIC_LABELS = {'success_rate': 'SR', 'mean_accuracy': 'mAcc', 'miou_set': 'mIoU',
                 'miou_legacy': 'mIoU (legacy)', 'first_accuracy': 'First acc.',
                 'last_accuracy': 'Last acc.', 'plan_entropy': 'H(plans) [bits]',
                 'plan_jsd': 'JSD to GT [bits]'}
PERCENT_METRICS = ('success_rate', 'mean_accuracy', 'miou_set', 'miou_legacy', 'first_accuracy',
                   'last_accuracy')  # vpn_plugin.core.planning_metrics
# the range of every metric a row may hold (a value outside it is refused, as is another name)
METRIC_RANGES = {**{name: (0.0, 100.0) for name in PERCENT_METRICS},
                 'plan_entropy': (0.0, 64.0), 'plan_jsd': (0.0, 1.0),
                 'authors_selection': (0.0, 100.001)}  # SR + 1e-5 x a percentage
# plan_entropy is a mean over groups of windows of the entropy of each group's predicted
# plans: at most log2 of the largest group, and 64 bits would need 2**64 windows. A row
# records its own, tighter bound in ``metric_bounds`` (core.diversity: largest_group).
REQUIRED_FIELDS = ('method', 'seed', 'horizon', 'metrics')
INTEGER_FIELDS = ('seed', 'horizon', 'params', 'train_horizon')


@dataclass
class ResultRow:
    """One evaluated run; see the module docstring for the meaning of each field."""
    method: str
    seed: int
    horizon: int
    metrics: dict
    params: int | None = None
    dataset: str = ''
    config: str = ''
    train_horizon: int | None = None
    protocol: str = ''
    variant: dict = field(default_factory=dict)
    per_sample_file: str = ''
    work_dir: str = ''
    shortened: str = ''
    pkg_source: str = ''
    selection: str = ''
    features: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)
    usage: dict = field(default_factory=dict)
    metric_bounds: dict = field(default_factory=dict)
    caveats: dict = field(default_factory=dict)

    def key(self) -> tuple:
        """Identity of a run (module docstring): resuming and replacing rows compare it."""
        return (self.protocol, self.dataset, self.method, self.config, self.seed,
                self.horizon, self.train_horizon, identity_text(self.variant),
                identity_text(settings_identity(self.settings)))


def settings_identity(settings: dict) -> dict:
    """A row's ``settings`` as identities compare them: an LLM run's ``base_url`` as the
    reply cache keys its endpoint (``baselines.llm.backends.cache_endpoint``: scheme and host
    in lower case, without a default port or a trailing slash), so that the same server spelt
    another way, whose replies the cache serves, is the same row (another port is another
    server, in the cache as in the row)."""
    url = (settings or {}).get('base_url')
    if not isinstance(url, str) or not url:
        return settings
    from vpn_plugin.baselines.llm.backends import cache_endpoint
    return {**settings, 'base_url': cache_endpoint(url)}


def identity_text(value) -> str:
    """``value`` (a row's variant, settings, ...) as the text identities compare: JSON with
    sorted keys, a whole float written as the integer it equals (``0.0`` and ``0``, ``20.0``
    and ``20`` are one number: JSON has one number kind, a spreadsheet saves ``0.0`` as
    ``0``); booleans stay ``true`` / ``false``."""
    def same(item):
        if isinstance(item, float) and item.is_integer():
            return int(item)
        if isinstance(item, dict):
            return {key: same(entry) for key, entry in item.items()}
        if isinstance(item, (list, tuple)):
            return [same(entry) for entry in item]
        return item
    return json.dumps(same(value), sort_keys=True, default=str)


# The declared kind of every field of a results row (vpn_plugin.config_types), held on reading
# every row by one rule: a value of another kind (0 or [] for a text, True for a seed, 'abc'
# for a dict) is refused naming the file, line, field, value and kind, never read by its truth
# value. Absent = the dataclass default; ``null`` = the same for optional fields.
ROW_SCHEMA = {
    'method': Text, 'seed': Seed, 'horizon': Count, 'metrics': dict,
    'params': Optional[NonNegativeInt], 'train_horizon': Optional[Count],
    **{name: Optional[str] for name in ('dataset', 'config', 'protocol', 'per_sample_file',
                                        'work_dir', 'pkg_source', 'selection')},
    'shortened': Optional[Union[str, bool]],  # true = 'shortened', false = a full run
    **{name: Optional[dict] for name in ('variant', 'features', 'settings', 'usage')},
    'failures': Optional[dict[str, NonNegativeInt]],
    'metric_bounds': Optional[dict[str, NonNegative]],
    'caveats': Optional[dict],
}
# the kinds of what a test records about its own trust (``caveats``); a list of lines or one
# '; '-joined text (test_metrics.json's first shape)
CAVEAT_KINDS = {'changed_from_training': Union[str, list[str]],
                'not_compared': Union[str, list[str]], 'feature_scale': str,
                'task_source': Literal['ground_truth'],
                'damaged_features': Union[str, list[str]], 'reduced_precision': str}
# the range of each metric (percentages in [0, 100]); another name is refused
METRIC_KINDS = {name: Annotated[float, Range(low, high)]
                for name, (low, high) in METRIC_RANGES.items()}
DICT_FIELDS = ('variant', 'features', 'settings', 'usage', 'failures', 'metric_bounds',
               'caveats')  # JSON text in CSV cells
# the usage fields a Tokens / Cost column reads or sums (tools/llm_eval.py; others are kept as
# they are): counts, costs, and the price per 1000 [prompt, completion] tokens
USAGE_KINDS = {
    **dict.fromkeys(('requests', 'retries', 'failed', 'cache_hits', 'prompt_tokens',
                     'completion_tokens', 'cached_prompt_tokens', 'cached_completion_tokens',
                     'replies_without_usage', 'total_tokens', 'paid_tokens'), NonNegativeInt),
    **dict.fromkeys(('cost_of_answers', 'cost_paid', 'cost'), NonNegative),
    'price_per_1k': tuple[NonNegative, NonNegative],
}


def row_from_dict(record: dict, source: str = '<dict>') -> ResultRow:
    """Validate one record against :data:`ROW_SCHEMA` and build a :class:`ResultRow`; errors
    name ``source`` (file:line), the field, its value and the expected kind."""
    if not isinstance(record, dict):
        raise ValueError(f'{source}: a results row must be a JSON object of fields, got '
                         f'{record!r:.80}')
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        raise ValueError(f'{source}: results row lacks required field(s) {missing}; '
                         f'got fields {sorted(record)}')
    check_names(record, ROW_SCHEMA, f'{source}: results field')
    for name, value in record.items():
        check_value(f'{source}: field {name}', value, ROW_SCHEMA[name])
    if not record['metrics']:
        raise ValueError(f'{source}: field metrics={{}}; expected a non-empty dict of '
                         'name -> percent')
    check_names(record['metrics'], METRIC_KINDS, f'{source}: field "metrics"')
    for name, value in record['metrics'].items():
        check_value(f'{source}: field metrics.{name}', value, METRIC_KINDS[name])
    _check_metrics_agree(record['metrics'], source)
    _check_metric_bounds(record['metrics'], record.get('metric_bounds') or {}, source)
    check_names(record.get('caveats') or {}, CAVEAT_KINDS, f'{source}: field "caveats"')
    for name, value in (record.get('caveats') or {}).items():
        check_value(f'{source}: field caveats.{name}', value, CAVEAT_KINDS[name])
    if not visible_name(record['method']):
        raise ValueError(f'{source}: field method={record["method"]!r}; expected a method '
                         'name (a table row is labelled by it)')
    control = sorted({c for c in record['method'] if _control_character(c)})
    if control:  # a NUL or BEL prints nothing (Markdown shows U+FFFD) and stops pdfLaTeX
        raise ValueError(f'{source}: field method={record["method"]!r} holds the control '
                         f'character(s) {", ".join(repr(c) for c in control)}; expected a '
                         'name of printable characters (tabs and line breaks allowed)')
    for name, value in (record.get('usage') or {}).items():
        if name in USAGE_KINDS:
            check_value(f'{source}: field usage.{name}', value, USAGE_KINDS[name])
    values = {name: value for name, value in record.items() if value is not None}
    values['metrics'] = {name: float(value) for name, value in record['metrics'].items()}
    values['shortened'] = _as_shortened(record.get('shortened'))
    row = ResultRow(**values)
    row.read_from = source  # not a field: never written, no part of the row's identity
    return row


def row_source(row: ResultRow) -> str:
    """Where ``row`` was read (``results.jsonl:3``, :func:`row_from_dict`; '' for a row built
    in memory), for messages that name the row."""
    return getattr(row, 'read_from', '')


def _as_shortened(value) -> str:
    """The ``shortened`` field (of :data:`ROW_SCHEMA`'s kind) as a reason ('' = full run)."""
    if value in (None, False, 'false', 'False') or (
            isinstance(value, str) and not value.strip()):
        return ''  # blanks are no reason: a full run, as an empty text
    return 'shortened' if value in (True, 'true', 'True') else value


SHORTENED_MARK = '†'  # beside a method shortened in tables (report.py) and figures (plots.py)


def shortened_reason(row: ResultRow) -> str:
    """Why ``row`` comes from a shortened run ('' = a full run): the one reader of the field."""
    value = getattr(row, 'shortened', '')
    check_value(f'row of {row.method!r}: field shortened', value, ROW_SCHEMA['shortened'])
    return _as_shortened(value)


# a window solved (every step right) has every step right, its first and last too: the success
# rate is at most each per-step accuracy (means over the same windows)
SUCCESS_BOUNDED_BY = ('mean_accuracy', 'first_accuracy', 'last_accuracy')


def _check_metrics_agree(metrics: dict, source) -> None:
    """A row whose success rate exceeds its mean, first or last step accuracy cannot come from
    one evaluation (an edited or mixed-up row): ``ValueError`` naming both."""
    success = metrics.get('success_rate')
    for name in SUCCESS_BOUNDED_BY:
        if success is not None and name in metrics and success > metrics[name] + 1e-6:
            raise ValueError(f'{source}: metrics.success_rate = {success:g} exceeds '
                             f'metrics.{name} = {metrics[name]:g}; a solved window has every '
                             'step right, so one evaluation never gives that (an edited or '
                             'mixed-up row?)')


def caveat_lines(row: ResultRow) -> dict:
    """``row``'s caveats as kind -> lines (a '; '-joined text split; empty ones left out):
    the one reader of the field."""
    lines = {}
    for kind, value in (row.caveats or {}).items():
        found = [value] if kind in ('feature_scale', 'task_source') else (
            value.split('; ') if isinstance(value, str) else list(value))
        found = [line for line in found if line]
        if found:
            lines[kind] = found
    return lines


def _check_metric_bounds(metrics: dict, bounds: dict, source) -> None:
    """A metric above the bound its row records (``metric_bounds``) cannot come from that
    evaluation: ``ValueError`` naming both."""
    check_names(bounds, METRIC_KINDS, f'{source}: field "metric_bounds"')
    for name, bound in bounds.items():
        if name in metrics and metrics[name] > bound + 1e-9:
            raise ValueError(f'{source}: metrics.{name} = {metrics[name]:g} exceeds '
                             f'metric_bounds.{name} = {bound:g}, the most its evaluation can '
                             'give (an edited or mixed-up row?)')


def _control_character(character: str) -> bool:
    """Whether ``character`` is a control character (Unicode Cc) other than tab / line breaks."""
    import unicodedata
    return unicodedata.category(character) == 'Cc' and character not in '\t\n\r'


def visible_name(name: str) -> str:
    """``name`` as a table shows it: format characters (zero-width space, BOM) dropped,
    whitespace runs as one space, composed (NFC: ``e`` + combining accent is ``é``)."""
    import unicodedata
    return unicodedata.normalize('NFC', ' '.join(
        ''.join(c for c in name if unicodedata.category(c) != 'Cf').split()))


def read_results(paths: str | Path | Iterable[str | Path], *,
                 empty_ok: bool = False) -> list[ResultRow]:
    """Read rows from one or more ``.jsonl``/``.json``/``.csv`` results files; a file without
    a row is refused unless ``empty_ok`` (a tool's own output file, rows still to come)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    rows, paths = [], [Path(path) for path in paths]
    check_distinct_files(paths)
    for path in paths:
        check_file(path, 'results file', missing=f'results file not found: {path}')
        if name_suffix(path) == '.csv':
            found = resolve_row_paths(_read_csv(path), path)
        elif name_suffix(path) in ('.jsonl', '.json'):
            found = resolve_row_paths(_read_json(path), path)
        else:
            raise ValueError(f'{path}: unknown results format "{path.suffix}"; '
                             'expected .jsonl, .json or .csv')
        if not found and not empty_ok:
            raise ValueError(f'results file {path} holds no results rows '
                             f'({path.stat().st_size} bytes); expected one row per run '
                             '(was it written by a run that was stopped before its first row?)')
        rows.extend(found)
    check_method_spelling(rows)
    return rows


def check_distinct_files(paths: list) -> None:
    """A results file given twice (also by another spelling or a link) would count every
    row twice."""
    for index, path in enumerate(paths):
        for earlier in paths[:index]:
            if os.path.exists(path) and os.path.exists(earlier) and os.path.samefile(earlier, path):
                raise ValueError(f'results file {path} is given twice ({earlier}); every row '
                                 'would be read twice: give each file once')


def check_method_spelling(rows: list[ResultRow]) -> None:
    """Refuse two method names that differ only by spaces ('Base Model', 'Base  Model '):
    tables would show them as two methods of one name."""
    spellings: dict = {}
    for row in rows:
        spellings.setdefault(visible_name(row.method), {}).setdefault(row.method, row)
    for name, variants in spellings.items():
        if len(variants) > 1:
            where = '; '.join(f'{spelling!r} ({row_source(row) or "seed " + str(row.seed)})'
                              for spelling, row in sorted(variants.items()))
            raise ValueError(f'results name the method {name!r} as {sorted(variants)}, differing '
                             'only by spaces, invisible characters or the Unicode form of a '
                             f'letter (first row of each: {where}); write it one way (or '
                             '--rename one of them)')
    datasets: dict = {}
    for row in rows:
        datasets.setdefault(visible_name(row.dataset).lower(), set()).add(row.dataset)
    for name, variants in datasets.items():
        if len(variants) > 1:
            raise ValueError(f'results name the dataset {name!r} as {sorted(variants)}, '
                             'differing only by case, spaces or invisible characters: one '
                             'dataset would be shown as two; write it one way')


def _read_json(path: Path) -> list[ResultRow]:
    text = _read_text(path)
    if name_suffix(path) == '.json' and text.lstrip().startswith('['):
        records = _loads(text, str(path))
        return [row_from_dict(r, f'{path}[{i}]') for i, r in enumerate(records)]
    return [_read_json_line(line, f'{path}:{number}')
            for number, line in enumerate(json_lines(text), 1) if line.strip()]


def _read_text(path: Path) -> str:
    """The text of results file ``path`` (.jsonl, .json, .csv): ``errors.read_text`` (a BOM
    read past; errors name the byte of the file)."""
    return read_text(path, '', 'a results file of JSON lines')


def _loads(text: str, source: str):
    """JSON with every key once per object (``json`` would keep the last of two)."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys(source, 'results'))
    except json.JSONDecodeError as error:
        raise ValueError(f'{source}: not valid JSON ({error})') from None


def _read_json_line(line: str, source: str) -> ResultRow:
    return row_from_dict(_loads(line, source), source)


def _read_csv(path: Path) -> list[ResultRow]:
    """Rows of a CSV results file (its byte-order mark read past: :func:`_read_text`); a
    header naming a column twice and a line of more or fewer cells than the header (another
    delimiter, a cell not quoted) are refused naming the file and line."""
    reader = csv.reader(io.StringIO(_read_text(path), newline=''))
    header = next(reader, [])
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise ValueError(f'{path}:1: the CSV header names the column(s) {twice} twice; '
                         'expected each column once (a reader would keep only the last)')
    rows = []
    for cells in reader:
        number = reader.line_num
        if len(cells) != len(header) and any(cell.strip() for cell in cells):
            raise ValueError(f'{path}:{number}: {len(cells)} cells, but the header (line 1) '
                             f'has {len(header)} columns; expected one cell per column, '
                             "separated by ',' (another delimiter, or a cell holding ',' "
                             'without quotes?)')
        if cells:
            rows.append(row_from_dict(_unflatten(dict(zip(header, cells))), f'{path}:{number}'))
    return rows


def _unflatten(record: dict) -> dict:
    """A CSV record as the JSON row it encodes (integer fields from their text)."""
    out = {'metrics': {}, 'variant': {}}
    for name, value in record.items():
        if name in INTEGER_FIELDS and value not in (None, ''):
            out[name] = int(value) if _INTEGER_TEXT.fullmatch(value.strip()) else value
            continue
        if name.startswith('metric/'):
            if value != '':
                out['metrics'][name[len('metric/'):]] = _metric_text(value)
        elif name.startswith('variant/'):
            if value != '':
                out['variant'][name[len('variant/'):]] = _parse_scalar(value)
        elif name in DICT_FIELDS and value != '':
            out[name] = _parse_scalar(value)
        elif value != '' or name in REQUIRED_FIELDS:
            out[name] = value
    return out


_INTEGER_TEXT = re.compile(r'[+-]?[0-9]+')


def _metric_text(text: str):
    """A CSV metric cell as a number (the cell's text when it is none: refused later); digits
    grouped by ``_`` (``1_7.5``, which Python's ``float`` reads as 17.5) or other digits than
    ASCII (``'３.1'``, ``'٨'``) are no number (:func:`errors.decimal_number`)."""
    value = decimal_number(text)
    return text if value is None else value


def _parse_scalar(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@checked_arguments
def append_result(path: PathLike, row: ResultRow) -> bool:
    """Append one row to a ``.jsonl`` results file (created with its folders if absent),
    unless the file already holds a row of the same run (:meth:`ResultRow.key`): returns
    whether it was appended. A row it replaces (:func:`replaced_identity`: the same test
    written with ``train_horizon: null`` by an older runner) is removed in the same write.
    Under the file's lock (:func:`locked_results`), so concurrent writers never double a row."""
    path = _jsonl_path(path)
    with locked_results(path):
        lines = _keyed_lines(path, rows=True)
        if any(key == row.key() for key, _, _, _ in lines):
            return False
        replaced = {replaced_identity(row)} - {None}
        if any(_is_replaced(old, replaced) for _, _, old, _ in lines):
            _rewrite(path, [line for _, line, old, _ in lines
                            if not _is_replaced(old, replaced)]
                     + [row_line(row, path)])
            return True
        if path.exists() and path.stat().st_nlink > 1:
            # a hard-linked copy of a protocol folder (cp -al) shares this file with another
            # folder: appending would add this row there too; a new file breaks the link
            kept = path.read_text().removesuffix('\n')
            _rewrite(path, (kept.split('\n') if kept else []) + [row_line(row, path)])
            return True
        with path.open('a') as handle:
            handle.write(row_line(row, path) + '\n')
    return True


def replaced_identity(row: ResultRow):
    """The identity of the row that ``row`` replaces (None when none): the same test (its
    :meth:`ResultRow.key` with ``train_horizon`` null, and the same test folder ``work_dir``,
    resolved: :func:`_old_identity`) recorded with ``train_horizon: null``, where ``row`` was trained at another
    horizon than it was tested. ``tools/run_protocol.py`` wrote an untrained planner tested
    at another horizon than its run's so until 2026-11-28 (its PKG is counted at the run's
    horizon); a resumed protocol tests it again, and its new row takes the old one's place,
    which would otherwise stay beside it (``tools/report.py`` refuses it). ``row``'s paths
    are read as they are (a row being written: from here; a row read from a file: resolved
    from its folder by the reader)."""
    if row.train_horizon is None or row.train_horizon == row.horizon or not row.work_dir:
        return None
    return _old_identity(dataclasses.replace(row, train_horizon=None))


def _is_replaced(old: ResultRow, replaced) -> bool:
    """Whether ``old`` (read from a results file) is the row of one of the ``replaced``
    identities (:func:`replaced_identity`; a set, or a dict of them)."""
    return _old_identity(old) in replaced


def _old_identity(old: ResultRow):
    """What :func:`replaced_identity` gives for the row ``old`` may be (None: no such row).
    The method is left out: the test folder names it, and report.py names a row trained at
    another horizon ``<method> (train T=6)`` before it compares."""
    if old.train_horizon is not None or not old.work_dir:
        return None
    return dataclasses.replace(old, method='').key(), str(Path(old.work_dir).resolve())


def drop_replaced_rows(path: PathLike) -> list[str]:
    """Remove from the results file ``path`` the rows that another row of the file replaces
    (:func:`replaced_identity`), in one atomic rewrite under its lock; returns their
    ``file:line`` (none: the file is left as it is). A protocol run again calls it first: a
    file that a resume by an older runner left with both rows is read by report.py again."""
    path = Path(path)
    if not path.is_file() or name_suffix(path) != '.jsonl':
        return []
    with locked_results(path):
        lines = _keyed_lines(path, rows=True)
        replaced = {replaced_identity(row) for _, _, row, _ in lines} - {None}
        stale = [number for _, _, old, number in lines if _is_replaced(old, replaced)]
        if stale:
            _rewrite(path, [line for _, line, _, number in lines if number not in stale])
    return [f'{path}:{number}' for number in stale]


def _rewrite(path: Path, lines: list) -> None:
    """Replace results file ``path`` with ``lines`` atomically (temp file + rename; the caller
    holds its lock)."""
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_text(''.join(line + '\n' for line in lines))
    os.replace(tmp, path)


@checked_arguments
def replace_result(path: PathLike, row: ResultRow) -> int:
    """Write ``row`` to a ``.jsonl`` results file in place of the rows of the same run
    (:meth:`ResultRow.key`), so that rerunning a command never duplicates its row; returns
    how many rows were replaced. The read-modify-write holds the file's lock
    (:func:`locked_results`: concurrent writers lose no row) and the file is rewritten
    atomically (temp file + rename)."""
    path = _jsonl_path(path)
    with locked_results(path):
        lines = _keyed_lines(path)
        kept = [line for key, line in lines if key != row.key()]
        _rewrite(path, kept + [row_line(row, path)])
    return len(lines) - len(kept)


PATH_FIELDS = ('per_sample_file', 'work_dir')  # written relative to the results file's folder


def row_line(row: ResultRow, path: Path) -> str:
    """The JSON line of ``row`` in the results file ``path``: its paths that lie in the file's
    folder are written relative to that folder, so that a moved or copied protocol folder
    reads its own files (:func:`resolve_row_paths`); the others absolute (a relative one would
    be read from the file's folder)."""
    record = asdict(row)
    folder = path.parent.resolve()
    for name in PATH_FIELDS:
        if record[name]:
            resolved = Path(record[name]).resolve()
            try:
                record[name] = str(resolved.relative_to(folder))
            except ValueError:  # outside the folder
                record[name] = str(resolved)
    return json.dumps(record, sort_keys=True)


def results_text(rows: list[ResultRow], path: str | Path) -> str:
    """The JSON Lines text of ``rows`` as the results file ``path`` holds them (their paths in
    its folder relative to it: :func:`row_line`)."""
    path = Path(path)
    return ''.join(row_line(row, path) + '\n' for row in rows)


def resolve_row_paths(rows: list[ResultRow], path: Path) -> list[ResultRow]:
    """A relative path of a row is read from the results file's folder (as
    :func:`row_line` writes it), never from the working directory: there, another copy of
    the protocol folder would be read without a word. Absolute paths are kept."""
    folder = path.parent.resolve()
    for row in rows:
        for name in PATH_FIELDS:
            value = getattr(row, name)
            if value and not Path(value).is_absolute():
                setattr(row, name, str(folder / value))
    return rows


@contextlib.contextmanager
def locked_results(path: str | Path, wait: bool = True):
    """Hold the lock of results file ``path`` (``.<name>.lock`` beside it,
    :func:`vpn_plugin.locks.exclusive_lock`): read it, then write it, with no other
    process writing in between."""
    path = Path(path)
    with exclusive_lock(lock_path_of(path), wait=wait, what=f'results file {path}'):
        yield


def _jsonl_path(path) -> Path:
    path = Path(path)
    if name_suffix(path) != '.jsonl':
        raise ValueError(f'{path}: results rows go to JSON Lines files; use a .jsonl name')
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _keyed_lines(path: Path, rows: bool = False) -> list:
    """``(row key, line)`` of every row of ``path`` (none when it does not exist), with
    ``rows`` ``(row key, line, row, line number)`` (its paths read from the file's folder;
    the number of the line in the file, blank lines counted); a line that is not a valid row
    raises an error naming it, ``file:line`` (nothing is written into such a file)."""
    if not path.is_file():
        return []
    numbered = [(number, line) for number, line in enumerate(json_lines(_read_text(path)), 1)
                if line.strip()]
    read = [_read_json_line(line, f'{path}:{number}') for number, line in numbered]
    if rows:
        return [(row.key(), line, row, number) for row, (number, line)
                in zip(resolve_row_paths(read, path), numbered)]
    return [(row.key(), line) for row, (_, line) in zip(read, numbered)]


@checked_arguments
def write_results_csv(path: PathLike, rows: list[ResultRow]) -> None:
    """Write rows as CSV (``metric/<name>`` and ``variant/<name>`` columns)."""
    metric_names = sorted({k for r in rows for k in r.metrics})
    variant_names = sorted({k for r in rows for k in r.variant})
    base = [f for f in ResultRow.__dataclass_fields__ if f not in ('metrics', 'variant')]
    header = base + [f'metric/{m}' for m in metric_names] + [f'variant/{v}' for v in variant_names]
    with Path(path).open('w', newline='') as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        for row in rows:
            record = {name: getattr(row, name) for name in base}
            record = {k: ('' if v is None else json.dumps(v, sort_keys=True)
                          if isinstance(v, dict) else v) for k, v in record.items()}
            record.update({f'metric/{m}': row.metrics.get(m, '') for m in metric_names})
            record.update({f'variant/{v}': json.dumps(row.variant[v]) if v in row.variant else ''
                           for v in variant_names})
            writer.writerow(record)


def filter_rows(rows: list[ResultRow], *, protocol=None, dataset=None, horizons=None,
                variant=(), methods=None) -> list[ResultRow]:
    """Keep rows matching every given filter; ``variant`` is a list of ``'key=value'``."""
    wanted = {}
    for item in variant or ():
        if '=' not in item:
            raise ValueError(f'variant filter {item!r} must look like key=value')
        key, value = item.split('=', 1)
        if key in wanted:  # a row has one value per key: the later one would silently win
            raise ValueError(f'variant filter {key!r} is given twice ({key}={json.dumps(wanted[key])} '
                             f'and {item}); a row has one {key}: give it once (one table per '
                             'value)')
        wanted[key] = _parse_scalar(value)
    kept = [r for r in rows
            if (protocol is None or r.protocol == protocol)
            and (dataset is None or r.dataset == dataset)
            and all(_variant_matches(r, k, v) for k, v in wanted.items())]
    # a name that matches nothing is a typo: it would silently drop a method or a column
    check_names(horizons, sorted({r.horizon for r in kept}), '--horizons')
    kept = [r for r in kept if horizons is None or r.horizon in horizons]
    check_names(methods, list(dict.fromkeys(r.method for r in kept)), '--methods')
    kept = [r for r in kept if methods is None or r.method in methods]
    if not kept:
        raise ValueError(f'no results rows match protocol={protocol!r} dataset={dataset!r} '
                         f'horizons={horizons} variant={list(variant or ())} methods={methods}; '
                         f'the {len(rows)} rows hold {_held(rows)}')
    return kept


def _variant_matches(row: ResultRow, key: str, wanted) -> bool:
    """Whether ``row.variant[key]`` is ``wanted``; a value that is the same setting written as
    another kind (``"0.1"`` for 0.1) is refused, not dropped: the filter would silently lose
    that seed."""
    value = row.variant.get(key)
    if value == wanted:
        return True
    if isinstance(value, str) and not isinstance(wanted, str) and _parse_scalar(value) == wanted:
        raise ValueError(f'row of {row.method!r} seed {row.seed} T={row.horizon} has variant '
                         f'{key}={json.dumps(value)} (a string) where the filter {key}='
                         f'{json.dumps(wanted)} asks the number; expected the number as the '
                         'other rows write it (fix that row)')
    if round_off_twins(value, wanted):
        raise ValueError(f'row of {row.method!r} seed {row.seed} T={row.horizon} has variant '
                         f'{key}={value!r}, which differs from the filter {key}={wanted!r} by '
                         'round-off only (a level computed, e.g. 0.1 * 3); expected one '
                         'setting written one way (fix that row)')
    return False


def round_off_twins(a, b) -> bool:
    """Whether ``a`` and ``b`` are two numbers (not bools) that differ by round-off only
    (:data:`core.stats.ROUND_OFF` of their size): one setting written two ways, which a filter
    or a figure would split."""
    from vpn_plugin.core.stats import ROUND_OFF

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return (number(a) and number(b) and a != b
            and math.isclose(a, b, rel_tol=ROUND_OFF, abs_tol=0.0))


def _held(rows: list[ResultRow]) -> str:
    """What the rows hold, per filter: protocols, datasets and variant settings."""
    settings = sorted({f'{k}={json.dumps(v)}' for r in rows for k, v in r.variant.items()})
    return (f'protocol(s) {sorted({r.protocol for r in rows})}, dataset(s) '
            f'{sorted({r.dataset for r in rows})}, variant setting(s) '
            f'{settings[:12] + ["..."] * (len(settings) > 12) or "none"}')


def rename_methods(rows: list[ResultRow], renames: list[str], known=None) -> list[ResultRow]:
    """Copies of rows with methods renamed by ``'OLD=NEW'`` items (display names in tables;
    :func:`renamed`);
    with ``known`` (the methods of the selected rows), an OLD that is none of them is refused
    (a chain ``A=X X=Y`` or a typo would rename nothing)."""
    from dataclasses import replace
    from vpn_plugin.errors import close_match_hint
    mapping = {}
    for item in renames or ():
        if '=' not in item:
            raise ValueError(f'rename {item!r} must look like OLD=NEW')
        old, new = _split_rename(item, known)
        if not visible_name(new):
            raise ValueError(f'rename {item!r}: the new name {new!r} is empty or invisible; a '
                             'table row needs a name to show')
        control = sorted({c for c in new if _control_character(c)})
        if control:  # the rule of a row's method field (row_from_dict), named by the item
            raise ValueError(f'rename {item!r}: the new name holds the control character(s) '
                             f'{", ".join(repr(c) for c in control)}; expected a name of '
                             'printable characters (tabs and line breaks allowed)')
        if old in mapping:
            raise ValueError(f'rename {item!r}: {old!r} is renamed twice; give each method once')
        if known is not None and old not in known:
            raise ValueError(f'rename {item!r}: {old!r} is not a method of the selected rows '
                             f'{sorted(known)}{close_match_hint(old, known)} (each OLD names '
                             'a method of the results file; renames do not chain)')
        mapping[old] = new
    present = {r.method for r in rows}
    for old, new in mapping.items():
        if new in present and new != old and new not in mapping:
            raise ValueError(f'rename {old}={new}: {new!r} is already a method of the results; '
                             'two methods would merge into one row')
    renamed_rows = [replace(r, method=renamed(r, mapping)) for r in rows]
    for new, row in zip(renamed_rows, rows):
        new.read_from = row_source(row)
    return renamed_rows


def renamed(row: ResultRow, mapping: dict) -> str:
    """``row``'s method after ``mapping`` (OLD -> NEW); a row trained at another horizon than
    it was tested says so (``VPN (train T=6)``), as the cross-horizon protocol's names do,
    renamed or not: it is never a plain cell beside the models trained at its T. A name that
    already says ``T=6`` (as a whole: ``T=60`` is another horizon) is kept."""
    new = mapping.get(row.method, row.method)
    trained = row.train_horizon
    if trained in (None, row.horizon) or re.search(rf'(?<![\w.])T={trained}(?![\w.])', new):
        return new
    return f'{new} (train T={trained})'


def _joined_caveats(rows: list) -> dict:
    """The caveats of rows averaged into one (each kind's lines, once each)."""
    joined = {}
    for row in rows:
        for kind, lines in caveat_lines(row).items():
            joined.setdefault(kind, [])
            joined[kind] += [line for line in lines if line not in joined[kind]]
    text = {'feature_scale': '; '.join, 'task_source': lambda lines: lines[0]}
    return {kind: text.get(kind, list)(lines) for kind, lines in joined.items()}


KNOWN_DATASETS = ('crosstask', 'niv', 'coin')  # a config's data_root ends with its name
# the dataset names a row is compared by: a converted EgoPER folder has the user's name, but a
# row saying 'egoper' under a config of CrossTask / NIV / COIN contradicts it all the same
ROW_DATASETS = KNOWN_DATASETS + ('egoper',)


def check_rows_match_configs(rows: list[ResultRow]) -> None:
    """A row that names a config file (found from here) must have been run at its horizon
    and on its dataset: the config's ``horizon`` is the row's training horizon
    (``train_horizon``, else ``horizon``), and a config whose test data_root ends with a dataset of
    :data:`KNOWN_DATASETS` is that dataset (the row's ``settings.cfg_options`` merged first:
    a union model tested on one of its datasets). A config that trains at one horizon and tests
    at another (``configs/vpn_niv_t6_eval_t3.py``) needs the row's ``train_horizon``: with
    ``null`` it would pass as a plain cell of its test horizon. ``ValueError`` naming the row
    (file:line when read from one) and the config's values; a config not found here (a model
    name, another machine's path) is not compared. The config's code is run only for a config
    of this repository's ``configs/`` (``data_paths.read_config_safely``). A relative path is
    looked up from the current folder, then from the repository (where the protocol runner
    writes them from); the configs found in neither are named on stderr with their rows' count
    (not compared, never silently)."""
    from vpn_plugin.data_paths import NeedsUnread
    unfound, unread_configs = {}, {}
    replacing = {replaced_identity(row): row for row in rows}
    replacing.pop(None, None)
    for row in rows:
        options = (row.settings or {}).get('cfg_options') or {}
        where = (f'{row_source(row) + ": " if row_source(row) else ""}row of {row.method!r} '
                 f'(seed {row.seed}, dataset {row.dataset!r}, T={row.horizon}, '
                 f'train_horizon={json.dumps(row.train_horizon)}) names config {row.config}')
        newer = replacing.get(_old_identity(row))
        if newer is not None:  # both rows: an older runner's and the resumed protocol's
            raise ValueError(f'{where}: a row written with train_horizon: null by '
                             'tools/run_protocol.py before 2026-11-28, which the row of the same '
                             f'test {row_source(newer) or repr(newer.method)} (train_horizon: '
                             f'{newer.train_horizon}) replaces; expected one row per test: run '
                             'the protocol command again (it removes the old row) or delete '
                             'this line')
        path = config_file(row.config)
        if path is None:
            if row.config:
                unfound.setdefault(row.config, []).append(row)
            continue
        try:
            key = _config_key(path)
            facts = _config_facts(*key, json.dumps(options, sort_keys=True, default=str))
        except NeedsUnread as error:
            raise ValueError(f'{where}: {error}') from None
        except Exception as error:  # the config (or the row's cfg_options on it) does not load
            raise ValueError(f'{where} (with its settings.cfg_options {options}), which does not '
                             f'load to compare the row with it: {type(error).__name__}: '
                             f'{" ".join(str(error).split()) or "no message"}; fix the row or '
                             'the config') from error
        horizon, test_horizon, dataset, unread = facts
        if unread:
            unread_configs.setdefault(path, (row.config, unread, []))[2].append(row)
        read = ('' if Path(row.config).is_absolute()  # which file a relative path found
                else f' (the config file read: {Path(path).resolve()})')
        if options and _options_change_facts(key, facts):  # the refusals below say so
            where += f' (with its settings.cfg_options {options})'
        trained = row.train_horizon if row.train_horizon is not None else row.horizon
        if horizon is not None and row.train_horizon is None and row.horizon != horizon \
                and row.horizon == test_horizon:
            raise ValueError(f'{where}, which trains at horizon = {horizon} and tests at '
                             f'test_horizon = {test_horizon}, but the row says train_horizon='
                             f'null (trained at its own T={row.horizon}): it would be shown as a '
                             f'plain T={row.horizon} cell beside the models trained at '
                             f'T={row.horizon} (a planner without parameters counts its PKG on '
                             f'the training windows of horizon = {horizon} too); expected '
                             f'train_horizon: {horizon} in the row (shown as '
                             f'"{row.method} (train T={horizon})")' + read)
        if horizon is not None and trained != horizon:
            field_name = 'train_horizon' if row.train_horizon is not None else 'horizon'
            raise ValueError(f'{where}, whose horizon = {horizon}'
                             + (f' (test_horizon = {test_horizon})'
                                if test_horizon != horizon else '')
                             + f', but the row says {field_name}={trained}: a row of another '
                             'run or an edited one; fix its config or its horizon'
                             + (f' (the row of an untrained planner tested at T={row.horizon} '
                                'under this config, which tools/run_protocol.py wrote with '
                                'train_horizon: null until 2026-11-28, needs train_horizon: '
                                f'{horizon})' if row.train_horizon is None and not row.params
                                else '') + read)
        if test_horizon is not None and row.horizon != test_horizon \
                and row.train_horizon in (None, row.horizon):
            raise ValueError(f'{where}, whose test windows are of test_horizon = {test_horizon}'
                             f' (horizon = {horizon}), but the row says it was tested at '
                             f'T={row.horizon}, its training horizon: a row of another run or '
                             'an edited one (a test at another horizon than its config\'s '
                             'records test_horizon in settings.cfg_options, as '
                             'tools/run_protocol.py does); fix its config or its horizon' + read)
        if dataset and visible_name(row.dataset).lower() in ROW_DATASETS \
                and visible_name(row.dataset).lower() != dataset:
            raise ValueError(f'{where}, whose test data is {dataset!r}, but the row says '
                             f'dataset={row.dataset!r}: a row of another run or an edited '
                             'one; fix its config or its dataset' + read)
    for config, unread, found in unread_configs.values():
        listed = '; '.join(f'{key} ({place})' for key, place in unread[:5])
        more = f'; and {len(unread) - 5} more' if len(unread) > 5 else ''
        print(f'note: {config} (named by {len(found)} results row{"s" * (len(found) > 1)}, '
              f'e.g. {row_source(found[0]) or repr(found[0].method)}): not read without '
              f'running the config: {listed}{more}; not checked that it runs (the values the '
              'rows are compared with are read)', file=sys.stderr)
    if unfound:
        listed = '; '.join(f'{config} ({len(found)} row{"s" * (len(found) > 1)}, e.g. '
                           f'{row_source(found[0]) or repr(found[0].method)})'
                           for config, found in list(unfound.items())[:5])
        more = f' and {len(unfound) - 5} more' if len(unfound) > 5 else ''
        print(f'note: {sum(map(len, unfound.values()))} results rows name a config that is no '
              f'config file here (looked up from {Path.cwd()} and from {_repository()}): '
              f'{listed}{more}; their horizon and dataset are not compared with a config',
              file=sys.stderr)


def _options_change_facts(key: tuple, facts: tuple) -> bool:
    """A row's ``cfg_options`` make the horizons or the test dataset of its config
    (:func:`_config_key` ``key``) other than the config's own (``facts``: :func:`_config_facts`
    with them)."""
    try:
        return _config_facts(*key, '{}')[:3] != facts[:3]
    except Exception:  # noqa: BLE001 - the config alone does not load: the options matter
        return True


def _repository() -> Path:
    from vpn_plugin.data_paths import REPO_ROOT
    return REPO_ROOT


def config_file(config: str):
    """The config file a row's ``config`` names (:func:`check_rows_match_configs`): from the
    current folder, else (a relative path) from the repository, as an absolute path (the
    facts are cached by it); ``None`` when neither is a config file (a model name, another
    machine's path)."""
    if not config or Path(config).suffix not in ('.py', '.json', '.yaml', '.yml'):
        return None
    candidates = [Path(config)] + ([] if Path(config).is_absolute() else [_repository() / config])
    return next((str(path.absolute()) for path in candidates if path.is_file()), None)


def _config_key(path: str) -> tuple:
    """(the file read, a digest of its bytes) of a row's config file (:func:`config_file`): the
    key of its facts, one read however the rows spell it (``./x.py``, ``a/../x.py``, a link to
    it: ``data_paths.read_config_safely`` reads the same file the same way) and again when it
    changed."""
    from vpn_plugin.data_paths import _config_source
    source = _config_source(path)
    return str(source), hashlib.sha256(source.read_bytes()).hexdigest()


@functools.lru_cache(maxsize=256)
def _config_facts(config: str, content: str, options_json: str):
    """(horizon, test_horizon, dataset or '', unread) of a config file (:func:`_config_key`:
    ``config`` read as of ``content``) with ``cfg_options`` merged; ``unread``: (key, file:line and construct) of each value not
    read without running the config (``data_paths.Unread``), which the checks do not need: one
    they need is refused naming it (``data_paths.NeedsUnread``)."""
    from vpn_plugin.data_paths import (options_over_unread, read_config_safely,
                                       refuse_contradicting_horizons, require_read,
                                       unread_values)
    from vpn_plugin.runner_keys import RUNNER_KEYS, check_runner_kinds
    cfg = read_config_safely(config)  # a literal config: what it computes, or refused
    options = json.loads(options_json)
    if options:
        cfg.merge_from_dict(options_over_unread(cfg, options))
    for key, why in _NEEDED:
        require_read(cfg, key, why)
    model = cfg.get('model')
    pkg = model.get('pkg') if hasattr(model, 'get') else None
    extra = pkg.get('extra_datasets') if hasattr(pkg, 'get') else None
    for i in range(len(extra) if isinstance(extra, (list, tuple)) else 0):
        for key in (f'model.pkg.extra_datasets.{i}', f'model.pkg.extra_datasets.{i}.horizon'):
            require_read(cfg, key, 'is compared with the horizon')
    # the run's rule (data_paths.load_config): horizon = 6.0 or test_horizon = 0 is refused there
    check_runner_kinds(cfg, config, {name: RUNNER_KEYS[name]
                                     for name in ('horizon', 'test_horizon')})
    horizon = cfg.get('horizon')
    test_horizon = cfg.get('test_horizon') or horizon
    # a dataset's (or the model's) own horizon other than these: the run would have been
    # refused, so the row is not this config's (the one rule of data_paths.load_config)
    if isinstance(horizon, int) and isinstance(test_horizon, int):
        refuse_contradicting_horizons(cfg, horizon, test_horizon)
    loader = cfg.get('test_dataloader')
    dataset = loader.get('dataset') if hasattr(loader, 'get') else None
    for name, value in (('test_dataloader', loader), ('test_dataloader.dataset', dataset)):
        if value is not None and not hasattr(value, 'get'):
            raise ValueError(f'{config}: {name} = {str(value)[:60]}; expected a dict (the run '
                             'builds its test data from it)')
    root = dataset.get('data_root') if hasattr(dataset, 'get') else None
    if root is not None and not isinstance(root, str):  # a list / number: no folder to test on
        raise ValueError(f'{config}: test_dataloader.dataset.data_root = {str(root)[:60]}; '
                         'expected the folder of the test data as a text (the run reads its '
                         'windows there)')
    name = Path(root).name.lower() if isinstance(root, str) else ''
    unread = tuple((key, value.where) for key, value in unread_values(cfg.to_dict()))
    return horizon, test_horizon, name if name in KNOWN_DATASETS else '', unread


# the values of a row's config that _config_facts reads: a value not read is refused there
_NEEDED = (('horizon', "the row's horizon is compared with"),
           ('test_horizon', "the row's horizon is compared with"),
           ('model.type', 'tells whether the model takes a horizon'),
           ('model.horizon', 'is compared with the horizon'),
           ('model.pkg', 'may hold datasets of another horizon'),
           ('model.pkg.extra_datasets', 'may hold datasets of another horizon'),
           ('model.train_dataset.horizon', 'is compared with the horizon'),
           *((f'{split}_dataloader.dataset.{key}', 'is compared with the horizon')
             for split in ('train', 'val', 'test') for key in ('type', 'horizon')),
           ('test_dataloader.dataset.data_root', "the row's dataset is compared with"))


def _split_rename(item: str, known) -> tuple:
    """(OLD, NEW) of ``'OLD=NEW'``: at the first ``=``, unless OLD is then no known method and
    a later ``=`` gives one (a method named with ``=``, e.g. ``ViterbiPlanNet (train T=6)``)."""
    cuts = [i for i, char in enumerate(item) if char == '=']
    if known is not None:
        for cut in cuts:
            if item[:cut] in known:
                return item[:cut], item[cut + 1:]
    return item[:cuts[0]], item[cuts[0] + 1:]


AVERAGED_DATASETS = 'mean('  # the dataset of a mean_over_datasets row: 'mean(crosstask,niv)'


def mean_over_datasets(rows: list[ResultRow]) -> list[ResultRow]:
    """One row per (protocol, method, seed, horizon, training horizon, variant) whose metrics
    are the means over the datasets of its rows (the dataset-independent PKG table: tested
    per dataset, averaged per horizon); ``dataset`` names them, e.g. ``'mean(crosstask,niv)'``.

    Every such group must cover the same datasets (and say whether it is shortened the same
    way); a metric is kept when every dataset has it. The datasets' ``text_features`` variants
    (stand-in text features, e.g. COIN's) are not part of the group: the mean row names them all.
    """
    from dataclasses import replace
    groups = {}
    for row in rows:
        study = {k: v for k, v in row.variant.items() if k != 'text_features'}
        key = (row.protocol, row.method, row.seed, row.horizon, row.train_horizon,
               json.dumps(study, sort_keys=True))
        if row.dataset in groups.setdefault(key, {}):
            raise ValueError(f'two rows of method={row.method!r} seed={row.seed} '
                             f'T={row.horizon} dataset={row.dataset!r}; filter by protocol or '
                             'settings before averaging over datasets')
        groups[key][row.dataset] = row
    datasets = {}
    for key, by_dataset in groups.items():
        datasets.setdefault(key[1], set()).update(by_dataset)
    averaged = []
    for key, by_dataset in groups.items():
        if set(by_dataset) != datasets[key[1]]:
            raise ValueError(f'method {key[1]!r} seed {key[2]} T={key[3]} has datasets '
                             f'{sorted(by_dataset)}, other rows of it '
                             f'{sorted(datasets[key[1]])}: a mean over datasets needs them all')
        parts = list(by_dataset.values())
        common = set.intersection(*(set(r.metrics) for r in parts))
        reasons = sorted({shortened_reason(r) for r in parts})
        if len(reasons) > 1:
            raise ValueError(f'method {key[1]!r} seed {key[2]} T={key[3]}: datasets shortened '
                             f'differently ({reasons}); average runs of one schedule')
        stand_ins = sorted({f'{r.dataset}: {r.variant["text_features"]}' for r in parts
                            if r.variant.get('text_features')})
        averaged.append(replace(
            parts[0], dataset=f'{AVERAGED_DATASETS}{",".join(sorted(by_dataset))})',
            variant={**json.loads(key[5]), **({'text_features': '; '.join(stand_ins)}
                                               if stand_ins else {})},
            metrics={m: sum(r.metrics[m] for r in parts) / len(parts) for m in sorted(common)},
            params=max((r.params for r in parts if r.params is not None), default=None),
            features=averaged_features([r.features for r in parts]),
            metric_bounds={m: max(r.metric_bounds[m] for r in parts) for m in sorted(common)
                           if all(m in r.metric_bounds for r in parts)},
            caveats=_joined_caveats(parts),
            config='', per_sample_file='', work_dir='', settings={}, failures={}))
    return averaged

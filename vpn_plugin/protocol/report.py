"""Paper tables from results files (format: :mod:`vpn_plugin.protocol.results`).

A table has one row per method and one column per (dataset, horizon, metric). Conventions
(default = the paper's, as the authors' ``calculate_results.py`` computes them, see
:mod:`vpn_plugin.core.stats`):

* a cell is ``mean ± width``: the mean over seeds and the FULL width p95 - p5 of the 90%
  percentile-bootstrap interval of the seed mean (K=1000 resamples of the seeds);
  ``ci_style='half-width'`` shows (p95 - p5) / 2 instead;
* the improvement row gives ``ours - reference`` (default: best minus second best) as
  ``+Δ ± width``, width = p95 - p5 of Δ* = mean(A*) - mean(B*) where A* and B* resample each
  model's seeds independently (K=1000); ``*`` marks an interval that excludes 0;
  ``paired=True`` resamples the seeds both models share jointly instead;
* with fewer than :data:`MIN_SEEDS_FOR_CI` seeds a cell shows the mean only and the
  improvement no interval and no mark ("n=2: no CI");
* methods with rows from shortened runs (field ``shortened``: ``--max-epochs``, ``--limit``)
  carry a ``†`` and the caption names the reasons;
* every caption names the features of each dataset (``ResultRow.features``: synthetic with
  its generator and seed, a feature folder with its fingerprint, extracted with recipe and
  weights hash); methods with rows on synthetic features carry a ``‖``, on unusable ones
  (random S3D weights) a ``✗``; rows of one dataset on several feature sources are refused
  unless ``allow_mixed_features`` (:mod:`vpn_plugin.protocol.provenance`);
* an incomplete protocol (``missing``: rows its run was asked for but never wrote,
  ``expected.py``; ``tools/report.py --allow-missing``) marks each cell lacking a seed with
  ``¶`` (a column or method with no row at all shows ``-¶``) and the caption lists the rows;
* methods with rows on stand-in text features (``variant.text_features``, e.g. COIN's MiniLM
  stand-in for the paper's CLIP features) carry a ``‡`` and the caption names them;
* ORACLE methods (:func:`is_oracle`: an LLM given the ground-truth first/last actions, a PKG
  counted on the test videos) are named in the caption when the table mixes them with others,
  and are never the default Δ (best or second best) of such a table;
* rows with a ``usage`` (LLM runs) add the columns Tokens (prompt + completion tokens of the
  answers a run used, cached ones included) and Paid tokens (those of the requests the run
  itself sent) and, when priced, Cost (of the answers used) and Paid (of the requests sent),
  each per run, mean over seeds.

Per column the best method is bold and the second best underlined (higher is better, except
``plan_jsd``: lower; ``plan_entropy`` is descriptive and not ranked), ranked on the means as
printed: means that print alike share the mark (:func:`ranked`; the caption says so when it
decides one). A significant Δ that would print as zero prints with the decimals that show it.

Nothing is pooled or dropped silently: the seeds of a cell must come from one run setting
(:func:`check_one_run_per_cell`: same protocol, config, training horizon, variant and
settings), every row must hold every reported metric, ``metrics`` must be known names, and the
results reader refuses values outside a metric's range.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Literal, Optional

import numpy as np

from vpn_plugin.core.stats import AUTHORS_RESAMPLES, AUTHORS_SEED, MIN_SEEDS_FOR_CI, \
    ConfidenceLevel, bootstrap_difference, check_resamples, seed_interval, shows_ci
from vpn_plugin.config_types import Count, NonNegativeInt, Seed, checked_arguments
from vpn_plugin.errors import check_names
from vpn_plugin.tool_choices import CI_STYLES, DEFAULT_METRICS
from .provenance import (SYNTHETIC_MARK, UNUSABLE_MARK, check_feature_mix, feature_marks,
                         features_note)
from vpn_plugin.outputs import (LINE_BREAK, REPORT_LATEX_MARKER, REPORT_MARKDOWN_MARKER,
                                markdown_row, markdown_text, money_text)
from .results import (AVERAGED_DATASETS, METRIC_LABELS, METRIC_RANGES, SHORTENED_MARK,
                      ResultRow, caveat_lines, check_rows_match_configs, config_file, renamed,
                      identity_text, row_from_dict, row_source, settings_identity,
                      shortened_reason)

# what the rows pooled in one cell must share (besides method, dataset and test horizon)
CELL_IDENTITY = ('protocol', 'config', 'train_horizon', 'variant', 'settings', 'pkg_source',
                 'params', 'selection', 'shortened')
# settings that legitimately differ across the seeds of one run setting (llm_eval.py rows:
# the sample seed is the row's seed; a step model may be trained per seed; and the seed of
# settings.pretrained, the pre-training stage each seed runs)
PER_SEED_SETTINGS = ('sample_seed', 'step_checkpoint', 'anchors_file')
CIStyle = Literal[CI_STYLES]  # width: the paper's p95 - p5; half-width: (p95 - p5) / 2
TEST_SET_PKG_MARK = '§'
STAND_IN_MARK = '‡'
MISSING_MARK = '¶'
# what a test recorded about its own trust (a row's caveats): one mark per kind, explained
# under the table with the methods and lines of each
CAVEAT_MARKS = {'changed_from_training': '♯', 'not_compared': '♭', 'feature_scale': '≈',
                'task_source': '⋆', 'damaged_features': '☒', 'reduced_precision': '½'}
CAVEAT_WORDS = {
    'changed_from_training': 'tested with options that differ from the checkpoint\'s training',
    'not_compared': 'the checkpoint did not record what the test compares, so it was not '
                    'compared',
    'feature_scale': 'test features of another scale than the training features\'',
    'task_source': 'given the true task of each window (an oracle input, not a comparable '
                   'result)',
    'damaged_features': 'tested (or trained) on feature files of damaged videos (ffmpeg '
                        'decoded them with errors: frames concealed or repeated)',
    'reduced_precision': 'tested with a checkpoint stored in a coarser float than the model '
                         '(float16 / bfloat16: the weights rounded, not as trained)'}
MISSING_LISTED = 8  # missing rows the caption names (the rest counted)
# +1: higher is better (default), -1: lower is better, 0: descriptive (no marks, no delta)
METRIC_DIRECTION = {'plan_jsd': -1, 'plan_entropy': 0}
EXTRA_DIGITS = {'plan_jsd': 1}  # values in [0, 1] bits need one more decimal than percents
DIGITS = 2  # decimals of a table's numbers (tools/report.py --digits)
DATASET_LABELS = {'crosstask': 'CrossTask', 'niv': 'NIV', 'coin': 'COIN'}
# (best, second best) markup: Markdown, LaTeX
RANK_MARKS = {False: ('**{}**', '<u>{}</u>'), True: (r'\textbf{{{}}}', r'\underline{{{}}}')}


@dataclass
class CellStats:
    """Mean over the per-seed values ``values`` (keyed by seed) and its bootstrap interval
    [low, high] (``None`` with fewer than ``MIN_SEEDS_FOR_CI`` seeds)."""
    values: dict
    mean: float
    low: Optional[float]
    high: Optional[float]


@dataclass
class Improvement:
    """``ours - reference`` with the bootstrap interval of Δ* ([low, high] ``None`` when
    either side has fewer than ``MIN_SEEDS_FOR_CI`` seeds)."""
    ours: str
    reference: str
    delta: float
    low: Optional[float]
    high: Optional[float]
    significant: bool
    num_seeds: tuple   # (seeds of ours, seeds of reference); paired: both the common seeds


@dataclass
class Table:
    methods: list
    columns: list          # (dataset, horizon, metric)
    cells: dict            # (method, column) -> CellStats
    params: dict           # method -> sorted distinct counts of its rows (() when none)
    improvements: dict = field(default_factory=dict)  # column -> Improvement | None
    level: float = 0.90
    ci_style: str = 'width'
    paired: bool = False
    num_resamples: int = AUTHORS_RESAMPLES
    num_diff_resamples: int = AUTHORS_RESAMPLES
    shortened: dict = field(default_factory=dict)  # method -> sorted reasons (shortened runs)
    pkg_sources: dict = field(default_factory=dict)  # method -> sorted non-own PKG sources
    stand_ins: dict = field(default_factory=dict)  # method -> sorted stand-in text features
    failures: dict = field(default_factory=dict)   # method -> {kind: windows}, summed over rows
    selections: list = field(default_factory=list)  # distinct checkpoint selections of the rows
    usage: dict = field(default_factory=dict)      # method -> {USAGE_FIELDS: mean per run}
    oracle: set = field(default_factory=set)       # ORACLE methods (is_oracle)
    feature_marks: dict = field(default_factory=dict)  # method -> synthetic/unusable marks
    features: str = ''                             # the caption's features sentences
    missing: dict = field(default_factory=dict)    # (method, column) -> seeds missing
    missing_rows: list = field(default_factory=list)  # descriptions of the missing rows
    caveats: dict = field(default_factory=dict)    # method -> {kind: sorted lines}


def ci_spread(stats, ci_style: str) -> Optional[float]:
    """The number after "±" of a cell or improvement: p95 - p5 ('width', the paper's) or its
    half ('half-width'); ``None`` without an interval."""
    if stats.low is None:
        return None
    width = stats.high - stats.low
    return width if ci_style == 'width' else width / 2


@checked_arguments
def build_table(rows: list[ResultRow], metrics=DEFAULT_METRICS, *, methods=None,
                ours=None, reference=None, num_resamples: Count = AUTHORS_RESAMPLES,
                num_diff_resamples: Count = AUTHORS_RESAMPLES,
                level: ConfidenceLevel = 0.90, seed: Seed = AUTHORS_SEED,
                ci_style: CIStyle = 'width', paired: bool = False, missing=(),
                allow_mixed_features: bool = False) -> Table:
    """Aggregate rows into a :class:`Table` (conventions: module docstring).

    ``methods`` fixes the row order (default: order of first appearance). Several rows of the
    same (method, dataset, horizon, seed) are an error: the protocol must give each run once.
    ``missing``: rows of the protocol that were never written (``expected.missing_rows``):
    their cells are marked and the caption lists them.
    """
    if not rows:
        raise ValueError('no results rows to report')
    check_resamples(num_resamples, level=level)
    check_resamples(num_diff_resamples, 'num_diff_resamples', level=level)
    check_rows(rows)
    check_rows_match_configs(rows)
    rows, missing, methods, ours, reference = _training_horizons_named(
        rows, missing, methods, ours, reference)
    check_names(metrics, METRIC_RANGES, '--metrics')
    check_one_run_per_cell(rows)
    per_seed = _collect(rows, metrics)
    methods = list(methods) if methods else list(dict.fromkeys(
        [r.method for r in rows] + [r.method for r in missing]))
    _check_named(methods, ours, reference, rows)
    shown = [r for r in rows if r.method in methods]
    check_feature_mix(shown, allow_mixed_features)
    groups = sorted({(r.dataset, r.horizon) for r in list(rows) + list(missing)
                     if r.method in methods})
    columns = [(d, h, m) for d, h in groups for m in metrics]
    cells = {}
    progress = BootstrapProgress(
        sum(shows_ci(len(v)) for (m, *c), v in per_seed.items() if m in methods
            and tuple(c) in columns), len(columns), num_resamples, num_diff_resamples)
    for method in methods:
        for column in columns:
            values = per_seed.get((method,) + column)
            if values:
                cells[(method, column)] = _cell(values, num_resamples, level, seed)
                progress.step(shows_ci(len(values)), f'{method} {_column_name(column)}')
    table = Table(methods, columns, cells, _params(rows, methods), level=level,
                  ci_style=ci_style, paired=paired, num_resamples=num_resamples,
                  num_diff_resamples=num_diff_resamples, shortened=_shortened(rows, methods),
                  pkg_sources=pkg_sources_of(rows, methods),
                  stand_ins=_stand_ins(rows, methods),
                  failures=_failures(rows, methods),
                  selections=sorted({r.selection for r in rows
                                     if r.method in methods and r.selection}),
                  usage=_usage(rows, methods),
                  oracle={r.method for r in rows if r.method in methods and is_oracle(r)},
                  feature_marks=feature_marks(shown),
                  features=features_note(shown, DATASET_LABELS),
                  missing=_missing_cells(missing, methods, metrics),
                  missing_rows=_missing_descriptions(missing, methods),
                  caveats=caveats_of(shown))
    for column in columns:
        table.improvements[column] = _improvement(table, column, ours, reference, seed)
        progress.step(True, f'Δ {_column_name(column)}', diff=True)
    return table


def _training_horizons_named(rows, missing, methods, ours, reference) -> tuple:
    """Rows trained at another horizon than tested named so (``results.renamed``: 'VPN
    (train T=6)'), as report.py names them, and ``methods`` / ``ours`` / ``reference`` given
    by their plain names followed to theirs (a method both trained at its T and tested at
    another keeps both rows)."""
    from dataclasses import replace
    names = {}
    for row in list(rows) + list(missing):
        names.setdefault(row.method, []).append(renamed(row, {}))
    follow = {old: list(dict.fromkeys(new)) for old, new in names.items()}
    named = [replace(r, method=renamed(r, {})) for r in rows]
    for new, row in zip(named, rows):
        new.read_from = row_source(row)  # where it was read, for refusals naming it
    rows = named
    missing = [replace(r, method=renamed(r, {})) for r in missing]
    if methods:
        methods = [new for m in methods for new in follow.get(m, [m])]
    one = {old: new[0] for old, new in follow.items() if len(new) == 1}
    return rows, missing, methods, one.get(ours, ours), one.get(reference, reference)


PROGRESS_RESAMPLES = 100_000  # from here one interval takes seconds (K=1e6, 5 seeds: ~18 s)


class BootstrapProgress:
    """A line on stderr per bootstrap interval when ``num_resamples`` or
    ``num_diff_resamples`` reach ``PROGRESS_RESAMPLES`` (a table of many cells then runs for
    minutes): which cell, how many done, elapsed and ETA (``progress.Progress``)."""

    def __init__(self, intervals: int, differences: int, num_resamples: int,
                 num_diff_resamples: int):
        from .progress import Progress
        self.cells = num_resamples >= PROGRESS_RESAMPLES
        self.diffs = num_diff_resamples >= PROGRESS_RESAMPLES
        total = intervals * self.cells + differences * self.diffs
        self.progress = Progress(total) if total else None
        if self.progress:
            print(f'report: {total} bootstrap intervals of up to '
                  f'{max(num_resamples, num_diff_resamples)} resamples each (seconds each; '
                  '--num-resamples / --num-diff-resamples set K)', file=sys.stderr, flush=True)

    def step(self, bootstrapped: bool, what: str, diff: bool = False) -> None:
        if self.progress is None or not bootstrapped or not (self.diffs if diff else self.cells):
            return
        self.progress.done()
        print(f'report: bootstrap of {what}{self.progress.text()}', file=sys.stderr,
              flush=True)


def _column_name(column) -> str:
    dataset, horizon, metric = column
    return f'{dataset} T={horizon} {metric}'


def check_rows(rows: list[ResultRow]) -> None:
    """Rows built in memory (the Python API) held to the rules of every row read from a file
    (``results.row_from_dict``): a NaN, 150 or True success rate, an empty method name are
    refused naming the row, not averaged into a cell."""
    for index, row in enumerate(rows):
        row_from_dict(asdict(row), f'rows[{index}] (method {row.method!r}, seed {row.seed})')


def _cell(values: dict, num_resamples, level, seed) -> CellStats:
    mean, low, high = seed_interval(np.array(list(values.values())), num_resamples, level, seed)
    return CellStats(values, mean, low, high)


def _missing_cells(missing, methods, metrics) -> dict:
    """(method, column) -> sorted seeds of the missing rows of ``methods``."""
    cells = {}
    for row in missing:
        if row.method in methods:
            for metric in metrics:
                cells.setdefault((row.method, (row.dataset, row.horizon, metric)),
                                 set()).add(row.seed)
    return {cell: sorted(seeds) for cell, seeds in cells.items()}


def _missing_descriptions(missing, methods) -> list:
    from .expected import describe_row
    return [describe_row(row) for row in missing if row.method in methods]


def caveats_of(rows) -> dict:
    """method -> {kind: sorted lines} of the rows' caveats; a line that only some of the
    method's rows hold names them (``'... (seed 1)'``, ``'... (seeds 0, 2 at T=3)'``: the
    mark beside the method is not on all its seeds)."""
    found, every = {}, {}
    for row in rows:
        every.setdefault(row.method, []).append(row)
        for kind, lines in caveat_lines(row).items():
            for line in lines:
                found.setdefault(row.method, {}).setdefault(kind, {}).setdefault(
                    line, []).append(row)
    return {method: {kind: sorted(line + _rows_named(held, every[method])
                                  for line, held in lines.items())
                     for kind, lines in kinds.items()}
            for method, kinds in found.items()}


def _rows_named(held: list, every: list) -> str:
    """'' when ``held`` are all the rows ``every`` of a method; else which seeds they are
    (with the horizon / dataset when the method's rows have several)."""
    if len({id(row) for row in held}) == len(every):
        return ''
    cells = {}
    several = [len({getattr(row, name) for row in every}) > 1 for name in ('horizon', 'dataset')]
    for row in held:
        cell = (f' at T={row.horizon}' * several[0]) + (f' on {row.dataset}' * several[1])
        cells.setdefault(cell, set()).add(row.seed)
    return ' (' + '; '.join(f'seed{"s" * (len(seeds) > 1)} {", ".join(map(str, sorted(seeds)))}'
                            f'{cell}' for cell, seeds in sorted(cells.items())) + ')'


def _stand_ins(rows, methods) -> dict:
    labels = {}
    for row in rows:
        label = row.variant.get('text_features')
        if label and row.method in methods:
            labels.setdefault(row.method, set()).add(label)
    return {method: sorted(found) for method, found in labels.items()}


def pkg_sources_of(rows, methods) -> dict:
    sources = {}
    for row in rows:
        if row.pkg_source and row.method in methods:
            sources.setdefault(row.method, set()).add(row.pkg_source)
    return {method: sorted(found) for method, found in sources.items()}


def _shortened(rows, methods) -> dict:
    reasons = {}
    for row in rows:
        reason = shortened_reason(row)
        if reason and row.method in methods:
            reasons.setdefault(row.method, set()).add(reason)
    return {method: sorted(found) for method, found in reasons.items()}


def _failures(rows, methods) -> dict:
    """Windows without an answer (``llm_eval.py --allow-failures`` rows), per method and kind."""
    counts = {}
    for row in rows:
        if row.method in methods:
            for kind, number in row.failures.items():
                per_kind = counts.setdefault(row.method, {})
                per_kind[kind] = per_kind.get(kind, 0) + number
    return counts


def is_oracle(row: ResultRow) -> bool:
    """An upper bound, not a result: an LLM run with ground-truth first/last actions
    (``variant.anchors == 'oracle'``) or a method named as an oracle."""
    return row.variant.get('anchors') == 'oracle' or 'oracle' in row.method.lower()


USAGE_FIELDS = (('total_tokens', 'cost_of_answers'), ('paid_tokens', 'cost_paid'))
LEGACY_COST = 'cost'  # rows written before issue 34: the cost of the answers used


def _usage(rows, methods) -> dict:
    """method -> {field: mean per run over seeds} of rows with a usage (LLM runs): tokens and
    cost of the answers used, tokens and cost paid in the run; a field some row lacks (an
    unpriced run, a row written before the paid fields existed) is left out."""
    found = {}
    for row in rows:
        if row.method in methods and 'total_tokens' in row.usage:
            usage = dict(row.usage)
            if LEGACY_COST in usage:
                usage.setdefault('cost_of_answers', usage[LEGACY_COST])
            found.setdefault(row.method, []).append(usage)
    fields = [f for pair in USAGE_FIELDS for f in pair]
    return {m: {f: float(np.mean([u[f] for u in used])) for f in fields
                if all(f in u for u in used)} for m, used in found.items()}


def check_one_run_per_cell(rows, free_variant=()) -> None:
    """The seeds pooled in a cell (method, dataset, test horizon) must come from one run
    setting: rows that differ in any of :data:`CELL_IDENTITY` (settings that vary per seed,
    :data:`PER_SEED_SETTINGS`, aside) are refused, naming the field, values and seeds.

    ``free_variant``: variant keys a figure plots (an x axis, a line per value): each of their
    values is a cell of its own, and the rest of the identity must still agree.
    """
    groups = {}
    for row in rows:
        free = tuple(str(row.variant.get(key)) for key in free_variant)
        groups.setdefault((row.method, row.dataset, row.horizon, free), []).append(row)
    for (method, dataset, horizon, _), members in groups.items():
        for name in CELL_IDENTITY:
            values, shown = {}, {}
            for row in members:
                value = _identity_value(row, name, free_variant)
                values.setdefault(value, []).append(row.seed)
                shown.setdefault(value, set()).add(
                    _config_shown(row.config) if name == 'config' else value)
            if len(values) > 1:
                found = '; '.join(f'{" or ".join(sorted(shown[value]))} (seed'
                                  f'{"s" * (len(seeds) > 1)} {", ".join(map(str, sorted(seeds)))})'
                                  for value, seeds in values.items())
                raise ValueError(
                    f'rows of method {method!r} (dataset {dataset!r}, T={horizon}) differ in '
                    f'{name}: {found}; a cell averages the seeds of ONE run setting: keep one '
                    'with --protocol / --variant (or --methods), or give the others another '
                    'method name (--rename works on names only)')


def _identity_value(row: ResultRow, name: str, free_variant=()) -> str:
    value = getattr(row, name)
    if name == 'settings':
        value = {k: v for k, v in settings_identity(value).items() if k not in PER_SEED_SETTINGS}
        if isinstance(value.get('pretrained'), dict):  # a pre-training stage runs per seed
            value['pretrained'] = {k: v for k, v in value['pretrained'].items() if k != 'seed'}
    if name == 'variant':
        value = {k: v for k, v in value.items() if k not in free_variant}
    if name == 'shortened':  # full run or not; the reasons' words may differ (true, a text)
        value = 'shortened' if shortened_reason(row) else 'full run'
    if name == 'train_horizon' and value is None:  # null: trained at the row's own horizon
        value = row.horizon
    if name == 'config':
        return _config_identity(value)
    return identity_text(value)


def _config_identity(config: str) -> str:
    """The config a row names as one file, however it is spelt (``/abs/configs/x.py``,
    ``configs/x.py``, ``./x.py`` from another folder, a link to it): the resolved file
    (``results.config_file``, links followed) and the bytes of it and its ``_base_`` files
    (``configs.config_content``); two files of one name are two configs. A name that is no
    file here (a model name, another machine's path) is its text."""
    from .configs import config_content
    found = config_file(config)
    if found is None:
        return identity_text(config)
    resolved = os.path.realpath(found)
    return identity_text(['file', resolved, config_content(resolved)])


def _config_shown(config: str) -> str:
    """A row's config as the refusal names it: as written, and the file it is here."""
    found = config_file(config)
    resolved = found and os.path.realpath(found)
    named = resolved and resolved != config
    return identity_text(config) + (f' (the file {resolved})' if named else '')


def _collect(rows, metrics) -> dict:
    per_seed, first = {}, {}
    for row in rows:
        for metric in metrics:
            if metric not in row.metrics:
                raise ValueError(
                    f'the row of method {row.method!r} (dataset {row.dataset!r}, '
                    f'T={row.horizon}) seed {row.seed} lacks the metric {metric!r} (it has '
                    f'{sorted(row.metrics)}); a cell never silently drops a seed: choose '
                    '--metrics every row has, or rerun that seed')
            values = per_seed.setdefault((row.method, row.dataset, row.horizon, metric), {})
            if row.seed in values:
                same = values[row.seed] == row.metrics[metric]
                earlier = first[(row.method, row.dataset, row.horizon, row.seed)]
                raise ValueError(
                    f'duplicate results for method={row.method!r} dataset={row.dataset!r} '
                    f'horizon={row.horizon} seed={row.seed}: two rows of one run setting '
                    f'({row_source(earlier) or "a row"} and {row_source(row) or "a row"}: '
                    f'{metric} {values[row.seed]:g} and {row.metrics[metric]:g}), '
                    + ('the same row twice (a results file copied into another?)' if same else
                       'two measurements of one run (a rerun appended instead of replacing '
                       'its row?)') + '; a cell holds one row per seed: keep one')
            values[row.seed] = row.metrics[metric]
            first.setdefault((row.method, row.dataset, row.horizon, row.seed), row)
    # in seed order, as the authors' script lists them: the bootstrap draws positions, so
    # the rows' order in the file (tasks of a job array end in any order) must not matter
    return {key: dict(sorted(values.items())) for key, values in per_seed.items()}


def _check_named(methods, ours, reference, rows):
    known = {r.method for r in rows}
    if ours is not None and ours == reference:
        raise ValueError(f'--ours and --reference both name {ours!r}; the improvement row '
                         'compares two methods: name another --reference')
    for name in (ours, reference):
        if name is not None and name not in known:
            raise ValueError(f'--ours/--reference: method {name!r} is not among the rows the '
                             'table is made of (the results kept by --methods, --protocol, '
                             '--dataset, --horizons and --variant, after --rename); their '
                             f'methods: {sorted(known)}')
        if name is not None and name not in methods:
            methods.append(name)


def _params(rows, methods) -> dict:
    """method -> the sorted distinct parameter counts of its rows: several when its models
    differ across the columns (one model per horizon), shown as a range."""
    return {method: tuple(sorted({r.params for r in rows
                                  if r.method == method and r.params is not None}))
            for method in methods}


def ranked(table: Table, column, digits: int) -> tuple:
    """(best, second): the sets of methods whose mean in ``column`` is the best and second
    best AS PRINTED with ``digits`` decimals (:data:`EXTRA_DIGITS` added): two means that
    print alike share the mark (30.004 and 29.996 both print 30.00: both bold, never one
    of two equal numbers); empty sets for a column that is not ranked."""
    direction = METRIC_DIRECTION.get(column[2], 1)
    places = digits + EXTRA_DIGITS.get(column[2], 0)
    printed = {m: direction * float(f'{table.cells[(m, column)].mean:.{places}f}')
               for m in table.methods if (m, column) in table.cells and direction != 0}
    distinct = sorted(set(printed.values()), reverse=True)[:2]
    return tuple({m for m, v in printed.items() if v == value} for value in distinct) + \
        (set(),) * (2 - len(distinct))


def _printed_ties(table: Table, digits: int) -> bool:
    """Some mark is shared by means that differ unrounded (:func:`ranked`)."""
    for column in table.columns:
        for marked in ranked(table, column, digits):
            if len({table.cells[(m, column)].mean for m in marked}) > 1:
                return True
    return False


def _improvement(table, column, ours, reference, seed):
    direction = METRIC_DIRECTION.get(column[2], 1)
    if direction == 0:
        return None
    ranked = sorted((m for m in table.methods if (m, column) in table.cells),
                    key=lambda m: -direction * table.cells[(m, column)].mean)
    if any(m not in table.oracle for m in ranked):  # an oracle is no default comparison
        ranked = [m for m in ranked if m not in table.oracle]
    ours = ours or (ranked[0] if ranked else None)
    reference = reference or next((m for m in ranked if m != ours), None)
    if ours is None or reference is None or ours == reference:
        return None
    if (ours, column) not in table.cells or (reference, column) not in table.cells:
        return None
    a, b = _compared_values(table.cells[(ours, column)].values,
                            table.cells[(reference, column)].values, table.paired)
    if a is None:  # the asked paired comparison would vanish as "Δ: none"
        raise ValueError(f'paired Δ of {ours!r} minus {reference!r}: no seed in common (seeds '
                         f'{sorted(table.cells[(ours, column)].values)} and '
                         f'{sorted(table.cells[(reference, column)].values)}); expected runs of '
                         'the same seeds, or paired=False (tools/report.py without --paired)')
    if not shows_ci(min(len(a), len(b))):
        return Improvement(ours, reference, float(a.mean() - b.mean()), None, None, False,
                           (len(a), len(b)))
    delta, low, high, significant = bootstrap_difference(
        a, b, num_resamples=table.num_diff_resamples, level=table.level, seed=seed,
        paired=table.paired)
    return Improvement(ours, reference, delta, low, high, bool(significant), (len(a), len(b)))


def _compared_values(a_values: dict, b_values: dict, paired: bool):
    """(a, b) arrays: every seed of each model, or (paired) the seeds both have, in order;
    (None, None) when pairing finds no common seed."""
    if not paired:
        return np.array(list(a_values.values())), np.array(list(b_values.values()))
    seeds = sorted(set(a_values) & set(b_values))
    if not seeds:
        return None, None
    return np.array([a_values[s] for s in seeds]), np.array([b_values[s] for s in seeds])


# ----------------------------------------------------------------------------- formatting
def format_params(count) -> str:
    """``1234567 -> '1.23M'``; ``None -> '-'``."""
    if count is None:
        return '-'
    for scale, suffix in ((1e9, 'B'), (1e6, 'M'), (1e3, 'K')):
        if count >= scale:
            return f'{count / scale:.2f}{suffix}'
    return str(int(count))


def _column_label(table: Table, column, latex=False) -> str:
    dataset, horizon, metric = column
    datasets = {c[0] for c in table.columns}
    # a row of --average-datasets names its datasets ('mean(crosstask,niv)'): always shown
    shown = len(datasets) > 1 or dataset.startswith(AVERAGED_DATASETS)
    prefix = f'{DATASET_LABELS.get(dataset, dataset)} ' if shown else ''
    label = METRIC_LABELS.get(metric, metric)
    return f'{prefix}T={horizon} {label}'


def _show_params(table: Table) -> bool:
    return any(table.params.values())


def _params_text(counts: tuple) -> str:
    """``(5482390,) -> '5.48M'``; ``(5482390, 5507062) -> '5.48M-5.51M'``; ``() -> '-'``."""
    if len(counts) > 1:
        return f'{format_params(counts[0])}-{format_params(counts[-1])}'
    return format_params(counts[0] if counts else None)


def _params_legend(table: Table) -> str:
    if not any(len(counts) > 1 for counts in table.params.values()):
        return ''
    return ('Params a-b: the method\'s models differ in size across the columns (one model per '
            'horizon or dataset): the smallest and the largest.')


def _extra_columns(table: Table) -> list:
    """(header, method -> text) of the Params, Tokens and Cost columns the table shows."""
    columns = []
    if _show_params(table):
        columns.append(('Params', lambda m: _params_text(table.params[m])))
    headers = {'total_tokens': 'Tokens', 'paid_tokens': 'Paid tokens',
               'cost_of_answers': 'Cost', 'cost_paid': 'Paid'}
    for name in ('total_tokens', 'paid_tokens', 'cost_of_answers', 'cost_paid'):
        if any(name in used for used in table.usage.values()):
            columns.append((headers[name], _usage_cell(table, name)))
    return columns


def _usage_cell(table: Table, name: str):
    def text(method):
        value = table.usage.get(method, {}).get(name)
        if value is None:
            return '-'
        return format_params(value) if name.endswith('tokens') else money_text(value)
    return text


@checked_arguments
def to_markdown(table: Table, *, title: str = '', digits: NonNegativeInt = DIGITS) -> str:
    """Markdown: bold best, ``<u>`` second, ``±`` the CI spread, ``*`` significant."""
    extra = _extra_columns(table)
    # a dataset is any name of the rows' ('*x*', 'R&amp;D'): the labels are text, never markup
    header = ['Method'] + [name for name, _ in extra] + \
        [markdown_text(_column_label(table, c)) for c in table.columns]
    title = _title_text(title)
    lines = ([f'**{markdown_text(title)}**', ''] if title else []) + \
        [markdown_row(header), '|' + '---|' * len(header)]
    for method in table.methods:
        cells = [markdown_text(_method_label(table, method))] + \
            [text(method) for _, text in extra]
        for column in table.columns:
            cells.append(_cell_text(table, method, column, digits, latex=False))
        lines.append(markdown_row(cells))
    lines.append(markdown_row(_improvement_cells(table, digits, latex=False)))
    lines += ['', markdown_text(_legend(table, False, digits)), '', REPORT_MARKDOWN_MARKER]
    return '\n'.join(lines) + '\n'


@checked_arguments
def to_latex(table: Table, *, title: str = '', label: str = '',
             digits: NonNegativeInt = DIGITS) -> str:
    """A ``table`` environment (booktabs): ``\\textbf`` best, ``\\underline`` second."""
    extra = _extra_columns(table)
    spec = 'l' + 'r' * len(extra) + 'c' * len(table.columns)
    header = ['Method'] + [name for name, _ in extra] + \
        [_latex_escape(_column_label(table, c)) for c in table.columns]
    lines = [REPORT_LATEX_MARKER, r'\begin{table}[t]', r'\centering', r'\small',
             rf'\begin{{tabular}}{{{spec}}}', r'\toprule', ' & '.join(header) + r' \\',
             r'\midrule']
    for method in table.methods:
        cells = [_latex_row_start(_latex_escape(_method_label(table, method)))] + \
            [text(method) for _, text in extra]
        cells += [_cell_text(table, method, c, digits, latex=True) for c in table.columns]
        lines.append(' & '.join(cells) + r' \\')
    lines += [r'\midrule', ' & '.join(_improvement_cells(table, digits, latex=True)) + r' \\',
              r'\bottomrule', r'\end{tabular}']
    title = _title_text(title)
    caption = (_latex_escape(title) + ('' if title.endswith(('.', '!', '?')) else '.') + ' '
               if title else '') + _legend(table, True, digits)
    lines.append(rf'\caption{{{caption}}}')
    if label:
        lines.append(rf'\label{{{label}}}')
    lines.append(r'\end{table}')
    unset = sorted({ch for line in lines for ch in line
                    if ord(ch) > 127 and ch not in PDFLATEX_CHARACTERS})
    if unset:  # pdfLaTeX stops at the first one it has no definition of
        lines.insert(1, f'% holds characters pdfLaTeX does not set with LaTeX\'s default fonts '
                     f'({" ".join(unset)}): compile with LuaLaTeX or XeLaTeX (a Unicode font), '
                     'or define them for pdfLaTeX')
    return '\n'.join(lines) + '\n'


# the non-ASCII characters pdfLaTeX's UTF-8 input (LaTeX's default since 2018) sets with the
# default fonts (article + booktabs, OT1, no fontenc): each compiled with pdflatex of TeX Live
# 2022, one a line; the others of Latin-1 / Latin Extended-A / General Punctuation (e.g. « Ð
# ą ≤ α 一) stop it ("not set up for use with LaTeX", "unavailable in encoding OT1")
PDFLATEX_CHARACTERS = frozenset(
    '\xa0¡¢£¤¥¦§¨©ª¬®¯°±²³´µ¶·¸¹º¼½¾¿ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖ×ØÙÚÛÜÝßàáâãäåæçèéêëìíîïñòóôõö÷øùúû'
    'üýÿĀāĂăĆćĈĉĊċČčĎďĒēĔĕĖėĚěĜĝĞğĠġĢģĤĥĨĩĪīĬĭİıĲĳĴĵĶķĹĺĻļĽľŁłŃńŅņŇňŌōŎŏŐőŒœŔŕŖŗŘřŚśŜŝŞşŠšŢţ'
    'ŤťŨũŪūŬŭŮůŰűŴŵŶŷŸŹźŻżŽžƒǄǅǆǇǈǉǊǋǌǍǎǏǐǑǒǓǔǢǣǦǧǨǩǰǴǵȘșȚțȲȳȷ‐‑‒–—―‖‘’“”†‡•…‰‱※‽⁄⁎€™←→')


def _latex_row_start(cell: str) -> str:
    """A row's first cell as it may follow ``\\midrule`` or the previous row's ``\\\\``: both
    read a following ``[`` (blanks skipped) as their optional argument (a name '[12] SCHEMA'
    lost its '[12]', or '\\midrule [x]' hung pdfLaTeX) and ``\\\\`` a ``*`` as its star: ``{}``
    ends their look-ahead."""
    return '{}' + cell if cell.lstrip().startswith(('[', '*')) else cell


def _title_text(title: str) -> str:
    """The title as both tables show it: blanks collapsed ('**Results **' would be no bold in
    CommonMark), a blank title none (in the .md and the .tex alike)."""
    return ' '.join(title.split())


def _method_label(table: Table, method: str) -> str:
    """The method's name, ``†`` for a shortened run, and its failed windows by kind."""
    label = method + (SHORTENED_MARK if method in table.shortened else '') + \
        table.feature_marks.get(method, '') + \
        (STAND_IN_MARK if method in table.stand_ins else '') + \
        caveat_suffix(method, table.caveats) + \
        (f'{TEST_SET_PKG_MARK} ({", ".join(table.pkg_sources[method])})'
         if method in table.pkg_sources else '')
    failed = table.failures.get(method)
    if failed:
        kinds = ', '.join(f'{kind} {number}' for kind, number in sorted(failed.items()))
        label += f' (failed: {sum(failed.values())} windows: {kinds})'
    return label


def _plus_minus(value: float, spread, digits: int, latex: bool, mark: str = '') -> str:
    """``'v'``, ``'v ± s'`` (Markdown) or ``'v{\\scriptsize$\\pm$s}'`` (LaTeX); ``mark``
    (significance) follows the value; ``value`` signed when ``mark`` is not None."""
    text = f'{value:+.{digits}f}' if mark is not None else f'{value:.{digits}f}'
    if mark:
        text += f'$^{{{mark}}}$' if latex else mark
    if spread is None:
        return text
    if latex:
        return rf'{text}{{\scriptsize$\pm${spread:.{digits}f}}}'
    return f'{text} ± {spread:.{digits}f}'


def _cell_text(table, method, column, digits, latex) -> str:
    incomplete = ''
    if (method, column) in table.missing:
        incomplete = r'\textsuperscript{\P}' if latex else MISSING_MARK
    stats = table.cells.get((method, column))
    if stats is None:
        return '-' + incomplete
    best, second = ranked(table, column, digits)
    digits += EXTRA_DIGITS.get(column[2], 0)
    text = _plus_minus(stats.mean, ci_spread(stats, table.ci_style), digits, latex, mark=None)
    best_mark, second_mark = RANK_MARKS[latex]
    if method in best:
        return best_mark.format(text) + incomplete
    if method in second:
        return second_mark.format(text) + incomplete
    return text + incomplete


def _improvement_cells(table, base_digits, latex) -> list:
    cells = ['$\\Delta$' if latex else 'Δ'] + [''] * len(_extra_columns(table))
    for column in table.columns:
        imp = table.improvements.get(column)
        if imp is None:
            cells.append('-')
            continue
        digits = _delta_places(imp, base_digits + EXTRA_DIGITS.get(column[2], 0))
        cells.append(_plus_minus(imp.delta, ci_spread(imp, table.ci_style), digits, latex,
                                 mark='*' if imp.significant else ''))
    return cells


def _delta_places(imp, digits: int) -> int:
    """The decimals a Δ prints with: ``digits``, more for a significant Δ that would print
    as zero ("+0.00*" would call 0 significantly better): the fewest that show a nonzero
    digit (at most 12)."""
    if imp is None or not imp.significant:
        return digits
    return next((places for places in range(digits, digits + 13)
                 if float(f'{imp.delta:.{places}f}') != 0), digits + 12)


LATEX_PM, LATEX_DELTA = '\ue000', '\ue001'  # stand-ins for $\pm$ / $\Delta$ until escaped


def _legend(table: Table, latex: bool, digits: int = DIGITS) -> str:
    r"""The caption; in LaTeX every name of the user's (methods, features) is escaped as
    text, as in the table's rows: only the legend's own ``$\pm$`` / ``$\Delta$`` are math."""
    pm = LATEX_PM if latex else '±'
    delta = LATEX_DELTA if latex else 'Δ'
    text = ' '.join(filter(None, [_missing_legend(table),
                                  _cell_legend(table, pm), _ties_legend(table, digits),
                                  _improvement_legend(table, delta, pm, digits),
                                  _few_seeds_legend(table), _shortened_legend(table),
                                  table.features,
                                  _pkg_source_legend(table),
                                  _stand_in_legend(table), _caveat_legend(table),
                                  _selection_legend(table),
                                  _oracle_legend(table), _usage_legend(table),
                                  _params_legend(table)]))
    shown = {c[2] for c in table.columns}
    if 'plan_jsd' in shown or 'plan_entropy' in shown:
        text += (' Decoding diversity on windows sharing start and goal actions: entropy of the '
                 'predicted plans (descriptive, not ranked) and their JS divergence from the '
                 'ground-truth plans (lower is better), in bits.')
    if not latex:
        return text
    return _latex_escape(text).replace(LATEX_PM, r'$\pm$').replace(LATEX_DELTA, r'$\Delta$')


def _percentile_names(level: float) -> tuple:
    tail = 100.0 * (1.0 - level) / 2.0
    return f'p{100 - tail:g}', f'p{tail:g}'


def _spread_words(table: Table) -> str:
    high, low = _percentile_names(table.level)
    if table.ci_style == 'width':
        return f'full width {high} - {low}'
    return f'half-width ({high} - {low})/2 (not the paper\'s full width)'


def _cell_legend(table: Table, pm: str) -> str:
    seeds = ",".join(map(str, sorted({len(c.values) for c in table.cells.values()})))
    if all(c.low is None for c in table.cells.values()):
        return f'Mean over seeds (n={seeds}); best in bold, second underlined.'
    return (f'Mean over seeds (n={seeds}) {pm} {_spread_words(table)} of the '
            f'{int(round(table.level * 100))}% percentile-bootstrap interval of the seed mean '
            f'(K={table.num_resamples} resamples of the seeds); best in bold, second '
            f'underlined.')


def _ties_legend(table: Table, digits: int) -> str:
    """Said when it decides a mark: means equal as printed share it (:func:`ranked`)."""
    return ('Marks follow the means as printed: means that print alike share the mark.'
            if _printed_ties(table, digits) else '')


def _improvement_legend(table: Table, delta: str, pm: str, digits: int = DIGITS) -> str:
    pairs = {}  # (ours, reference, seeds) -> column labels, in column order
    for column in table.columns:
        imp = table.improvements.get(column)
        if imp is not None:
            pairs.setdefault((imp.ours, imp.reference, imp.num_seeds), []).append(
                _column_label(table, column))
    if not pairs:
        return f'{delta}: none.'
    who = '; '.join((f'{", ".join(cols)}: ' if len(pairs) > 1 else '')
                    + (f'{o} minus {r} ({n[0]} common seeds)' if table.paired
                       else f'{o} minus {r} ({n[0]} and {n[1]} seeds)')
                    for (o, r, n), cols in pairs.items())
    if all(table.improvements[c].low is None for c in table.columns if table.improvements[c]):
        return f'{delta}: {who}.'
    if table.paired:
        how = 'paired bootstrap over the common seeds, not the paper\'s test'
    else:
        how = (f'each replicate resamples each method\'s seeds independently, '
               f'{delta}* = mean(A*) - mean(B*)')
    more = ('' if all(_delta_places(table.improvements[c], digits) == digits
                      for c in table.columns if table.improvements[c]) else
            f' A significant {delta} that rounds to zero is printed with the decimals that '
            'show it.')
    return (f'{delta}: {who}, {pm} {_spread_words(table)} of the '
            f'{int(round(table.level * 100))}% percentile interval of {delta}* over '
            f'K={table.num_diff_resamples} replicates ({how}); * = interval excludes 0.'
            + more)


def _few_seeds_legend(table: Table) -> str:
    few = sorted({len(c.values) for c in table.cells.values() if c.low is None})
    if not few:
        return ''
    return (f'{", ".join(f"n={n}" for n in few)}: no CI and no significance mark (fewer than '
            f'{MIN_SEEDS_FOR_CI} seeds).')


def _missing_legend(table: Table) -> str:
    """First in the caption: the table is of an incomplete protocol."""
    if not table.missing_rows:
        return ''
    shown = table.missing_rows[:MISSING_LISTED]
    more = len(table.missing_rows) - len(shown)
    return (f'{MISSING_MARK} INCOMPLETE: {len(table.missing_rows)} result row(s) of the '
            f'protocol are missing ({"; ".join(shown)}{f"; and {more} more" if more else ""}); '
            f'a cell marked {MISSING_MARK} averages only the seeds it has (- : none), so it is '
            'not the protocol\'s result.')


def _shortened_legend(table: Table) -> str:
    if not table.shortened:
        return ''
    runs = '; '.join(f'{m}: {", ".join(table.shortened[m])}'  # in the table's order
                     for m in table.methods if m in table.shortened)
    return (f'{SHORTENED_MARK} shortened runs ({runs}), not the full schedule or test set: '
            f'not comparable to the paper.')


def _pkg_source_legend(table: Table) -> str:
    return pkg_source_sentence(table.pkg_sources)


def pkg_source_sentence(pkg_sources: dict) -> str:
    """The sentence under a table or figure with test-set-PKG rows ('' without)."""
    if not pkg_sources:
        return ''
    return (f'{TEST_SET_PKG_MARK} test-set PKG: the graph was read from a file '
            '(model.released_graph), not counted by the run on its training videos; KEPP\'s '
            'released graphs hold test videos, and which videos another file holds the run cannot '
            'tell: not comparable to the other rows.')


def _caveat_legend(table: Table) -> str:
    return ' '.join(caveat_sentences(table.methods, table.caveats))


def caveat_sentences(methods, caveats: dict) -> list:
    """One sentence per kind of caveat (``caveats``: method -> {kind: lines}, as
    :func:`_caveats` gives): its mark, what it means, each method's lines (tables and
    figures)."""
    parts = []
    for kind, mark in CAVEAT_MARKS.items():
        marked = [m for m in methods if kind in caveats.get(m, {})]
        if marked:
            said = '; '.join(f'{m}: {", ".join(caveats[m][kind])}' for m in marked)
            parts.append(f'{mark} {CAVEAT_WORDS[kind]} ({said}).')
    return parts


# the same kinds in a figure's note, short (the marks beside the names say which methods)
CAVEAT_SHORT = {'changed_from_training': 'options changed from training',
                'not_compared': 'training facts not recorded, not compared',
                'feature_scale': 'features of another scale than training',
                'task_source': 'true task given (oracle input)',
                'damaged_features': 'damaged videos\' features',
                'reduced_precision': 'checkpoint in half precision'}


def caveat_note(caveats: dict) -> str:
    """One short sentence of the caveat kinds present (figures; '' without)."""
    kinds = [kind for kind in CAVEAT_MARKS if any(kind in found for found in caveats.values())]
    return '; '.join(f'{CAVEAT_MARKS[kind]} {CAVEAT_SHORT[kind]}' for kind in kinds) + \
        ('; see the results rows\' caveats' if kinds else '')


def caveat_suffix(method: str, caveats: dict) -> str:
    """The caveat marks after a method's name (tables and figures)."""
    return ''.join(CAVEAT_MARKS[kind] for kind in CAVEAT_MARKS
                   if kind in caveats.get(method, {}))


def _stand_in_legend(table: Table) -> str:
    if not table.stand_ins:
        return ''
    labels = sorted({label for found in table.stand_ins.values() for label in found})
    return f'{STAND_IN_MARK} text features: {"; ".join(labels)}.'


def _oracle_legend(table: Table) -> str:
    """A table mixing ORACLE rows with others says which rows are upper bounds."""
    if not table.oracle or table.oracle >= set(table.methods):
        return ''
    return (f'ORACLE rows ({", ".join(m for m in table.methods if m in table.oracle)}) are '
            'upper bounds given ground-truth information (e.g. the first/last actions), not '
            'comparable results; they are not the default comparison of the improvement row.')


def _usage_legend(table: Table) -> str:
    if not table.usage:
        return ''
    shown = {name for used in table.usage.values() for name in used}
    parts = ['Tokens: prompt + completion tokens of the answers one run used (cached replies '
             'included), mean over seeds.']
    if 'paid_tokens' in shown:
        parts.append('Paid tokens: those of the requests the run itself sent (0 when every '
                     'answer came from the cache).')
    if 'cost_of_answers' in shown:
        parts.append('Cost: of the answers used, at the run\'s price per 1k tokens '
                     '(llm_eval.py --price-per-1k).')
    if 'cost_paid' in shown:
        parts.append('Paid: what the run\'s own requests cost at that price.')
    return ' '.join(parts)


def _selection_legend(table: Table) -> str:
    """Which checkpoints were tested ('unified': selected on held-out training videos;
    'authors': on the test windows, as the authors' scripts)."""
    if not table.selections:
        return ''
    return f'Tested checkpoints: {"; ".join(table.selections)}.'


def _latex_escape(text: str) -> str:
    """``text`` (a name of the user's: method, title, caption) as LaTeX text, never markup;
    the report's marks as their LaTeX symbols."""
    replacements = {'&': r'\&', '%': r'\%', '_': r'\_', '#': r'\#',
                    SHORTENED_MARK: r'\textsuperscript{\dag}',
                    STAND_IN_MARK: r'\textsuperscript{\ddag}',
                    TEST_SET_PKG_MARK: r'\textsuperscript{\S}',
                    SYNTHETIC_MARK: r'\textsuperscript{\textbardbl}',
                    UNUSABLE_MARK: r'\textsuperscript{$\times$}',
                    MISSING_MARK: r'\textsuperscript{\P}',
                    CAVEAT_MARKS['changed_from_training']: r'\textsuperscript{$\sharp$}',
                    CAVEAT_MARKS['not_compared']: r'\textsuperscript{$\flat$}',
                    CAVEAT_MARKS['feature_scale']: r'\textsuperscript{$\approx$}',
                    CAVEAT_MARKS['task_source']: r'\textsuperscript{$\star$}',
                    CAVEAT_MARKS['damaged_features']: r'\textsuperscript{$\otimes$}',
                    CAVEAT_MARKS['reduced_precision']: r'\textsuperscript{$\frac{1}{2}$}'}
    replacements.update({'$': r'\$', '\\': r'\textbackslash{}', '{': r'\{', '}': r'\}',
                         # OT1 (LaTeX's default text font) prints | < > as an em dash, ¡, ¿
                         '|': r'\textbar{}', '<': r'\textless{}', '>': r'\textgreater{}',
                         '~': r'\textasciitilde{}', '^': r'\textasciicircum{}',
                         # and " as a closing curly quote, ` as an opening one: the typewriter
                         # font has the straight ones
                         '"': r'\texttt{"}', '`': r'\textasciigrave{}'})
    text = _LATEX_LINE_BREAKS.sub(' ', text)  # a blank line is \par: no cell nor caption holds one
    text = _LATEX_CONTROLS.sub(_caret_notation, text)
    return _LATEX_LIGATURES.sub(lambda m: m.group(0)[0] + '{}', ''.join(
        replacements.get(ch, ch) for ch in text))


# TeX's ligatures of the default fonts would print another name than the user's: '--' an en
# dash, '---' an em dash, "''" a curly double quote, and with T1 (\usepackage[T1]{fontenc},
# most papers) ',,' a low double quote „: '{}' breaks each ('<<' / '>>', T1's « », are written
# as \textless{} / \textgreater{}; a backquote as \textasciigrave{}, so no '?`', '!`' or '``')
_LATEX_LIGATURES = re.compile(r"-(?=-)|'(?=')|,(?=,)")
_LATEX_LINE_BREAKS = re.compile(rf'\s*(?:{LINE_BREAK.pattern})\s*')  # TeX ends lines at \r too
# control characters (Unicode Cc) stop pdfLaTeX ("invalid character", "Unicode character ^^[
# not set up") or act (^^L is \par): written in TeX's own caret notation, as its log shows them
_LATEX_CONTROLS = re.compile('[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]')


def _caret_notation(match) -> str:
    """``^^[`` for ESC, ``^^?`` for DEL, ``^^85`` for U+0085 (escaped after as text)."""
    code = ord(match.group(0))
    return '^^' + (chr(code ^ 0x40) if code < 0x80 else f'{code:02x}')

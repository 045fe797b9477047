"""Paper tables from results files (format: :mod:`vpn_plugin.protocol.results`).

A table has one row per method and one column per (dataset, horizon, metric). Each cell is
the mean over seeds with a 90% bootstrap CI over the per-seed values (K=100 resamples,
``vpn_plugin.core.bootstrap_ci``), shown as ``mean ± half-width``. Per column the best
method is bold and the second best underlined (higher is better, except ``plan_jsd``: lower;
``plan_entropy`` is descriptive and not ranked; ties share the mark). An extra row gives the
improvement of ``ours`` over ``reference`` (by default the best over the second best) with a
paired bootstrap CI over seeds (K=1000, ``vpn_plugin.core.bootstrap_difference``); a ``*``
marks a CI that excludes zero.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vpn_plugin.core.stats import bootstrap_ci, bootstrap_difference
from .results import METRIC_LABELS, ResultRow

DEFAULT_METRICS = ('success_rate', 'mean_accuracy', 'miou_set')
# +1: higher is better (default), -1: lower is better, 0: descriptive (no marks, no delta)
METRIC_DIRECTION = {'plan_jsd': -1, 'plan_entropy': 0}
EXTRA_DIGITS = {'plan_jsd': 1}  # values in [0, 1] bits need one more decimal than percents
DATASET_LABELS = {'crosstask': 'CrossTask', 'niv': 'NIV', 'coin': 'COIN'}
# (best, second best) markup: Markdown, LaTeX
RANK_MARKS = {False: ('**{}**', '<u>{}</u>'), True: (r'\textbf{{{}}}', r'\underline{{{}}}')}


@dataclass
class CellStats:
    """Mean and bootstrap CI over the per-seed values ``values`` (keyed by seed)."""
    values: dict
    mean: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


@dataclass
class Improvement:
    """``ours - reference`` on seeds both have, with its paired bootstrap CI."""
    ours: str
    reference: str
    delta: float
    low: float
    high: float
    significant: bool
    num_seeds: int


@dataclass
class Table:
    methods: list
    columns: list          # (dataset, horizon, metric)
    cells: dict            # (method, column) -> CellStats
    params: dict           # method -> int | None
    best: dict = field(default_factory=dict)      # column -> set of methods
    second: dict = field(default_factory=dict)    # column -> set of methods
    improvements: dict = field(default_factory=dict)  # column -> Improvement | None
    level: float = 0.90


def build_table(rows: list[ResultRow], metrics=DEFAULT_METRICS, *, methods=None,
                ours=None, reference=None, num_resamples=100, num_diff_resamples=1000,
                level=0.90, seed=0) -> Table:
    """Aggregate rows into a :class:`Table`.

    ``methods`` fixes the row order (default: order of first appearance). Several rows of the
    same (method, dataset, horizon, seed) are an error: the protocol must give each run once.
    """
    if not rows:
        raise ValueError('no results rows to report')
    per_seed = _collect(rows, metrics)
    methods = list(methods) if methods else list(dict.fromkeys(r.method for r in rows))
    _check_named(methods, ours, reference, rows)
    groups = sorted({(r.dataset, r.horizon) for r in rows if r.method in methods})
    columns = [(d, h, m) for d, h in groups for m in metrics]
    cells = {}
    for method in methods:
        for column in columns:
            values = per_seed.get((method,) + column)
            if values:
                mean, low, high = bootstrap_ci(np.array(list(values.values())),
                                               num_resamples=num_resamples, level=level,
                                               seed=seed)
                cells[(method, column)] = CellStats(values, float(mean), float(low), float(high))
    table = Table(methods, columns, cells, _params(rows, methods), level=level)
    for column in columns:
        _rank(table, column)
        table.improvements[column] = _improvement(table, column, ours, reference,
                                                  num_diff_resamples, level, seed)
    return table


def _collect(rows, metrics) -> dict:
    per_seed = {}
    for row in rows:
        for metric in metrics:
            if metric not in row.metrics:
                continue
            values = per_seed.setdefault((row.method, row.dataset, row.horizon, metric), {})
            if row.seed in values:
                raise ValueError(
                    f'duplicate results for method={row.method!r} dataset={row.dataset!r} '
                    f'horizon={row.horizon} seed={row.seed}; filter by protocol/variant first')
            values[row.seed] = row.metrics[metric]
    return per_seed


def _check_named(methods, ours, reference, rows):
    known = {r.method for r in rows}
    for name in (ours, reference):
        if name is not None and name not in known:
            raise ValueError(f'method {name!r} not in the results; known methods: {sorted(known)}')
        if name is not None and name not in methods:
            methods.append(name)


def _params(rows, methods) -> dict:
    params = {}
    for method in methods:
        counts = {r.params for r in rows if r.method == method and r.params is not None}
        params[method] = max(counts) if counts else None
    return params


def _rank(table: Table, column) -> None:
    direction = METRIC_DIRECTION.get(column[2], 1)
    means = {m: direction * table.cells[(m, column)].mean for m in table.methods
             if (m, column) in table.cells and direction != 0}
    distinct = sorted({round(v, 10) for v in means.values()}, reverse=True)
    table.best[column] = {m for m, v in means.items() if round(v, 10) == distinct[0]} \
        if distinct else set()
    table.second[column] = {m for m, v in means.items() if round(v, 10) == distinct[1]} \
        if len(distinct) > 1 else set()


def _improvement(table, column, ours, reference, num_resamples, level, seed):
    direction = METRIC_DIRECTION.get(column[2], 1)
    if direction == 0:
        return None
    ranked = sorted((m for m in table.methods if (m, column) in table.cells),
                    key=lambda m: -direction * table.cells[(m, column)].mean)
    ours = ours or (ranked[0] if ranked else None)
    reference = reference or next((m for m in ranked if m != ours), None)
    if ours is None or reference is None or ours == reference:
        return None
    if (ours, column) not in table.cells or (reference, column) not in table.cells:
        return None
    a_values = table.cells[(ours, column)].values
    b_values = table.cells[(reference, column)].values
    seeds = sorted(set(a_values) & set(b_values))
    if len(seeds) < 2:
        return None
    a = np.array([a_values[s] for s in seeds])
    b = np.array([b_values[s] for s in seeds])
    delta, low, high, significant = bootstrap_difference(a, b, num_resamples=num_resamples,
                                                         level=level, seed=seed)
    return Improvement(ours, reference, float(delta), float(low), float(high),
                       bool(significant), len(seeds))


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
    prefix = f'{DATASET_LABELS.get(dataset, dataset)} ' if len(datasets) > 1 else ''
    label = METRIC_LABELS.get(metric, metric)
    return f'{prefix}T={horizon} {label}'


def _show_params(table: Table) -> bool:
    return any(v is not None for v in table.params.values())


def to_markdown(table: Table, *, title: str = '', digits: int = 2) -> str:
    """Markdown: bold best, ``<u>`` second, ``±`` half-width of the CI, ``*`` significant."""
    header = ['Method'] + (['Params'] if _show_params(table) else []) + \
        [_column_label(table, c) for c in table.columns]
    lines = ([f'**{title}**', ''] if title else []) + \
        ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    for method in table.methods:
        cells = [method] + ([format_params(table.params[method])] if _show_params(table) else [])
        for column in table.columns:
            cells.append(_cell_text(table, method, column, digits, latex=False))
        lines.append('| ' + ' | '.join(cells) + ' |')
    lines.append('| ' + ' | '.join(_improvement_cells(table, digits, latex=False)) + ' |')
    lines += ['', _legend(table, latex=False)]
    return '\n'.join(lines) + '\n'


def to_latex(table: Table, *, title: str = '', label: str = '', digits: int = 2) -> str:
    """A ``table`` environment (booktabs): ``\\textbf`` best, ``\\underline`` second."""
    show_params = _show_params(table)
    spec = 'l' + ('r' if show_params else '') + 'c' * len(table.columns)
    header = ['Method'] + (['Params'] if show_params else []) + \
        [_latex_escape(_column_label(table, c)) for c in table.columns]
    lines = [r'\begin{table}[t]', r'\centering', r'\small',
             rf'\begin{{tabular}}{{{spec}}}', r'\toprule', ' & '.join(header) + r' \\',
             r'\midrule']
    for method in table.methods:
        cells = [_latex_escape(method)] + \
            ([format_params(table.params[method])] if show_params else [])
        cells += [_cell_text(table, method, c, digits, latex=True) for c in table.columns]
        lines.append(' & '.join(cells) + r' \\')
    lines += [r'\midrule', ' & '.join(_improvement_cells(table, digits, latex=True)) + r' \\',
              r'\bottomrule', r'\end{tabular}']
    caption = (_latex_escape(title.rstrip('.')) + '. ' if title else '') + \
        _legend(table, latex=True)
    lines.append(rf'\caption{{{caption}}}')
    if label:
        lines.append(rf'\label{{{label}}}')
    lines.append(r'\end{table}')
    return '\n'.join(lines) + '\n'


def _cell_text(table, method, column, digits, latex) -> str:
    stats = table.cells.get((method, column))
    if stats is None:
        return '-'
    digits += EXTRA_DIGITS.get(column[2], 0)
    if latex:
        text = rf'{stats.mean:.{digits}f}{{\scriptsize$\pm${stats.half_width:.{digits}f}}}'
    else:
        text = f'{stats.mean:.{digits}f} ± {stats.half_width:.{digits}f}'
    best_mark, second_mark = RANK_MARKS[latex]
    if method in table.best[column]:
        return best_mark.format(text)
    if method in table.second[column]:
        return second_mark.format(text)
    return text


def _improvement_cells(table, base_digits, latex) -> list:
    cells = ['$\\Delta$' if latex else 'Δ'] + ([''] if _show_params(table) else [])
    for column in table.columns:
        imp = table.improvements.get(column)
        if imp is None:
            cells.append('-')
            continue
        digits = base_digits + EXTRA_DIGITS.get(column[2], 0)
        mark = '*' if imp.significant else ''
        if latex:
            cells.append(rf'{imp.delta:+.{digits}f}$^{{{mark}}}$ '
                         rf'{{\scriptsize[{imp.low:+.{digits}f}, {imp.high:+.{digits}f}]}}'
                         if mark else
                         rf'{imp.delta:+.{digits}f} '
                         rf'{{\scriptsize[{imp.low:+.{digits}f}, {imp.high:+.{digits}f}]}}')
        else:
            cells.append(f'{imp.delta:+.{digits}f}{mark} [{imp.low:+.{digits}f}, '
                         f'{imp.high:+.{digits}f}]')
    return cells


def _legend(table: Table, latex: bool) -> str:
    pairs = {}  # (ours, reference, seeds) -> column labels, in column order
    for column in table.columns:
        imp = table.improvements.get(column)
        if imp is not None:
            pairs.setdefault((imp.ours, imp.reference, imp.num_seeds), []).append(
                _column_label(table, column))
    level = int(round(table.level * 100))
    seeds = sorted({len(c.values) for c in table.cells.values()})
    pm = r'$\pm$' if latex else '±'
    delta = r'$\Delta$' if latex else 'Δ'
    who = '; '.join((f'{", ".join(cols)}: ' if len(pairs) > 1 else '')
                    + f'{o} minus {r} ({n} paired seeds)'
                    for (o, r, n), cols in pairs.items()) or 'none'
    text = (f'Mean over seeds (n={",".join(map(str, seeds))}) {pm} half-width of the {level}% '
            f'bootstrap CI over seeds; best in bold, second underlined. {delta}: {who}, '
            f'with its paired bootstrap {level}% CI; * = CI excludes 0.')
    shown = {c[2] for c in table.columns}
    if 'plan_jsd' in shown or 'plan_entropy' in shown:
        text += (' Decoding diversity on windows sharing start and goal actions: entropy of the '
                 'predicted plans (descriptive, not ranked) and their JS divergence from the '
                 'ground-truth plans (lower is better), in bits.')
    return _latex_escape(text, keep_math=True) if latex else text


def _latex_escape(text: str, keep_math: bool = False) -> str:
    replacements = {'&': r'\&', '%': r'\%', '_': r'\_', '#': r'\#'}
    if not keep_math:
        replacements['$'] = r'\$'
    return ''.join(replacements.get(ch, ch) for ch in text)

"""Figures of the protocol, publication grade: PNG + PDF (TrueType fonts, ``pdf.fonttype`` 42),
one column (3.3 in) or two (6.9 in) wide, >= 7 pt text, the Okabe-Ito colour-blind-safe palette,
axis labels with units, 90% bootstrap CIs over seeds, no titles (captions belong to the paper).

Each figure has a data function (tested) and a drawing function:

* :func:`curve_points` / :func:`plot_curves`: a metric against a study setting.
* :func:`efficiency_points` / :func:`plot_sample_efficiency`: SR vs share of training windows,
  one colour per horizon T, dashed = the method(s) without the PKG.
* :func:`pkg_quality_panels` / :func:`plot_pkg_quality`: three panels, edge dropout, weight noise,
  partial / noisy data.
* :func:`params_points` / :func:`plot_params_vs_metric`: parameters (log axis) vs a metric.
* :func:`error_overlap` / :func:`plot_error_overlap`: which test windows a method fixes or
  introduces against a reference, from PlanningMetric's per-sample dumps (Venn + table).
* :func:`top_actions` / :func:`plot_qualitative`: emissions and soft plan of one window over the
  top-k actions of its task, ground truth and prediction marked.
"""
from __future__ import annotations

import contextlib
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vpn_plugin.core.metrics import METRIC_NAMES
from vpn_plugin.core.stats import AUTHORS_RESAMPLES, MIN_SEEDS_FOR_CI, seed_interval
from vpn_plugin.config_types import Count, NonNegativeInt, PathLike, checked_arguments
from vpn_plugin.errors import (OutputWriteError, check_file, check_names, read_json,
                               replace_atomically)
from vpn_plugin.outputs import (FIGURE_MARKER, LINE_BREAK, OVERLAP_TABLE_MARKER, markdown_row,
                                markdown_text, stem_files)
from .results import (METRIC_LABELS, SHORTENED_MARK, ResultRow, identity_text,
                      round_off_twins, shortened_reason)

ONE_COLUMN, TWO_COLUMNS = 3.3, 6.9  # inches
OKABE_ITO = ('#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000',
             '#F0E442')
MARKERS = ('o', 's', '^', 'D', 'v', 'P', 'X', '*')
STYLE = {'pdf.fonttype': 42, 'ps.fonttype': 42, 'font.size': 8, 'axes.labelsize': 8,
         'xtick.labelsize': 7, 'ytick.labelsize': 7, 'legend.fontsize': 7,
         'legend.frameon': False, 'lines.linewidth': 1.2, 'lines.markersize': 4,
         'axes.spines.top': False, 'axes.spines.right': False, 'axes.linewidth': 0.6,
         'grid.linewidth': 0.4, 'savefig.dpi': 300}
AXIS_LABELS = {'success_rate': 'Success rate (%)', 'mean_accuracy': 'Mean accuracy (%)',
               'miou_set': 'mIoU (%)', 'miou_legacy': 'mIoU, legacy (%)',
               'first_accuracy': 'First-step accuracy (%)',
               'last_accuracy': 'Last-step accuracy (%)',
               'plan_entropy': 'Plan entropy (bits)',
               'plan_jsd': 'JSD to ground truth\n(bits; lower is better)'}


def method_style(number: int) -> dict:
    """Colour and marker of the ``number``-th of the 64 (colour, marker) pairs: every pair
    differs (8 colours x 8 markers; the first 8 differ in both)."""
    colour, cycle = number % len(OKABE_ITO), number // len(OKABE_ITO)
    return dict(color=OKABE_ITO[colour], marker=MARKERS[(colour + cycle) % len(MARKERS)])


# Fixed (colour, marker) slot of :func:`method_style` per method FAMILY, so that a method has
# one colour in every figure. A method named after a family ('SCHEMA w/o PKG', 'ViterbiPlanNet
# (train T=6)') takes its colour with another marker; other names take a slot from a hash of
# the name (stable across figures; a clash within one figure moves to the next free slot).
METHOD_FAMILIES = {'ViterbiPlanNet': 0, 'SCHEMA': 1, 'SCHEMA w/ PKG': 1, 'PDPP': 2, 'KEPP': 3,
                   'CEFITO': 4, 'Base Model': 5, 'PKG + uniform emissions': 6,
                   'PKG beam search': 14, 'CompactPlanNet': 8, 'LLM': 11, 'w/o PKG': 13}
# colour 7 (yellow) is too light for a line on white: hashed names avoid it
HASHED_SLOTS = [n for n in range(len(OKABE_ITO) * len(MARKERS)) if n % len(OKABE_ITO) != 7]


def method_family(method: str):
    """The :data:`METHOD_FAMILIES` name ``method`` starts with (as a word), else ``None``."""
    found = [f for f in METHOD_FAMILIES if method == f or method.startswith(f + ' ')
             or method.startswith(f + ':')]
    return max(found, key=len) if found else None


def method_slot(method: str) -> int:
    """The preferred :func:`method_style` slot of ``method`` (same name, same slot)."""
    import zlib
    family = method_family(method)
    if family is None:
        return HASHED_SLOTS[zlib.crc32(method.encode()) % len(HASHED_SLOTS)]
    base = METHOD_FAMILIES[family]
    if method == family:
        return base
    # a variant of the family: same colour, a marker from the name
    return base + len(OKABE_ITO) * (1 + zlib.crc32(method.encode()) % (len(MARKERS) - 1))


def method_styles(methods) -> dict:
    """``{method: dict(color, marker)}``: the fixed :func:`method_slot` of each method, every
    pair distinct within the figure."""
    taken, styles = set(), {}
    total = len(OKABE_ITO) * len(MARKERS)
    for method in methods:
        first = method_slot(method)
        same_colour = [(first + len(OKABE_ITO) * k) % total for k in range(len(MARKERS))]
        slot = next((c for c in same_colour + list(range(total)) if c not in taken), first)
        taken.add(slot)
        styles[method] = method_style(slot)
    return styles


def ci_label(what: str, seed_counts) -> str:
    """What the error bars / bands (``what``) are: 'Bands: 90% bootstrap CI over 5 seeds per
    point' (or '3-5 seeds'); ``seed_counts``: the number of seeds of each plotted point.
    Points of fewer than :data:`MIN_SEEDS_FOR_CI` seeds have none (the tables' rule,
    ``core.stats.seed_interval``), and the label says so."""
    def span(counts):
        low, high = min(counts), max(counts)
        return (f'{low}' if low == high else f'{low}-{high}') + f' seed{"s" * (high > 1)}'
    with_ci = [n for n in seed_counts if n >= MIN_SEEDS_FOR_CI]
    without = [n for n in seed_counts if n < MIN_SEEDS_FOR_CI]
    if not with_ci:
        return (f'No {what.lower()}: means over {span(without)} per point (no CI with fewer '
                f'than {MIN_SEEDS_FOR_CI} seeds)')
    text = f'{what}: 90% bootstrap CI over {span(with_ci)} per point'
    if without:
        text += (f'; points of {span(without)}: mean only (no CI with fewer than '
                 f'{MIN_SEEDS_FOR_CI} seeds)')
    return text


# --------------------------------------------------------- what one figure may pool
@checked_arguments
def select_horizon(rows, horizon: Count | None = None):
    """The rows at test horizon ``horizon`` (``None``: all); an empty selection names the
    horizons the rows have."""
    if horizon is None:
        return rows
    chosen = [r for r in rows if r.horizon == horizon]
    if not chosen:
        present = ', '.join(str(h) for h in sorted({r.horizon for r in rows}))
        raise ValueError(f'no rows at T={horizon}; present: T={present}' if rows
                         else f'no rows at T={horizon}: no rows at all')
    return chosen


def select_dataset(rows, dataset=None):
    """The rows of ``dataset`` (``None``: all); an empty selection names the datasets present."""
    if dataset is None:
        return rows
    chosen = [r for r in rows if r.dataset == dataset]
    if not chosen:
        present = ', '.join(sorted({str(r.dataset) for r in rows})) or 'none'
        raise ValueError(f'no rows of dataset {dataset!r}; present: {present}')
    return chosen


def refuse_mix(rows, field: str, option: str) -> None:
    """A figure whose points cannot show ``field`` (horizon, dataset) refuses rows holding
    several values, naming them and the option that picks one."""
    values = sorted({getattr(r, field) for r in rows}, key=str)
    if len(values) > 1:
        shown = 'T=' + ', '.join(map(str, values)) if field == 'horizon' else ', '.join(
            map(repr, values))
        raise ValueError(f'the rows hold {field}s {shown}: this figure never pools them '
                         f'into one point; choose one with {option}')


def check_points(rows, free_variant=()) -> None:
    """Each point pools the seeds of ONE run setting (:func:`report.check_one_run_per_cell`,
    the plotted variant keys ``free_variant`` aside), each seed once."""
    from .report import check_one_run_per_cell
    check_one_run_per_cell(rows, free_variant)
    seen = set()
    for row in rows:
        key = (row.method, row.dataset, row.horizon,
               tuple(identity_text(row.variant.get(k)) for k in free_variant), row.seed)
        if key in seen:
            raise ValueError(f'two rows of {row.method!r} seed {row.seed} (dataset '
                             f'{row.dataset!r}, T={row.horizon}, variant {row.variant}): a '
                             'point counts each seed once; filter with --protocol')
        seen.add(key)
    first = {}  # (method, dataset, horizon, key) -> {identity text: (value, row)}
    for row in rows:
        for name in free_variant:
            values = first.setdefault((row.method, row.dataset, row.horizon, name), {})
            value = row.variant.get(name)
            twin = next((seen for seen in values.values()
                         if round_off_twins(seen[0], value)), None)
            if twin is not None:
                raise ValueError(
                    f'results rows of {row.method!r} (T={row.horizon}) write one setting two '
                    f'ways: variant {name}={twin[0]!r} (seed {twin[1].seed}) and {value!r} '
                    f'(seed {row.seed}) differ by round-off only; expected one value (fix the '
                    'rows): the figure would split the seeds of one point')
            values.setdefault(identity_text(value), (value, row))


def shortened_methods(rows) -> dict:
    """``{method: sorted reasons}`` of the methods with rows from shortened runs."""
    found = {}
    for row in rows:
        reason = shortened_reason(row)
        if reason:
            found.setdefault(row.method, set()).add(reason)
    return {m: sorted(r) for m, r in found.items()}


NOTE_WIDTH = {ONE_COLUMN: 64, TWO_COLUMNS: 140}  # characters per note line at 6.5 pt


@dataclass
class Marks:
    """What a figure says about its methods besides the data, as the tables do: ``†`` for
    shortened runs (``shortened``: method -> reasons), the feature marks (``features``:
    method -> ``‖`` synthetic / ``✗`` unusable) and the features sentence of the caption
    (``features_text``, :func:`provenance.features_note`)."""
    shortened: dict = field(default_factory=dict)
    features: dict = field(default_factory=dict)
    features_text: str = ''
    caveats: dict = field(default_factory=dict)      # method -> {kind: lines} (report.py's)
    pkg_sources: dict = field(default_factory=dict)  # method -> test-set PKG sources

    @classmethod
    def of(cls, rows) -> 'Marks':
        from .provenance import feature_marks, features_note
        from .report import DATASET_LABELS, caveats_of, pkg_sources_of
        return cls(shortened_methods(rows), feature_marks(rows),
                   features_note(rows, DATASET_LABELS), caveats_of(rows),
                   pkg_sources_of(rows, {r.method for r in rows}))

    def suffix(self, method: str) -> str:
        """The marks after a method's name, as the tables put them."""
        from .report import TEST_SET_PKG_MARK, caveat_suffix
        return (SHORTENED_MARK if method in self.shortened else '') + \
            self.features.get(method, '') + caveat_suffix(method, self.caveats) + \
            (TEST_SET_PKG_MARK if method in self.pkg_sources else '')

    def label(self, method: str) -> str:
        """A method's name in a figure with its marks."""
        return method + self.suffix(method)

    def notes(self, width: float = ONE_COLUMN) -> str:
        """The note lines on shortened runs and features, wrapped to the figure's width."""
        import re
        import textwrap
        from .report import TEST_SET_PKG_MARK, caveat_note
        sentences = re.split(r' (?=[‖✗] )', self.features_text)  # each mark's own line
        sentences.append(caveat_note(self.caveats))
        if self.pkg_sources:
            sentences.append(f'{TEST_SET_PKG_MARK} test-set PKG (a released graph built with '
                             'test videos): not comparable')
        return footnote(*(textwrap.fill(s, NOTE_WIDTH.get(width, 64))
                          for s in [shortened_note(self.shortened), *sentences] if s))

    @classmethod
    def merge(cls, all_marks) -> 'Marks':
        """The marks of several comparisons of one figure (their rows' sources are the same:
        the figure's rows passed one :func:`provenance.check_feature_mix`)."""
        merged = cls()
        for marks in all_marks:
            merged.shortened.update(marks.shortened)
            merged.features.update(marks.features)
            merged.caveats.update(marks.caveats)
            merged.pkg_sources.update(marks.pkg_sources)
            merged.features_text = merged.features_text or marks.features_text
        return merged


def shortened_note(shortened: dict) -> str:
    """'† shortened runs: max_epochs=20' ('' when every run is a full one)."""
    reasons = sorted({part for found in shortened.values() for reason in found
                      for part in reason.split('; ')})  # a smoke run's reason holds its limit
    return f'{SHORTENED_MARK} shortened runs: {", ".join(reasons)}' if reasons else ''


def footnote(*parts) -> str:
    """The figure's note line(s): what the bars / bands are, shortened runs, features."""
    return '\n'.join(p for p in parts if p)


PERCENT_MIN_SPAN = 10.0  # percentage points: a y axis never zooms into less


def keep_y_span(ax, low: float, high: float, percent: bool,
                marker_room: bool = False) -> None:
    """y limits showing [low, high] with at least :data:`PERCENT_MIN_SPAN` points (percent
    metrics; others: 20% of the largest value), so that one method's CI does not fill the
    axis; percent axes stay within [0, 100], or with ``marker_room`` a margin beyond them, so
    that a marker at 0 or 100 (a 0-SR method) sits whole inside the frame."""
    span = PERCENT_MIN_SPAN if percent else 0.2 * max(abs(low), abs(high), 1e-9)
    pad = max(span - (high - low), 0.0) / 2 + 0.08 * max(high - low, span)
    bottom, top = low - pad, high + pad
    if percent:
        room = 0.05 * (min(top, 100.0) - max(bottom, 0.0)) if marker_room else 0.0
        bottom, top = max(bottom, -room), min(top, 100.0 + room)
    ax.set_ylim(bottom, top)
    if percent and marker_room:  # the margin gets no tick (no "-5 %")
        from matplotlib.ticker import MaxNLocator
        ticks = MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]).tick_values(bottom, top)
        ax.set_yticks([t for t in ticks if max(bottom, 0.0) <= t <= min(top, 100.0)])


def axis_label(metric: str) -> str:
    """Axis label with unit of a metric key."""
    if metric in AXIS_LABELS:
        return AXIS_LABELS[metric]
    return METRIC_LABELS.get(metric, metric) + (' (%)' if metric in METRIC_NAMES else '')


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


@contextlib.contextmanager
def paper_style():
    """matplotlib settings of every figure (:data:`STYLE`, Okabe-Ito colour cycle)."""
    plt = _pyplot()
    from cycler import cycler
    with plt.rc_context({**STYLE, 'axes.prop_cycle': cycler(color=OKABE_ITO)}):
        yield plt


def save_figure(fig, out_stem) -> list[Path]:
    """Write ``<out_stem>.png`` and ``<out_stem>.pdf``; returns both paths."""
    paths = stem_files(out_stem, ('.png', '.pdf'))
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    plain_texts(fig)
    for path in paths:  # the marker tells tools/plots.py its earlier figures (outputs.py)
        def write(temporary, path=path):  # atomic: a full disk leaves no 0-byte figure
            with open(temporary, 'wb') as handle:
                fig.savefig(handle, format=path.suffix[1:], bbox_inches='tight',
                            pad_inches=0.02, metadata={'Creator': FIGURE_MARKER})
        replace_atomically(path, write, lambda path, cause: OutputWriteError(
            f'cannot write the figure {path}: {cause}; nothing was written there (free disk '
            'space or choose another --out)'))
    _pyplot().close(fig)
    return paths


def plain_texts(fig) -> None:
    """Every text of ``fig`` but its tick labels drawn as written: matplotlib reads ``$...$``
    as math (a method named ``pipe $x$`` would show an italic x), and no text of the figures
    is math; tick labels keep it (a log axis writes its powers of ten with it). A line break
    written ``\\r`` or ``\\r\\n`` is drawn as one (matplotlib breaks only at ``\\n``: the rest of
    a name after a ``\\r`` was drawn over its start, its marks lost)."""
    from matplotlib.text import Text
    ticks = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks()
             for label in (tick.label1, tick.label2)}
    for text in fig.findobj(Text):
        if id(text) not in ticks:
            text.set_parse_math(False)
            text.set_text(LINE_BREAK.sub('\n', text.get_text()))


@checked_arguments
def ci_lines(values: dict, num_resamples: Count = AUTHORS_RESAMPLES) -> dict:
    """``{line: {x: [value per seed]}}`` -> ``{line: [(x, mean, low, high), ...]}`` sorted by x
    (mean and 90% bootstrap CI over the seeds; ``None`` bounds with fewer than
    :data:`MIN_SEEDS_FOR_CI` seeds, ``core.stats.seed_interval``). K is the tables' (the
    authors' 1000): with 100 a band ended elsewhere than the table's interval of its cell."""
    return {line: [(x, *seed_interval(np.array(v), num_resamples=num_resamples))
                   for x, v in sorted(by_x.items())] for line, by_x in values.items()}


# x axis labels of the protocols' variant keys (others: the key in words)
VARIANT_LABELS = {'train_fraction': 'Share of training windows', 'level': 'Perturbation level',
                  'observed_steps': 'Intermediate steps observed',
                  'perturbation': 'Perturbation'}


def variant_label(key: str) -> str:
    return VARIANT_LABELS.get(key, key.replace('_', ' ').capitalize())


def curve_values(rows: list[ResultRow], x_key: str, metric: str,
                 group_key: str | None = None) -> dict:
    """``{(dataset, horizon): {line: {x: [value per seed]}}}``: one panel per dataset and
    test horizon, each point the seeds of one run setting (:func:`check_points`).

    A line is a method, or the value of ``variant[group_key]`` (``'method: value'`` with
    several methods); rows whose group is ``'none'`` (the unperturbed reference) join every
    line of their method at their x.
    """
    for row in rows:
        if x_key not in row.variant:
            raise ValueError(f'results row of {row.method!r} (seed {row.seed}) has no variant '
                             f'{x_key!r}; its variant is {row.variant}')
        if metric not in row.metrics:
            raise ValueError(f'results row of {row.method!r} has no metric {metric!r}; it has '
                             f'{sorted(row.metrics)}')
    if group_key is not None:
        check_group_key(rows, x_key, group_key)
    check_points(rows, (x_key,) + ((group_key,) if group_key else ()))
    several = len({r.method for r in rows}) > 1
    values = {}
    for row in rows:
        group = None if group_key is None else str(row.variant.get(group_key))
        panel = values.setdefault((row.dataset, row.horizon), {})
        panel.setdefault((row.method, group), {}).setdefault(
            variant_number(row, x_key), []).append(row.metrics[metric])
    panels = {}
    for key, lines in sorted(values.items(), key=lambda item: str(item[0])):
        shared = {m: lines.pop((m, 'none')) for m, g in list(lines) if g == 'none'}
        panels[key] = {(m if g is None else g if not several else f'{m}: {g}'):
                       {**shared.get(m, {}), **by_x} for (m, g), by_x in lines.items()}
        if not panels[key]:
            raise ValueError(f'no lines to plot for x={x_key!r} group={group_key!r}')
    if not panels:
        raise ValueError('no results rows to plot')
    return panels


def check_group_key(rows, x_key: str, group_key: str) -> None:
    """``group_key`` names the lines: a variant key of the rows other than the x axis's
    (the x key as a group gives a line of one point per x value)."""
    keys = sorted({k for r in rows for k in r.variant if k != x_key})
    others = keys or 'none besides --x'
    if group_key == x_key:
        raise ValueError(f'--group {group_key} is the --x key: each line would be one point '
                         f'at its own x; expected another variant key of the rows ({others}), '
                         'or no --group for a line per method')
    if group_key not in keys:
        raise ValueError(f'--group {group_key!r} is no variant key of the rows; they have '
                         f'{others} (leave out --group for a line per method)')


def variant_number(row: ResultRow, key: str) -> float:
    """``row.variant[key]`` as the finite number an axis draws; a bool (``true`` would join
    the points at 1), text (``"0.1"`` was drawn as 0.1 beside the other seeds' number, one
    point of two settings the tables keep apart), null, list or NaN is refused, naming the
    row."""
    value = row.variant[key]
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any float (10**400)
            number = math.inf
    if number is None or not math.isfinite(number):
        raise ValueError(f'results row of {row.method!r} (seed {row.seed}, T={row.horizon}): '
                         f'variant {key}={value!r}; expected a finite number, written as a '
                         'number (this figure draws it on an axis)')
    return number


def seeds_per_point(lines: dict) -> list[int]:
    """Seeds of each point of ``{line: {x: [value per seed]}}``."""
    return [len(v) for by_x in lines.values() for v in by_x.values()]


@checked_arguments
def curve_points(rows: list[ResultRow], x_key: str, metric: str, group_key: str | None = None,
                 num_resamples: Count = AUTHORS_RESAMPLES) -> dict:
    """``{line name: [(x, mean, low, high), ...]}`` sorted by x, over seeds, of rows of ONE
    dataset and test horizon (else refused: :func:`curve_values` gives a panel each)."""
    refuse_mix(rows, 'horizon', '--horizon')
    refuse_mix(rows, 'dataset', '--dataset')
    lines, = curve_values(rows, x_key, metric, group_key).values()
    return ci_lines(lines, num_resamples)


def _draw_line(ax, points, **style):
    """Mean line with markers and a CI band of ``[(x, mean, low, high), ...]`` (a gap where a
    point has no interval)."""
    x, mean = (np.array([p[i] for p in points], float) for i in (0, 1))
    low, high = (np.array([np.nan if p[i] is None else p[i] for p in points], float)
                 for i in (2, 3))
    line, = ax.plot(x, mean, **style)
    if np.isfinite(low).any():
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    # a band needs two neighbouring intervals: an interval alone (one x, or between gaps)
    # would vanish, so it is drawn as an error bar
    has = np.isfinite(low)
    alone = has & ~(np.r_[False, has[:-1]] | np.r_[has[1:], False])
    if alone.any():
        ax.errorbar(x[alone], mean[alone], yerr=[(mean - low)[alone], (high - mean)[alone]],
                    fmt='none', ecolor=line.get_color(), elinewidth=0.8, capsize=2)
    return line


def y_extent(points) -> tuple:
    """(lowest, highest) value drawn of ``[(x, mean, low, high), ...]`` (bounds, else means)."""
    values = [v for p in points for v in p[1:] if v is not None]
    return min(values), max(values)


def _line_method(line: str, group_key, rows) -> str:
    """The method a :func:`curve_values` line is of."""
    if group_key is None:
        return line
    methods = list(dict.fromkeys(r.method for r in rows))
    return methods[0] if len(methods) == 1 else line.split(': ')[0]


def dataset_horizons_title(rows) -> str:
    """'NIV, T=3' / 'CrossTask, T=3, 4, 5, 6' of rows of one dataset (their test horizons):
    a figure of one panel says what it measured ('dataset not recorded' for rows without)."""
    from .report import DATASET_LABELS
    dataset = rows[0].dataset if rows else ''
    horizons = ', '.join(str(h) for h in sorted({row.horizon for row in rows}))
    return f'{DATASET_LABELS.get(dataset, dataset) or "dataset not recorded"}, T={horizons}'


def panel_title(dataset: str, horizon: int, panels) -> str:
    """'NIV, T=3' (the dataset only when the panels differ in it)."""
    from .report import DATASET_LABELS
    datasets = {d for d, _ in panels}
    name = DATASET_LABELS.get(dataset, dataset)
    return f'{name}, T={horizon}' if len(datasets) > 1 else f'T={horizon}'


def check_log_axis(values: dict, x_key: str) -> None:
    """A log x axis has no place for x <= 0: matplotlib would drop those points without a
    word (``values``: :func:`curve_values`'s)."""
    for (dataset, horizon), lines in values.items():
        for line, points in lines.items():
            bad = sorted(x for x in points if not x > 0)
            if bad:
                raise ValueError(f'{x_key}={bad[0]:g} (line {line!r}, {dataset} T={horizon}): a '
                                 'log x axis (--log-x) cannot show a value <= 0, so its point '
                                 'would vanish; expected positive values, or leave out --log-x')


@checked_arguments
def plot_curves(rows, x_key: str, metric: str, out_stem, *, group_key: str | None = None,
                log_x: bool = False, xlabel: str | None = None) -> list[Path]:
    """Metric vs a study setting with CI bands (the note below says what they are), one
    panel per dataset and test horizon (one column wide for one panel, two for more), each
    titled with its dataset and T (a single panel too: :func:`dataset_horizons_title`), every
    plotted x value a tick; saves PNG and PDF."""
    from matplotlib.ticker import FixedLocator, NullLocator
    values = curve_values(rows, x_key, metric, group_key)
    if log_x:
        check_log_axis(values, x_key)
    panels = {key: ci_lines(lines) for key, lines in values.items()}
    names = list(dict.fromkeys(line for lines in panels.values() for line in lines))
    styles = figure_styles(names)
    marks = Marks.of(rows)
    seeds = [n for lines in values.values() for n in seeds_per_point(lines)]
    width = ONE_COLUMN if len(panels) == 1 else TWO_COLUMNS
    with paper_style() as plt:
        fig, axes = plt.subplots(1, len(panels), figsize=(width, 2.4), sharey=True,
                                 squeeze=False, layout='constrained')
        drawn = {}  # label -> its first line: matplotlib's own list skips labels starting '_'
        for ax, ((dataset, horizon), curves) in zip(axes[0], panels.items()):
            for line, points in curves.items():
                label = line + marks.suffix(_line_method(line, group_key, rows))
                drawn.setdefault(label, _draw_line(ax, points, label=label, **styles[line]))
            if log_x:
                ax.set_xscale('log')
            xs = sorted({p[0] for points in curves.values() for p in points})
            ax.xaxis.set_major_locator(FixedLocator(xs))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticklabels([f'{x:g}' for x in xs])
            ax.set_xlabel(xlabel or variant_label(x_key))
            ax.grid(alpha=0.3)
            ax.set_title(panel_title(dataset, horizon, panels) if len(panels) > 1 else
                         dataset_horizons_title(rows), fontsize=7, pad=3)
        keep_y_span(axes[0][0], *y_extent([p for curves in panels.values()
                                           for points in curves.values() for p in points]),
                    metric in METRIC_NAMES, marker_room=True)  # a marker at 0 drawn whole
        axes[0][0].set_ylabel(axis_label(metric))
        handles, labels = list(drawn.values()), list(drawn)
        fig.legend(handles, labels, loc='outside lower center',
                   ncol=min(len(labels), 2 if width == ONE_COLUMN else 4),
                   title=footnote(ci_label('Bands', seeds), marks.notes(width)),
                   title_fontsize=6.5)
        for ax in axes[0]:
            thin_tick_labels(ax)
        return save_figure(fig, out_stem)


TICK_LABEL_GAP = 3.0  # points between two x tick labels (:func:`thin_tick_labels`)


def thin_tick_labels(ax, gap: float = TICK_LABEL_GAP) -> None:
    """Blank the x tick labels that would touch a neighbour (0.05 and 0.1 on a linear axis of
    0..1): from the left, a label is kept when it lies ``gap`` points clear of the last kept
    one; the last label is always kept (the one before it gives way). Every tick mark stays."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ticks = list(ax.get_xticks())
    texts = [label.get_text() for label in ax.get_xticklabels()]
    spans = [(label.get_window_extent(renderer).x0, label.get_window_extent(renderer).x1)
             for label in ax.get_xticklabels()]
    pad = gap * fig.dpi / 72
    kept = []
    for index in sorted(range(len(ticks)), key=lambda i: ticks[i]):
        if not texts[index]:
            continue
        while kept and spans[kept[-1]][1] + pad > spans[index][0] \
                and ticks[index] == max(ticks):
            kept.pop()  # the last label stays, the one before it gives way
        if not kept or spans[kept[-1]][1] + pad <= spans[index][0]:
            kept.append(index)
    ax.set_xticks(ticks, [text if i in kept else '' for i, text in enumerate(texts)])


# ----------------------------------------------------------------- sample efficiency
def efficiency_values(rows: list[ResultRow], metric: str = 'success_rate',
                      x_key: str = 'train_fraction') -> dict:
    """``{(method, horizon): {percent of training windows: [value per seed]}}`` of rows of
    one dataset, each point the seeds of one run setting, ordered by horizon then method."""
    values = {}
    for row in rows:
        if x_key not in row.variant or metric not in row.metrics:
            raise ValueError(f'results row of {row.method!r} (seed {row.seed}, T={row.horizon}) '
                             f'needs variant {x_key!r} and metric {metric!r}; it has variant '
                             f'{row.variant} and metrics {sorted(row.metrics)}')
        x = 100.0 * variant_number(row, x_key)
        if not 0 < x <= 100:
            raise ValueError(f'results row of {row.method!r} (seed {row.seed}, T={row.horizon}):'
                             f' variant {x_key}={row.variant[x_key]!r}; expected the share of '
                             'the training windows used, in (0, 1]')
        values.setdefault((row.method, row.horizon), {}).setdefault(x, []).append(
            row.metrics[metric])
    if not values:
        raise ValueError('no results rows to plot')
    refuse_mix(rows, 'dataset', '--dataset')
    check_points(rows, (x_key,))
    check_one_subset_draw(rows, x_key)
    return dict(sorted(values.items(), key=lambda item: (item[0][1], item[0][0])))


def check_one_subset_draw(rows: list[ResultRow], x_key: str = 'train_fraction') -> None:
    """The figure's subsets were drawn one way: rows of a share below 100% whose
    ``settings.subset_draw`` differ (``window_identity_v2``, or none: drawn by list position
    before 2026-11-29) are refused, naming rows of each draw (a line through both would join
    two samplings of the windows). A share of 100% keeps every window whichever the draw."""
    draws = {}
    for row in rows:
        if variant_number(row, x_key) < 1:
            draws.setdefault(str((row.settings or {}).get('subset_draw')
                                 or 'list position (no settings.subset_draw)'), []).append(
                f'{row.method} seed {row.seed} {x_key}={row.variant[x_key]}')
    if len(draws) > 1:
        found = '; '.join(f'{draw}: {", ".join(names[:3])}' + (' ...' if len(names) > 3 else '')
                          for draw, names in sorted(draws.items()))
        raise ValueError(f'the rows\' training subsets were drawn in different ways ({found}); '
                         'a figure never joins them: rerun the protocol with another --out (its '
                         'work dirs and rows of the list position draw are not reused) or plot '
                         'the rows of one draw')


@checked_arguments
def efficiency_points(rows: list[ResultRow], metric: str = 'success_rate',
                      x_key: str = 'train_fraction',
                      num_resamples: Count = AUTHORS_RESAMPLES) -> dict:
    """``{(method, horizon): [(percent of training windows, mean, low, high), ...]}``.

    x is ``variant[x_key]`` in percent, the CI is over seeds.
    """
    return ci_lines(efficiency_values(rows, metric, x_key), num_resamples)


def distinct_colours(methods) -> dict:
    """``{method: colour}``, every colour distinct within the figure: each method's fixed
    colour (:func:`method_styles`), the family names (:data:`METHOD_FAMILIES`) served first;
    a variant whose family took its colour gets the first unused one."""
    methods = list(dict.fromkeys(methods))
    fixed = {m: style['color'] for m, style in method_styles(methods).items()}
    usable = OKABE_ITO[:7]  # not the yellow
    colours, used = {}, set()
    for method in sorted(methods, key=lambda m: m not in METHOD_FAMILIES):
        colour = fixed[method]
        if colour in used:
            free = [c for c in usable if c not in used and c not in fixed.values()]
            colour = (free or [c for c in usable if c not in used] or [colour])[0]
        used.add(colour)
        colours[method] = colour
    return {m: colours[m] for m in methods}


def figure_styles(methods) -> dict:
    """``{method: dict(color, marker)}`` of one figure: :func:`method_styles` markers,
    :func:`distinct_colours` colours, every (colour, marker) pair distinct (a repeated colour
    takes the next free marker)."""
    methods = list(dict.fromkeys(methods))
    colours = distinct_colours(methods)
    styles, taken = {}, set()
    for method, style in method_styles(methods).items():
        colour = colours[method]  # beyond 7 methods colours repeat: the pair must not
        marker = next((m for m in MARKERS[MARKERS.index(style['marker']):] + MARKERS
                       if (colour, m) not in taken), style['marker'])
        taken.add((colour, marker))
        styles[method] = {**style, 'color': colour, 'marker': marker}
    return styles


def efficiency_styles(lines, dashed=(), order=None) -> dict:
    """``{(method, horizon): dict(color, marker, linestyle)}`` of the sample-efficiency lines.

    Dashed = the methods in ``dashed`` (without the Viterbi decoding or the PKG), solid = the
    others; marker = horizon T; colour = the solid method's fixed colour
    (:func:`distinct_colours`): a dashed method takes the colour of the solid method its name
    starts with, as a word ('SCHEMA w/o Viterbi' -> 'SCHEMA'), else of the next solid method
    without a dashed twin in ``order`` (the methods' order, default the lines'): ``--dashed
    'Base Model' 'SCHEMA w/o Viterbi'`` pairs the Base Model with ViterbiPlanNet.
    """
    horizons = sorted({h for _, h in lines})
    order = list(dict.fromkeys(list(order or ()) + [m for m, _ in lines]))
    solid = [m for m in order if m not in dashed and any(m == k for k, _ in lines)]
    twin = {}
    for method in dashed:  # named after a solid method: its twin
        prefixes = [s for s in solid if method.startswith(s + ' ')]
        if prefixes:
            twin[method] = max(prefixes, key=len)
    for method in (m for m in dashed if m not in twin):  # the others: the free ones in order
        free = [s for s in solid if s not in twin.values()]
        if free:
            twin[method] = free[0]
    own = [m for m in order if m in solid or (m in dashed and m not in twin)]
    colour = distinct_colours(own)
    return {(m, h): dict(color=colour[twin.get(m, m)],
                         marker=MARKERS[horizons.index(h) % len(MARKERS)],
                         linestyle='--' if m in dashed else '-')
            for m, h in lines}


def plot_sample_efficiency(rows, out_stem, *, metric='success_rate', dashed=(),
                           x_key='train_fraction') -> list[Path]:
    """Metric vs % of training windows, one column wide, log x axis; colours, markers and
    dashes as :func:`efficiency_styles`; the legend names each method (colour, dash) and
    each horizon (marker); the title names the dataset and horizons
    (:func:`dataset_horizons_title`)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator
    values = efficiency_values(rows, metric, x_key)
    points = ci_lines(values)
    styles = efficiency_styles(points, dashed, [r.method for r in rows])
    horizons = sorted({h for _, h in points})
    first = {m: styles[(m, h)] for m, h in reversed(list(points))}  # a style of each method
    colours = list(dict.fromkeys(style['color'] for style in first.values()))
    methods = list(dict.fromkeys(r.method for r in rows if r.method in first))
    methods.sort(key=lambda m: (colours.index(first[m]['color']), m in dashed))
    marks = Marks.of(rows)
    with paper_style() as plt:
        fig, ax = plt.subplots(figsize=(ONE_COLUMN, 2.4))
        for key, line in points.items():
            _draw_line(ax, line, **styles[key])
        ax.set_xscale('log')
        xs = sorted({p[0] for line in points.values() for p in line})
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f'{x:g}' for x in xs])
        ax.set_xlabel('Training windows used (%)')
        ax.set_ylabel(axis_label(metric))
        ax.set_title(dataset_horizons_title(rows), fontsize=7, pad=3)
        ax.grid(alpha=0.3)
        handles = [Line2D([], [], color=first[m]['color'], linestyle=first[m]['linestyle'],
                          label=marks.label(m)) for m in methods]
        if len(horizons) > 1:
            handles = [Line2D([], [], color='0.3', marker=MARKERS[i % len(MARKERS)],
                              linestyle='none', label=f'T={h}')
                       for i, h in enumerate(horizons)] + handles
        ax.legend(handles=handles, ncol=2 if len(handles) > 3 else len(handles),
                  loc='upper center', bbox_to_anchor=(0.5, -0.25), columnspacing=1.0,
                  handlelength=2.2, title=footnote(
                      ci_label('Bands', seeds_per_point(values)),
                      marks.notes()), title_fontsize=6.5)
        return save_figure(fig, out_stem)


# ----------------------------------------------------------------------- PKG quality
@dataclass(frozen=True)
class Perturbation:
    """How a PKG perturbation of the pkg_quality protocol is drawn."""
    panel: int
    label: str
    to_x: object  # level -> x value of the panel's axis
    levels: str   # the levels the perturbation takes (vpn_plugin/core/pkg.py checks them)

    def check(self, row: ResultRow, level: float) -> None:
        inside = {'[0, 1]': 0 <= level <= 1, '(0, 1]': 0 < level <= 1,
                  '>= 0': level >= 0}[self.levels]
        if not inside:
            raise ValueError(f'results row of {row.method!r} (seed {row.seed}, T={row.horizon}):'
                             f' {self.label} level={row.variant["level"]!r}; expected a level '
                             f'{self.levels}')


PKG_PERTURBATIONS = {
    'edge_dropout': Perturbation(0, 'edge dropout', lambda level: 100.0 * level, '[0, 1]'),
    'weight_noise': Perturbation(1, 'weight noise', lambda level: level, '>= 0'),
    'data_fraction': Perturbation(2, 'partial data', lambda level: 100.0 * (1.0 - level),
                                  '(0, 1]'),
    'label_noise': Perturbation(2, 'label noise', lambda level: 100.0 * level, '[0, 1]'),
}
PKG_PANEL_XLABELS = ('PKG edges dropped (%)', 'Weight noise s.d. (probability)',
                     'Windows missing or relabelled (%)')
REFERENCE = 'none'


@checked_arguments
def pkg_quality_panels(rows: list[ResultRow], metric: str = 'success_rate',
                       num_resamples: Count = AUTHORS_RESAMPLES) -> tuple:
    """``(panels, references)`` of the PKG-quality figure.

    ``panels``: three dicts ``{(method, line label): [(x, mean, low, high), ...]}`` (see
    :data:`PKG_PERTURBATIONS`); a method's unperturbed rows (``perturbation='none'``) are x=0
    of each of its lines. ``references``: ``{method: (mean, low, high)}`` of the methods with
    unperturbed rows only (a planner without the graph, e.g. SCHEMA w/o PKG: the dashed
    reference every panel shows).
    """
    refuse_mix(rows, 'horizon', '--horizon')
    refuse_mix(rows, 'dataset', '--dataset')
    for row in rows:  # before check_points, which would call the rows "differ in settings"
        kind = row.variant.get('perturbation')
        if kind in PKG_PERTURBATIONS and 'level' not in row.variant:
            raise ValueError(f'results row of {row.method!r} (seed {row.seed}, T={row.horizon}):'
                             f' variant perturbation={kind!r} without variant.level; expected '
                             f'its level, a number {PKG_PERTURBATIONS[kind].levels} (the '
                             'pkg_quality protocol writes both)')
    check_points(rows, ('perturbation', 'level'))
    unperturbed, values = {}, {}
    for row in rows:
        kind = row.variant.get('perturbation')
        if metric not in row.metrics:
            raise ValueError(f'results row of {row.method!r} (seed {row.seed}) has no metric '
                             f'{metric!r}; it has {sorted(row.metrics)}')
        if kind == REFERENCE:
            unperturbed.setdefault(row.method, []).append(row.metrics[metric])
        elif kind in PKG_PERTURBATIONS:
            level = variant_number(row, 'level')
            PKG_PERTURBATIONS[kind].check(row, level)
            x = PKG_PERTURBATIONS[kind].to_x(level)
            values.setdefault(row.method, {}).setdefault(kind, {}).setdefault(x, []).append(
                row.metrics[metric])
        else:
            raise ValueError(f'results row of {row.method!r} (seed {row.seed}) has perturbation '
                             f'{kind!r}; expected {REFERENCE!r} or one of '
                             f'{sorted(PKG_PERTURBATIONS)}')
    panels = [{} for _ in PKG_PANEL_XLABELS]
    for method, kinds in values.items():
        reference = {0.0: unperturbed[method]} if method in unperturbed else {}
        for kind, spec in PKG_PERTURBATIONS.items():  # fixed order: fixed line styles
            if kind in kinds:
                panels[spec.panel][(method, spec.label)] = {**reference, **kinds[kind]}
    panels = [ci_lines(panel, num_resamples) for panel in panels]
    if not any(panels):
        raise ValueError('no perturbed PKG rows to plot (variant "perturbation" and "level")')
    references = {method: seed_interval(np.array(scores), num_resamples=num_resamples)
                  for method, scores in unperturbed.items() if method not in values}
    return panels, references


def seeds_per_group(rows, keys) -> list[int]:
    """Seeds of each (method, dataset, horizon, variant[keys]) point of ``rows``."""
    seeds = {}
    for row in rows:
        # one setting however its number is written (-0.0 and 0.0, 1.0 and 1: identity_text)
        key = (row.method, row.dataset, row.horizon) + tuple(identity_text(row.variant.get(k))
                                                             for k in keys)
        seeds.setdefault(key, set()).add(row.seed)
    return [len(found) for found in seeds.values()]


VISIBLE_BAND = 0.02  # a band narrower than this share of the y axis hides under its line


def reference_band(stats, y_span: float = 100.0) -> str:
    """What a reference line of :func:`plot_pkg_quality` shows, from its (mean, low, high)
    on a y axis ``y_span`` high: 'line: mean, band: 90% CI', or why no band is seen (too few
    seeds; seeds that agree give an interval of width 0; an interval narrower than
    :data:`VISIBLE_BAND` of the axis hides under the line: its bounds are given)."""
    mean, low, high = stats
    if low is None:
        return f'line: mean; no band (fewer than {MIN_SEEDS_FOR_CI} seeds)'
    if high - low < 1e-9:
        return f'line: mean; no band: every seed gives {mean:.1f}'
    if high - low < VISIBLE_BAND * y_span:
        return f'line: mean {mean:.1f}; 90% CI [{low:.1f}, {high:.1f}], narrower than the line'
    return 'line: mean, band: 90% CI'


def plot_pkg_quality(rows, out_stem, *, metric='success_rate') -> list[Path]:
    """Three panels (edge dropout, weight noise, partial / noisy data), two columns wide:
    colour and marker = method; in (c) solid = partial data, dotted = label noise; dashed
    horizontal line and band = a method without the graph (mean and 90% CI; its key says
    when there is no band to see, :func:`reference_band`). Every key sits in the legend
    above the panels, clear of the data."""
    from matplotlib.lines import Line2D
    panels, references = pkg_quality_panels(rows, metric)
    methods = list(dict.fromkeys([m for panel in panels for m, _ in panel] + list(references)))
    styles = figure_styles(methods)
    marks = Marks.of(rows)
    dotted = []
    with paper_style() as plt:
        fig, axes = plt.subplots(1, 3, figsize=(TWO_COLUMNS, 2.3), sharey=True,
                                 layout='constrained')
        for ax, lines, xlabel, letter in zip(axes, panels, PKG_PANEL_XLABELS, 'abc'):
            labels = list(dict.fromkeys(label for _, label in lines))
            for (method, label), points in lines.items():
                _draw_line(ax, points, linestyle=('-', ':')[labels.index(label) % 2],
                           **styles[method])
            for method, (mean, low, high) in references.items():
                ax.axhline(mean, color=styles[method]['color'], linestyle='--', linewidth=1.0)
                if low is not None:
                    ax.axhspan(low, high, color=styles[method]['color'], alpha=0.2,
                               linewidth=0)
            ax.set_xlabel(xlabel)
            ax.grid(alpha=0.3)
            ax.text(0.0, 1.03, f'({letter})', transform=ax.transAxes, fontsize=8,
                    fontweight='bold', va='bottom')  # above the axes: clear of every line
            if len(labels) > 1:
                dotted += [(f'({letter}) {label}', ('-', ':')[i % 2])
                           for i, label in enumerate(labels)]
        axes[0].set_ylabel(axis_label(metric))
        y_span = float(np.subtract(*axes[0].get_ylim()[::-1]))
        handles = [Line2D([], [], color=styles[m]['color'],
                          label=marks.label(m) + (f' ({reference_band(references[m], y_span)})'
                                                  if m in references else ''),
                          linestyle='--' if m in references else '-',
                          marker=None if m in references else styles[m]['marker'])
                   for m in methods]
        handles += [Line2D([], [], color='0.3', linestyle=style, label=label)
                    for label, style in dotted]
        fig.legend(handles=handles, loc='outside upper center',
                   ncol=min(len(handles), 4))
        seeds = seeds_per_group(rows, ('perturbation', 'level'))
        fig.supxlabel(footnote(ci_label('Bands', seeds), marks.notes(TWO_COLUMNS)),
                      fontsize=6.5, x=1.0, ha='right')
        return save_figure(fig, out_stem)


# -------------------------------------------------------------------- params vs metric
@checked_arguments
def params_points(rows: list[ResultRow], metric: str, horizon: Count | None = None) -> dict:
    """``{method: (params, mean, low, high)}`` for methods with a parameter count (0 included:
    planners without parameters); methods whose rows have none are left out
    (:func:`methods_without_count` names them)."""
    rows = select_horizon(rows, horizon)
    refuse_mix(rows, 'horizon', '--horizon')
    refuse_mix(rows, 'dataset', '--dataset')
    check_points(rows)
    points = {}
    for method in dict.fromkeys(r.method for r in rows):
        chosen = [r for r in rows if r.method == method]
        lacking = [r.seed for r in chosen if metric not in r.metrics]
        if lacking:
            raise ValueError(f'rows of {method!r} (seeds {lacking}) have no metric {metric!r}')
        counts = [r.params for r in chosen if r.params is not None]
        if not counts:
            continue
        mean, low, high = seed_interval(np.array([r.metrics[metric] for r in chosen]))
        points[method] = (max(counts), mean, low, high)
    if not points:
        raise ValueError(f'no method has both a parameter count and metric {metric!r}')
    return points


def methods_without_count(rows: list[ResultRow], metric: str, horizon: int | None = None):
    """Methods with the metric but no parameter count in any row (e.g. LLM planners)."""
    return [method for method, chosen in _method_rows(rows, metric, horizon).items()
            if all(r.params is None for r in chosen)]


def _method_rows(rows, metric, horizon) -> dict:
    chosen = {}
    for row in select_horizon(rows, horizon):
        if metric in row.metrics:
            chosen.setdefault(row.method, []).append(row)
    return chosen


def log_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values in [low, high] for a log axis: the 1-2-5 series when it gives at least 3
    ticks (a wide range), else about ``count`` evenly spaced round values (a narrow range)."""
    from matplotlib.ticker import MaxNLocator
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    for mantissas in ((1, 2, 5), (1,)):  # over a few decades, the labels of 1-2-5 collide
        series = [m * 10.0 ** k for k in decades for m in mantissas
                  if low <= m * 10.0 ** k <= high]
        if len(series) <= MAX_LOG_TICKS:
            break
    if len(series) > MAX_LOG_TICKS:  # many decades: every n-th one
        series = series[::math.ceil(len(series) / MAX_LOG_TICKS)]
    if len(series) >= 3:
        return series
    ticks = MaxNLocator(nbins=count, steps=[1, 2, 2.5, 5, 10]).tick_values(low, high)
    return [float(t) for t in ticks if low <= t <= high]


MAX_LOG_TICKS = 7  # labels of a column-wide log axis that do not run into each other


def format_count(value: float) -> str:
    """``850000 -> '0.85M'``, ``12000 -> '12K'``, ``2e9 -> '2B'``."""
    if value >= 1e9:
        return f'{value / 1e9:g}B'
    if value >= 1e6:
        return f'{value / 1e6:g}M'
    if value >= 1e3:
        return f'{value / 1e3:g}K'
    return f'{value:g}'


DODGE_DECADES, DODGE_ZERO = 0.035, 0.3  # spacing of markers sharing an x (log / "0" axis)
DODGE_AXIS_FRACTION = 0.04  # of a log axis's decades: ~7 pt on a one-column axis
MARKER_SPAN = 0.04  # of the y axis: the height of a marker (5 pt on the ~1.9 in axes), caps
DODGED_NOTE = 'markers drawn side by side, since they would hide each other'


def dodged_positions(points: dict, log: bool, y_room: float = 0.0,
                     step: float | None = None) -> tuple[dict, list]:
    """``({method: x drawn}, [[methods spread], ...])`` of ``points`` (``{method: (x, mean,
    low, high)}``, :func:`params_points`): every marker is drawn at its true x, except markers
    that coincide, i.e. lie closer in x than :data:`DODGE_DECADES` (one parameter count, or
    nearly; all x on the "0" axis) and overlap in y (their error bars, or the means when there
    are none, each widened by ``y_room`` either side: half a marker), directly or through a
    chain of such markers: those are drawn in the order of their counts (one count: the
    legend's), at least :data:`DODGE_DECADES` apart on a log axis (a factor; ``step`` decades
    instead: :func:`dodge_step` of the drawn axis) or :data:`DODGE_ZERO` on the "0" axis, so
    that none hides another's error bar, each moved as little as that allows
    (:func:`_least_moves`: markers that coincide are spread around their mean); markers of
    different counts are never moved more than ``step`` (a long chain of close counts would
    be: they are drawn at their counts, overlapping);
    :func:`dodged_note` names them and their counts."""
    step = (DODGE_DECADES if step is None else step) if log else DODGE_ZERO
    order = list(points)
    at = {method: math.log10(p[0]) if log else float(p[0]) for method, p in points.items()}
    extent = {method: (min(v for v in p[1:] if v is not None) - y_room,
                       max(v for v in p[1:] if v is not None) + y_room)
              for method, p in points.items()}
    groups = {method: {method} for method in points}  # united while two coincide
    for first, second in itertools.combinations(order, 2):
        if (not log or abs(at[first] - at[second]) < step) and \
                extent[first][0] <= extent[second][1] and extent[second][0] <= extent[first][1]:
            united = groups[first] | groups[second]
            for method in united:
                groups[method] = united
    drawn, spread = {method: float(p[0]) for method, p in points.items()}, []
    for group in {id(g): g for g in groups.values() if len(g) > 1}.values():
        methods = sorted(group, key=lambda m: (at[m], order.index(m)))
        for block in _least_moves([at[m] for m in methods], step):
            if len(block) < 2:
                continue  # already ``step`` from its neighbours: at its true x
            counts = {format_count(float(f'{points[methods[i]][0]:.3g}')) for i, _ in block}
            if len(counts) > 1 and max(abs(x - at[methods[i]]) for i, x in block) > step:
                continue  # a long chain of other counts: spread, markers would sit far from
                # their counts (an axis of counts must not lie): drawn at them, overlapping
            for i, x in block:
                drawn[methods[i]] = 10 ** x if log else x
            spread.append([methods[i] for i, _ in block])
    return drawn, sorted(spread, key=lambda methods: order.index(methods[0]))


def _least_moves(xs: list, step: float) -> list:
    """Positions ``p`` of the sorted ``xs`` (n,) at least ``step`` apart that move them least
    (sum of squared moves): with ``q_i = p_i - i step`` non-decreasing, ``q`` is the isotonic
    regression of ``xs_i - i step`` (pool adjacent violators). A chain of neighbours closer
    than ``step`` is spread around its mean, as one marker pair is; markers already ``step``
    apart stay where they are (a chain of many close counts is not moved as one block far from
    its counts). Returns the blocks ``[[(i, p_i), ...], ...]`` (a block: markers moved together)."""
    blocks = []  # [first index, last index, mean of q]
    for i, x in enumerate(xs):
        blocks.append([i, i, x - i * step])
        while len(blocks) > 1 and blocks[-2][2] > blocks[-1][2]:
            (first, _, left), (_, last, right) = blocks[-2], blocks.pop()
            size_left, size_right = blocks[-1][1] - first + 1, last - blocks[-1][1]
            blocks[-1] = [first, last, (left * size_left + right * size_right)
                          / (size_left + size_right)]
    return [[(i, q + i * step) for i in range(first, last + 1)] for first, last, q in blocks]


def dodge_step(counts) -> float:
    """The spacing, in decades, of markers that would hide each other on the log axis
    :func:`_log_params_axis` draws for ``counts``: :data:`DODGE_AXIS_FRACTION` of its width (a
    fixed factor was a third of the axis when every count lies within a few percent)."""
    low, high = _log_params_range(counts)
    return DODGE_AXIS_FRACTION * math.log10(high / low)


def dodged_note(points: dict, spread: list) -> str:
    """The figure's note on the markers :func:`dodged_positions` spread ('' when none), wrapped:
    which methods and their counts, e.g. "VPN and Base (5.55M parameters each): markers drawn
    side by side, since they would hide each other"."""
    import textwrap
    if not spread:
        return ''
    parts = []
    for methods in spread:
        counts = list(dict.fromkeys(format_count(float(f'{points[m][0]:.3g}')) for m in methods))
        parts.append(f'{", ".join(methods[:-1])} and {methods[-1]} ('
                     + (f'{counts[0]} parameters each)' if len(counts) == 1
                        else f'{", ".join(counts)} parameters)'))
    return textwrap.fill('; '.join(parts) + f': {DODGED_NOTE}', NOTE_WIDTH[ONE_COLUMN])


def plot_params_vs_metric(rows, metric, out_stem, *, horizon=None) -> list[Path]:
    """Parameters (log x, round ticks) vs a metric, one marker per method with its 90% CI
    (the legend says so); planners with 0 parameters sit on a broken-off "0" axis at the left.
    One column wide, the legend below the axes."""
    points = params_points(rows, metric, horizon)
    zero = {m: p for m, p in points.items() if p[0] == 0}
    counted = {m: p for m, p in points.items() if p[0] > 0}
    chosen_rows = _method_rows(rows, metric, horizon)
    seeds = [len({r.seed for r in chosen}) for m, chosen in chosen_rows.items() if m in points]
    marks = Marks.of([r for m in points for r in chosen_rows[m]])
    labels = [marks.label(m) for m in points]
    columns = 2 if len(points) > 2 else len(points)
    with paper_style() as plt:
        fig, axes = _params_axes(plt, bool(zero), bool(counted), ONE_COLUMN)
        style = figure_styles(points)
        keep_y_span(axes[0], *y_extent(list(points.values())), metric in METRIC_NAMES,
                    marker_room=True)
        bottom, top = axes[0].get_ylim()
        spread, drawn_counts, handles = [], [], {}
        for ax, group in zip(axes, [g for g in (zero, counted) if g]):
            drawn_x, shared = dodged_positions(
                group, log=group is counted, y_room=MARKER_SPAN / 2 * (top - bottom),
                step=dodge_step([p[0] for p in counted.values()]) if counted else None)
            spread += shared
            drawn_counts += [drawn_x[m] for m in group] if group is counted else []
            for method, (params, mean, lo, hi) in group.items():
                handles[method] = ax.errorbar([drawn_x[method]], [mean],
                            yerr=None if lo is None else [[mean - lo], [hi - mean]],
                            linestyle='none', markersize=5, capsize=3, elinewidth=1.2,
                            capthick=1.2, label=method, **style[method])
        if counted:
            _log_params_axis(axes[-1], [p[0] for p in counted.values()], drawn_counts)
        axes[0].set_ylabel(axis_label(metric))
        for ax in axes:
            ax.grid(alpha=0.3)
        note = footnote(ci_label('Error bars', seeds), dodged_note(points, spread),
                        marks.notes())
        # the axes keep ~1.9 in; below them each legend row and each note line its own room
        fig.set_figheight(PARAMS_AXES_HEIGHT + 0.16 * math.ceil(len(points) / columns)
                          + NOTE_LINE_HEIGHT * (note.count('\n') + 1))
        fig.legend([handles[m] for m in points], labels, loc='outside lower center',
                   ncol=columns, title=note, title_fontsize=6.5, handletextpad=0.3,
                   columnspacing=1.0)
        return save_figure(fig, out_stem)


PARAMS_AXES_HEIGHT, NOTE_LINE_HEIGHT = 1.75, 0.11  # inches: axes with labels; 6.5 pt line


def _params_axes(plt, with_zero: bool, with_counted: bool, height: float):
    """One axis, or a narrow "0" axis broken off the log axis (shared y, break marks)."""
    if not (with_zero and with_counted):
        fig, ax = plt.subplots(figsize=(ONE_COLUMN, height), layout='constrained')
        if with_zero:
            _zero_axis(ax)
        return fig, [ax]
    fig, axes = plt.subplots(1, 2, figsize=(ONE_COLUMN, height), sharey=True,
                             gridspec_kw=dict(width_ratios=[1, 7], wspace=0.06),
                             layout='constrained')
    _zero_axis(axes[0])
    axes[0].spines['right'].set_visible(False)
    axes[1].spines['left'].set_visible(False)
    axes[1].tick_params(axis='y', left=False)
    mark = dict(marker=[(-1, -1.5), (1, 1.5)], markersize=6, linestyle='none', color='k',
                mec='k', mew=0.6, clip_on=False)
    axes[0].plot([1], [0], transform=axes[0].transAxes, **mark)
    axes[1].plot([0], [0], transform=axes[1].transAxes, **mark)
    return fig, list(axes)


def _zero_axis(ax) -> None:
    ax.set_xlim(-1, 1)
    ax.set_xticks([0], ['0'])
    ax.set_xlabel('Parameters' if len(ax.figure.axes) == 1 else '')


def _log_params_axis(ax, counts, drawn=()) -> None:
    """The log axis of ``counts``, widened to hold every marker ``drawn`` (dodged ones lie
    beside their counts: cut at the axis end, a marker would be half hidden) with room for half
    a dodge step beyond it."""
    from matplotlib.ticker import FixedLocator, NullLocator
    low, high = _log_params_range(counts)
    margin = 10 ** (dodge_step(counts) / 2)
    low, high = min([low, *(x / margin for x in drawn)]), max([high, *(x * margin for x in drawn)])
    ax.set_xscale('log')
    ax.set_xlim(low, high)
    ticks = log_ticks(low, high)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([format_count(t) for t in ticks])
    ax.set_xlabel('Parameters (count, log scale)')


def _log_params_range(counts) -> tuple[float, float]:
    """The x limits of the parameter axis: the counts with 15% of room either side."""
    return min(counts) / 1.15, max(counts) * 1.15


# ---------------------------------------------------------------------- error overlap
@checked_arguments
def read_dump(per_sample_file: PathLike) -> dict:
    """A PlanningMetric per-sample dump (``sample_idx``, ``gt_plan``, ``scores``, ``metrics``)."""
    path = check_file(per_sample_file, 'per-sample dump', missing=(
        f'per-sample dump {per_sample_file} does not exist (PlanningMetric out_file; a results '
        'row\'s per_sample_file, relative to its results file; rows written before 2026-11-27 '
        'named it from the working directory of their run: write that row\'s path relative to '
        'the results file)'))
    dump = read_json(path, 'per-sample dump')
    for key in ('sample_idx', 'gt_plan', 'scores'):
        if not isinstance(dump, dict) or key not in dump:
            raise ValueError(f'{path}: no field {key!r}; expected a PlanningMetric out_file dump')
    return dump


def check_row_dump(row: ResultRow) -> None:
    """The row's per-sample dump is the one its metrics were computed from: the metrics the
    dump records equal the row's (a dump of another seed, method or run copied over it would
    count other windows' outcomes under this row's name)."""
    recorded = read_dump(row.per_sample_file).get('metrics') or {}
    for name in sorted(set(recorded) & set(row.metrics)):
        if not math.isclose(recorded[name], row.metrics[name], rel_tol=1e-9, abs_tol=1e-9):
            raise ValueError(
                f'per-sample dump {row.per_sample_file} records {name} = {recorded[name]:g}, '
                f'but the row of {row.method!r} seed {row.seed} T={row.horizon} it belongs to has '
                f'{row.metrics[name]:g}; expected the dump of that very test (a dump of another '
                'seed, method or run in its place?)')


@checked_arguments
def read_success(per_sample_file: PathLike) -> dict:
    """``{sample_idx: (solved, gt_plan tuple)}`` from a PlanningMetric per-sample dump."""
    dump = read_dump(per_sample_file)
    solved = dump['scores']['success_rate']
    return {int(i): (score >= 50.0, tuple(gt))
            for i, score, gt in zip(dump['sample_idx'], solved, dump['gt_plan'])}


@dataclass
class Overlap:
    """Test windows of ``method`` vs ``reference`` (counts summed over the paired seeds)."""
    method: str
    reference: str
    both_fail: int
    fixed: int        # reference fails, method solves
    introduced: int   # reference solves, method fails
    both_solve: int
    seeds: list
    fixed_pct: tuple = ()       # (mean, low, high) over seeds, % of the reference's failures
    introduced_pct: tuple = ()  # (mean, low, high) over seeds, % of the reference's successes
    marks: Marks = field(default_factory=Marks)  # shortened runs, feature sources

    @property
    def total(self) -> int:
        return self.both_fail + self.fixed + self.introduced + self.both_solve


def _overlap_counts(method_file, reference_file) -> np.ndarray:
    """(both fail, fixed, introduced, both solve) of two dumps of the same test windows."""
    method, reference = read_success(method_file), read_success(reference_file)
    if method.keys() != reference.keys():
        raise ValueError(f'{method_file} and {reference_file} cover different test windows '
                         f'({len(method)} vs {len(reference)} sample indices)')
    counts = np.zeros(4, dtype=np.int64)
    for index, (solved, gt) in method.items():
        ref_solved, ref_gt = reference[index]
        if gt != ref_gt:
            raise ValueError(f'sample {index}: ground truth {list(gt)} in {method_file} but '
                             f'{list(ref_gt)} in {reference_file}')
        counts[2 * int(ref_solved) + int(solved)] += 1  # the order of the docstring
    return counts


@checked_arguments
def error_overlap(rows: list[ResultRow], method: str, reference: str,
                  horizon: Count | None = None) -> Overlap:
    """Windows fixed / introduced by ``method`` against ``reference`` over the seeds both ran
    (rows with a ``per_sample_file``); percentages are per-seed means with a 90% CI."""
    if method == reference:
        raise ValueError(f'an overlap compares two different methods, got {method!r} twice '
                         '(it would fix and introduce nothing)')
    at = select_horizon(rows, horizon)
    # a name of no row there ('VPN', whose rows at T=3 are 'VPN (train T=4)') is named so,
    # not as a row without a dump
    check_names([method, reference], list(dict.fromkeys(r.method for r in at)),
                '--pair' + (f' (methods at T={horizon})' if horizon else ''))
    rows = [r for r in at if r.per_sample_file]
    compared = [r for r in rows if r.method in (method, reference)]
    refuse_mix(compared, 'horizon', '--horizon')
    refuse_mix(compared, 'dataset', '--dataset')
    check_points(compared)

    def dumps(name):
        chosen = [r for r in compared if r.method == name]
        for row in chosen:
            check_row_dump(row)
        found = {r.seed: r.per_sample_file for r in chosen}
        if not found:
            raise ValueError(f'no results row of {name!r}' + (f' at T={horizon}' if horizon
                             else '') + ' has a per_sample_file')
        return found
    ours, theirs = dumps(method), dumps(reference)
    seeds = sorted(set(ours) & set(theirs))
    if not seeds:
        raise ValueError(f'{method!r} (seeds {sorted(ours)}) and {reference!r} (seeds '
                         f'{sorted(theirs)}) share no seed')
    per_seed = np.stack([_overlap_counts(ours[s], theirs[s]) for s in seeds])
    fails, solves = per_seed[:, 0] + per_seed[:, 1], per_seed[:, 2] + per_seed[:, 3]
    return Overlap(method, reference, *(int(c) for c in per_seed.sum(0)), seeds,
                   _share_over_seeds(per_seed[:, 1], fails),
                   _share_over_seeds(per_seed[:, 2], solves), Marks.of(compared))


def _share_over_seeds(part: np.ndarray, whole: np.ndarray) -> tuple:
    """(mean, low, high) of the per-seed percentages ``part / whole`` (S,) over the seeds
    whose ``whole`` is not 0 (a share of no windows is undefined, not 0%); all None when no
    seed has any."""
    defined = whole > 0
    if not defined.any():
        return None, None, None
    return seed_interval(100.0 * part[defined] / whole[defined])


def overlap_table(overlaps: list[Overlap]) -> str:
    """Markdown table of :func:`error_overlap` results."""
    def pct(values):
        mean, low, high = values
        if mean is None:
            return 'n/a'
        return f'{mean:.1f}' if low is None else f'{mean:.1f} [{low:.1f}, {high:.1f}]'
    lines = ['| Method | Reference | Seeds | Windows | Both fail | Fixed | Introduced | '
             'Both solve | Fixed (% of ref. failures) | Introduced (% of ref. successes) |',
             '|---|---|---|---|---|---|---|---|---|---|']
    marks = Marks.merge([o.marks for o in overlaps])
    for o in overlaps:
        lines.append(markdown_row([markdown_text(marks.label(o.method)),
                                   markdown_text(marks.label(o.reference)), len(o.seeds),
                                   o.total, o.both_fail, o.fixed, o.introduced, o.both_solve,
                                   pct(o.fixed_pct), pct(o.introduced_pct)]))
    few = sorted({len(o.seeds) for o in overlaps if len(o.seeds) < MIN_SEEDS_FOR_CI})
    lines.append('\nCounts summed over the seeds; percentages: mean over seeds [90% bootstrap CI]'
                 + (f' ({", ".join(f"n={n}" for n in few)}: no CI, fewer than '
                    f'{MIN_SEEDS_FOR_CI} seeds)' if few else '')
                 + '. Fixed: the reference fails, the method solves; introduced: the reverse; '
                 'a percentage is over the seeds whose reference has such windows (n/a: none). '
                 + markdown_text(' '.join(filter(None, [shortened_note(marks.shortened) + '.'
                                                        if marks.shortened else '',
                                                        marks.features_text]))))
    return '\n'.join(lines).rstrip() + '\n'


VENN_PANEL_WIDTH = ONE_COLUMN / 2  # two comparisons fit one column


def overlap_width(count: int) -> float:
    """Figure width (in) of ``count`` Venn panels: one column up to two, else full width."""
    return ONE_COLUMN if count <= 2 else TWO_COLUMNS


VENN_XLIM, VENN_LABEL_Y = (-1.6, 1.6), 1.08  # labels above and below the circles (radius 1)
VENN_FONT, VENN_SPACING = 6.5, 1.2
VENN_LINE = VENN_FONT * VENN_SPACING  # one text line, in points


def _venn_texts(o: Overlap) -> tuple:
    """(reference label, method label, notes) of a panel, wrapped."""
    import textwrap
    reference, method = (o.marks.label(m) for m in (o.reference, o.method))
    def share(values, of):
        return f'n/a ({of}: none)' if values[0] is None else f'{values[0]:.1f}% of {of}'
    notes = [f'both solve: {o.both_solve}',
             f'fixed: {share(o.fixed_pct, o.reference + chr(39) + "s failures")}',
             f'introduced: {share(o.introduced_pct, "its successes")}']
    return (textwrap.fill(f'{reference} fails', 30), textwrap.fill(f'{method} fails', 30),
            '\n'.join(textwrap.fill(n, 32, subsequent_indent='  ') for n in notes))


def _venn_ylim(overlaps: list[Overlap], panel_width: float) -> tuple:
    """Axes y limits that hold every panel's labels above and below the circles and no more
    (the panel is ``panel_width`` inches wide, its x extent :data:`VENN_XLIM`)."""
    points_per_unit = panel_width * 72 * 0.92 / (VENN_XLIM[1] - VENN_XLIM[0])
    lines = [[text.count('\n') + 1 for text in _venn_texts(o)] for o in overlaps]
    above = max(ref for ref, _, _ in lines) * VENN_LINE + 3
    below = max(method + notes for _, method, notes in lines) * VENN_LINE + 5
    return (-VENN_LABEL_Y - below / points_per_unit, VENN_LABEL_Y + above / points_per_unit)


def plot_error_overlap(overlaps: list[Overlap], out_stem) -> list[Path]:
    """One two-circle Venn diagram of the failures per comparison (left: reference, right:
    method), panels side by side, every label inside its panel, each percentage naming its
    denominator; one column wide for up to two comparisons, full width (LaTeX ``figure*``)
    for more, as the table says. Also writes ``<out_stem>.md`` (:func:`overlap_table` + the
    figure's width); returns PNG, PDF and table paths."""
    width = overlap_width(len(overlaps))
    panel = width / max(len(overlaps), 2)
    ylim = _venn_ylim(overlaps, panel)
    aspect = (ylim[1] - ylim[0]) / (VENN_XLIM[1] - VENN_XLIM[0])
    marks = Marks.merge([o.marks for o in overlaps])
    with paper_style() as plt:
        fig, axes = plt.subplots(1, len(overlaps), figsize=(width, 0.9 * panel * aspect + 0.46),
                                 squeeze=False, layout='constrained')
        # h_pad: the note line (supxlabel) 3 points and more below the panels' lowest text;
        # 0.46 in: the note's first two lines (counts, over which seeds a % is) and a margin
        fig.get_layout_engine().set(w_pad=0.01, h_pad=0.05, wspace=0.0)
        colour = distinct_colours([m for o in overlaps for m in (o.reference, o.method)])
        for ax, o in zip(axes[0], overlaps):
            _venn_panel(ax, o, colour, ylim)
        seeds = sorted({len(o.seeds) for o in overlaps})
        import textwrap
        fig.supxlabel(footnote(textwrap.fill(
            f'Window counts summed over {"/".join(map(str, seeds))} seeds; % = mean over the '
            'seeds whose reference has such windows', NOTE_WIDTH[width] - 10),
            marks.notes(width)), fontsize=6.5)
        paths = save_figure(fig, out_stem)
    table = stem_files(out_stem, ('.md',))[0]
    place = ('one column wide' if width == ONE_COLUMN
             else 'full width (two columns, LaTeX figure*)')
    table.write_text(overlap_table(overlaps) + f'\nFigure {paths[0].name}: {place} '
                     f'({width} in).\n\n{OVERLAP_TABLE_MARKER}\n')
    return paths + [table]


def _venn_panel(ax, o: Overlap, colour: dict, ylim: tuple) -> None:
    """Reference's failures (left circle) and the method's (right), in the methods' colours
    ``colour``; names above and below, the counts inside, under the method's name the windows
    both solve and the two percentages with their denominators (placed in points below it:
    never over it, whatever the names' length); ``ylim``: :func:`_venn_ylim`."""
    from matplotlib.patches import Circle
    for x, name in ((-0.55, o.reference), (0.55, o.method)):
        ax.add_patch(Circle((x, 0), 1.0, facecolor=colour[name], alpha=0.25,
                            edgecolor=colour[name], linewidth=1.0))
    small = dict(ha='center', va='center', fontsize=VENN_FONT)
    ax.text(-0.95, 0, f'{o.fixed}\nfixed', **small)
    ax.text(0, 0, f'{o.both_fail}\nboth\nfail', **small)
    ax.text(0.95, 0, f'{o.introduced}\nintro-\nduced', **small)
    reference, method, notes = _venn_texts(o)
    label = dict(fontsize=VENN_FONT, linespacing=VENN_SPACING)
    ax.text(-1.6, VENN_LABEL_Y, reference, ha='left', va='bottom', color=colour[o.reference],
            **label)
    ax.text(1.6, -VENN_LABEL_Y, method, ha='right', va='top', color=colour[o.method], **label)
    ax.annotate(notes, xy=(-1.6, -VENN_LABEL_Y), textcoords='offset points',
                xytext=(0, -(method.count('\n') + 1) * VENN_LINE - 2), ha='left', va='top',
                **label)
    ax.set_xlim(*VENN_XLIM)
    ax.set_ylim(*ylim)
    ax.set_aspect('equal')
    ax.axis('off')


@dataclass
class Overlap3:
    """Failures of three methods on the same test windows (the paper's Venn diagram).

    ``counts[(a, b, c)]``: windows failed exactly by the methods whose flag is True, summed
    over the seeds all three ran; ``pairs``: :func:`error_overlap` of each later method
    against each earlier one (fixed / introduced percentages of the paper's text).
    """
    methods: tuple
    counts: dict
    seeds: list
    pairs: list

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@checked_arguments
def error_overlap3(rows: list[ResultRow], methods, horizon: Count | None = None) -> Overlap3:
    """:class:`Overlap3` of three methods over the seeds all three ran (rows with a
    ``per_sample_file``, as :func:`error_overlap`)."""
    methods = tuple(methods)
    if len(methods) != 3 or len(set(methods)) != 3:
        raise ValueError(f'a three-set overlap needs three different methods, got {methods}')
    pairs = [error_overlap(rows, methods[j], methods[i], horizon)
             for i in range(3) for j in range(i + 1, 3)]
    seeds = sorted(set.intersection(*(set(p.seeds) for p in pairs)))
    if not seeds:
        raise ValueError(f'{methods} share no seed')
    files = {m: {r.seed: r.per_sample_file for r in rows if r.method == m and r.per_sample_file
                 and (horizon is None or r.horizon == horizon)} for m in methods}
    counts = {pattern: 0 for pattern in itertools.product((False, True), repeat=3)}
    for seed in seeds:
        solved = [read_success(files[m][seed]) for m in methods]
        for index in solved[0]:  # same windows and ground truth: checked by the pairs
            counts[tuple(not s[index][0] for s in solved)] += 1
    return Overlap3(methods, counts, seeds, pairs)


def overlap3_table(overlap: Overlap3) -> str:
    """Markdown: the eight regions, then the pairwise fixed / introduced table."""
    names = overlap.methods
    lines = [markdown_row([markdown_text(f'{m} fails') for m in names] + ['Windows']),
             '|' + '---|' * 4]
    for pattern, count in sorted(overlap.counts.items(), reverse=True):
        lines.append(markdown_row(['yes' if f else 'no' for f in pattern] + [count]))
    lines.append(f'\n{overlap.total} windows x seeds ({len(overlap.seeds)} seeds: '
                 f'{overlap.seeds}), counts summed over the seeds.\n')
    return '\n'.join(lines) + '\n' + overlap_table(overlap.pairs)


# region label positions of circles A (upper left), B (upper right), C (bottom)
VENN3_CENTRES = ((-0.55, 0.32), (0.55, 0.32), (0.0, -0.6))
VENN3_LABELS = {(True, False, False): (-1.0, 0.6), (False, True, False): (1.0, 0.6),
                (False, False, True): (0.0, -1.15), (True, True, False): (0.0, 0.82),
                (True, False, True): (-0.68, -0.42), (False, True, True): (0.68, -0.42),
                (True, True, True): (0.0, 0.02)}


def plot_error_overlap3(overlap: Overlap3, out_stem) -> list[Path]:
    """Three-circle Venn diagram of the failures (one column wide; counts summed over the
    seeds; each circle in its method's colour, names wrapped inside the canvas); also writes
    ``<out_stem>.md`` (:func:`overlap3_table`)."""
    import textwrap
    from matplotlib.patches import Circle
    marks = Marks.merge([pair.marks for pair in overlap.pairs])
    colour = distinct_colours(overlap.methods)
    with paper_style() as plt:
        fig, ax = plt.subplots(figsize=(ONE_COLUMN, 3.0), layout='constrained')
        for (x, y), method in zip(VENN3_CENTRES, overlap.methods):
            ax.add_patch(Circle((x, y), 1.0, facecolor=colour[method], alpha=0.2,
                                edgecolor=colour[method], linewidth=1.2))
        for pattern, (x, y) in VENN3_LABELS.items():
            ax.text(x, y, str(overlap.counts[pattern]), ha='center', va='center', fontsize=7)
        for (x, y), name, side in zip(VENN3_CENTRES, overlap.methods,
                                      ('right', 'left', 'center')):
            below = y < 0
            label = textwrap.fill(f'{marks.label(name)} fails', 24)
            ax.text(x + {'right': 0.35, 'left': -0.35, 'center': 0}[side],
                    y + (-1.08 if below else 1.08), label, ha=side,
                    va='top' if below else 'bottom', fontsize=7, color=colour[name])
        ax.text(1.85, -1.75, f'all solve:\n{overlap.counts[(False, False, False)]}',
                ha='right', va='bottom', fontsize=7)
        ax.set_xlim(-1.9, 1.9)
        ax.set_ylim(-1.8, 1.6)
        ax.set_aspect('equal')
        ax.axis('off')
        fig.supxlabel(footnote(f'Window counts summed over {len(overlap.seeds)} seeds',
                               marks.notes()), fontsize=6.5)
        paths = save_figure(fig, out_stem)
    table = stem_files(out_stem, ('.md',))[0]
    table.write_text(overlap3_table(overlap) + f'\n{OVERLAP_TABLE_MARKER}\n')
    return paths + [table]


# ------------------------------------------------------------------------ qualitative
@checked_arguments
def top_actions(emissions, soft_plan, gt_plan, pred_plan, k: Count = 8) -> list[int]:
    """Column indices to show: the ground-truth and predicted actions and each step's
    emission argmax, then the actions with the highest probability at any step (emissions or
    soft plan) up to ``k`` (more only when those alone need it), in their original column
    order.

    Args:
        emissions, soft_plan: (T, A); gt_plan, pred_plan: (T,) column indices.
    """
    emission_argmax = np.asarray(emissions).argmax(1)
    chosen = list(dict.fromkeys([int(a) for a in gt_plan] + [int(a) for a in pred_plan]
                                + [int(a) for a in emission_argmax]))
    peak = np.maximum(np.asarray(emissions).max(0), np.asarray(soft_plan).max(0))
    for column in np.argsort(-peak, kind='stable'):
        if len(chosen) >= k:
            break
        if int(column) not in chosen:
            chosen.append(int(column))
    return sorted(chosen)


def qualitative_markers(emissions, soft_plan, gt_plan, pred_plan) -> dict:
    """``{panel: {marker label: (T,) column per step}}`` of the two heatmaps: ground truth in
    both; in the emissions panel each step's emission argmax (what the network alone
    predicts), in the soft-plan panel the predicted plan (the decoding through the PKG).

    Args:
        emissions, soft_plan: (T, A); gt_plan, pred_plan: (T,) column indices.
    """
    truth = [int(a) for a in gt_plan]
    return {'Emissions': {'ground truth': truth,
                          'emission argmax': [int(a) for a in np.asarray(emissions).argmax(1)]},
            'Soft plan (DVL)': {'ground truth': truth,
                                'predicted plan': [int(a) for a in pred_plan]}}


QUALITATIVE_MARKERS = {'ground truth': dict(marker='s', s=55, facecolors='none',
                                            edgecolors='black', linewidths=1.2),
                       'emission argmax': dict(marker='D', s=12, c='white', edgecolors='black',
                                               linewidths=0.8),
                       'predicted plan': dict(marker='o', s=10, c='black')}


@checked_arguments
def plot_qualitative(emissions, soft_plan, action_names, out_stem, *, gt_plan, pred_plan,
                     k: Count = 8, shortened: str = '', features: str = '') -> list[Path]:
    """Emissions and DVL soft plan of one window as (action x step) heatmaps over the
    :func:`top_actions` of its task, one column wide; ground truth = square in both panels,
    each step's emission argmax = diamond in the emissions panel, predicted plan = dot in the
    soft-plan panel (:func:`qualitative_markers`).

    Args:
        emissions: (T, A) emission probabilities; soft_plan: (T, A) DVL soft plan.
        action_names: (A,) column labels; gt_plan, pred_plan: (T,) column indices (0..A-1).
        shortened: why the model's training is not the full one ('' = full): noted with †.
        features: the features sentence of the note (:func:`provenance.record_note`).
    """
    import textwrap
    import matplotlib.patheffects as effects
    emissions, soft_plan = np.asarray(emissions), np.asarray(soft_plan)
    num_actions = len(action_names)
    if emissions.shape != soft_plan.shape or emissions.shape[1] != num_actions:
        raise ValueError(f'emissions {emissions.shape} and soft_plan {soft_plan.shape} must be '
                         f'(T, {num_actions}) for {num_actions} action names')
    rows = top_actions(emissions, soft_plan, gt_plan, pred_plan, k)
    row_of = {a: i for i, a in enumerate(rows)}
    steps = emissions.shape[0]
    outline = [effects.withStroke(linewidth=2.2, foreground='white')]
    names = [str(action_names[a]) for a in rows]
    by_index = max(len(n) for n in names) > QUALITATIVE_LABEL_CHARS
    with paper_style() as plt:
        fig, axes = plt.subplots(1, 2, figsize=(ONE_COLUMN, 0.75 + 0.24 * len(rows)),
                                 sharey=True, layout='constrained')
        markers = qualitative_markers(emissions, soft_plan, gt_plan, pred_plan)
        for ax, matrix, (name, marked) in zip(axes, (emissions, soft_plan), markers.items()):
            image = ax.imshow(matrix[:, rows].T, aspect='auto', cmap='cividis', vmin=0, vmax=1)
            for label, columns in marked.items():
                ax.scatter(range(steps), [row_of[a] for a in columns], path_effects=outline,
                           label=label, **QUALITATIVE_MARKERS[label])
            ax.set_xticks(range(steps), [str(t + 1) for t in range(steps)])
            ax.set_xlabel('Step t')
            ax.set_title(name, fontsize=7, pad=3)  # panel label, not a caption
        axes[0].set_yticks(range(len(rows)), [str(i + 1) for i in range(len(rows))]
                           if by_index else names)
        if by_index:
            axes[0].set_ylabel('Action (key below)')
        bar = fig.colorbar(image, ax=axes, label='Probability', fraction=0.08, pad=0.02)
        bar.set_ticks([0, 0.25, 0.5, 0.75, 1.0])
        handles = {}
        for ax in axes:
            handles.update(zip(*reversed(ax.get_legend_handles_labels())))
        fig.legend(handles.values(), handles.keys(), loc='outside upper center', ncol=3,
                   handletextpad=0.2, columnspacing=0.8)
        note = footnote(f'{SHORTENED_MARK} shortened run: {shortened}' if shortened else '',
                        textwrap.fill(features, 62))
        if by_index or note:
            fig.supxlabel(footnote(action_key(names) if by_index else '', note), x=0.0,
                          ha='left', fontsize=6.5, linespacing=1.15)
        return save_figure(fig, out_stem)


QUALITATIVE_LABEL_CHARS = 22  # longer action names: rows numbered, the names in a key


def action_key(names, width: int = 62) -> str:
    """'1 name' per line, wrapped (the key of the numbered rows)."""
    import textwrap
    return '\n'.join(textwrap.fill(f'{i + 1}  {name}', width, subsequent_indent='    ')
                      for i, name in enumerate(names))


@checked_arguments
def qualitative_from_checkpoint(config: PathLike, checkpoint: PathLike,
                                index: NonNegativeInt = 0,
                                cfg_options: dict | None = None) -> dict:
    """Inputs of :func:`plot_qualitative` for test sample ``index`` of a trained model (with
    ``shortened`` when the checkpoint's epoch is before the config's ``max_epochs``), plus
    ``caption`` (task and sample, for the paper's caption).

    The columns are the actions of the sample's task (plus any predicted action or emission
    argmax outside it); ``features``: the note on what the model was tested on (its test
    dataset's feature folders, :mod:`vpn_plugin.datasets.provenance`).
    """
    from vpn_plugin.datasets.provenance import dataset_feature_dirs, folders_provenance
    from .provenance import record_note
    from vpn_plugin.apis import build_split_dataset, inference_planner, init_planner
    from vpn_plugin.engine.checkpoint import read_checkpoint
    model = init_planner(config, checkpoint, cfg_options=cfg_options)
    dataset = build_split_dataset(model.cfg, 'test')
    epoch = (read_checkpoint(checkpoint).get('meta') or {}).get('epoch')
    planned = model.cfg.get('train_cfg', {}).get('max_epochs')
    shortened = (f'checkpoint of epoch {epoch} of the config\'s {planned}'
                 if epoch is not None and planned and epoch < planned else '')
    out = inference_planner(model, dataset, [index])[0]
    task = int(out.gt_task)
    task_actions = list(dataset.taxonomy.task_actions[task])
    outside = [int(a) for a in list(out.pred_plan) + list(out.emissions.argmax(1))]
    columns = task_actions + [a for a in dict.fromkeys(outside) if a not in task_actions]
    position = {a: i for i, a in enumerate(columns)}
    return dict(emissions=out.emissions[:, columns].numpy(),
                soft_plan=out.soft_plan[:, columns].numpy(),
                action_names=[dataset.taxonomy.action_names[a] for a in columns],
                gt_plan=[position[int(a)] for a in out.gt_plan],
                pred_plan=[position[int(a)] for a in out.pred_plan], shortened=shortened,
                features=record_note(folders_provenance(dataset_feature_dirs(dataset))),
                caption=f'{dataset.taxonomy.task_names[task]} (test sample {index})')

"""Tables and the figure of a comparison of whole trainings (``framework.compare``).

* :func:`metric_rows` / :func:`metric_table`: the final test metrics of both sides, the paper's
  table (mean ± full width of the 90% bootstrap CI over seeds, Δ = ours - official with its
  CI; ``*`` = the interval excludes 0, i.e. a difference beyond seed noise). The official side
  twice: its last epoch (what ours is compared with) and the checkpoint its own script selects
  (test-set selection where it does so).
* :func:`variant_table`: an official variant (``--official-variant``: an official defect on)
  against the main official run, Δ = with - without, paired by seed.
* :func:`rescore_text`: the official weights scored by our evaluator (``--rescore-with-ours``)
  against ours (both sides' trainings, one evaluator) and against the official script's own
  test pass of the same weights (paired by seed: what the evaluator alone changes).
* :func:`loss_table`: per-epoch mean training loss of each side with its CI over seeds.
* :func:`speed_lines`: seconds per training epoch of each side (median over epochs and seeds,
  both sides alternating on the same machine) and the ratio; the official per-epoch test pass.
* :func:`plot_losses`: the loss curves, one column wide, PNG + PDF.
"""
from __future__ import annotations

import statistics

import numpy as np

from vpn_plugin.core.stats import bootstrap_ci
from vpn_plugin.outputs import markdown_row
from vpn_plugin.protocol.report import build_table, to_markdown
from vpn_plugin.protocol.results import ResultRow

LAST, SELECTED, OURS = 'official, last epoch', 'official, its own selection', 'ours'


def method_names(label: str) -> dict:
    return {key: f'{label} ({key})' for key in (LAST, SELECTED, OURS)}


def metric_rows(label: str, runs: dict, settings) -> list[ResultRow]:
    """ResultRows of the official side (last epoch; its own selection, when it has one) and of
    ours, one per seed."""
    names = method_names(label)
    rows = []
    for run in runs['official']:
        rows.append(_row(names[LAST], run.seed, run.metrics, settings))
        if run.selected is not None:
            rows.append(_row(names[SELECTED], run.seed, run.selected, settings))
    rows += [_row(names[OURS], run.seed, run.metrics, settings) for run in runs['ours']]
    return rows


def _row(method, seed, metrics, settings) -> ResultRow:
    return ResultRow(method=method, seed=seed, horizon=settings.horizon,
                     metrics=dict(metrics), dataset=settings.dataset,
                     protocol='official_training', config=settings.method,
                     shortened=f'{settings.epochs} epochs')


def metric_table(label: str, runs: dict, settings, metrics) -> str:
    """The Markdown table of the final metrics, Δ = ours - official last epoch."""
    names = method_names(label)
    rows = metric_rows(label, runs, settings)
    methods = [n for n in (names[OURS], names[LAST], names[SELECTED])
               if any(r.method == n for r in rows)]
    table = build_table(rows, metrics, methods=methods, ours=names[OURS],
                        reference=names[LAST])
    return to_markdown(table)


def variant_table(label: str, runs: dict, settings, metrics, variant: str) -> str:
    """The Markdown table of an official variant (``--official-variant``) against the main
    official run, both at the last epoch; Δ = with - without, paired by seed (the same seeds
    and training)."""
    with_name, without = f'{label} (official, {variant})', method_names(label)[LAST]
    rows = ([_row(without, r.seed, r.metrics, settings) for r in runs['official']]
            + [_row(with_name, r.seed, r.metrics, settings) for r in runs['variants'][variant]])
    return to_markdown(build_table(rows, metrics, methods=[with_name, without], ours=with_name,
                                   reference=without, paired=True))


def variant_text(label: str, runs: dict, settings, metrics) -> str:
    """Each variant's table and how far its training losses were from the main run's."""
    parts = []
    for variant, variant_runs in runs.get('variants', {}).items():
        gap = max(r.stages['check']['max_loss_difference_to_main_run'] for r in variant_runs)
        parts.append(f'official variant {variant} against the official run without it '
                     f'(last epoch; Δ = with - without, paired by seed; largest training-loss '
                     f'difference between the two official trainings {gap:.2g}):\n\n'
                     + variant_table(label, runs, settings, metrics, variant))
    return '\n'.join(parts)


def rescore_text(label: str, runs: dict, settings, metrics) -> str:
    """The two tables of ``--rescore-with-ours`` (empty without it)."""
    if not runs.get('rescored'):
        return ''
    names = method_names(label)
    rescored = f'{label} (official, our evaluator)'
    scored = [_row(rescored, r.seed, r.metrics, settings) for r in runs['rescored']]
    ours = [_row(names[OURS], r.seed, r.metrics, settings) for r in runs['ours']]
    own = [_row(names[LAST], r.seed, r.metrics, settings) for r in runs['official']]
    one = to_markdown(build_table(ours + scored, metrics, methods=[names[OURS], rescored],
                                  ours=names[OURS], reference=rescored))
    same = to_markdown(build_table(scored + own, metrics, methods=[rescored, names[LAST]],
                                   ours=rescored, reference=names[LAST], paired=True))
    return ('both trainings scored by our evaluator (the official last epoch\'s weights loaded '
            'into our model; Δ = ours - official):\n\n' + one + '\n'
            'the official weights, our evaluator against the official test pass (Δ = ours - '
            'its own, paired by seed: the evaluator alone):\n\n' + same)


def per_epoch(runs: list, name: str) -> np.ndarray:
    """(seeds, epochs) of one loss of one side."""
    return np.array([run.losses[name] for run in runs], dtype=np.float64)


def epoch_ci(values: np.ndarray) -> list:
    """[(mean, low, high)] per epoch of (seeds, epochs) values (90% bootstrap over seeds;
    low = high = mean with fewer than 3 seeds)."""
    out = []
    for column in values.T:
        if len(column) < 3:
            out.append((float(column.mean()),) * 3)
        else:
            out.append(bootstrap_ci(column))
    return out


def shown_epochs(epochs: int, rows: int = 12) -> list:
    """About ``rows`` epochs to tabulate: the first, the last and evenly spaced between."""
    return sorted({int(round(x)) for x in np.linspace(1, epochs, min(rows, epochs))})


def loss_curves(runs: dict, loss_names) -> dict:
    """``{(side, loss name): (seeds, epochs) array}`` of the main training."""
    return {(side, name): per_epoch(runs[side], name)
            for side in ('official', 'ours') for name in loss_names}


def loss_table(curves: dict, loss_names, epochs: int) -> str:
    """Markdown: per shown epoch, each loss of each side as mean ± CI width over seeds
    (``curves``: :func:`loss_curves`)."""
    stats = {key: epoch_ci(values) for key, values in curves.items()}
    header = ['epoch'] + [f'{name} ({side})' for name in loss_names
                          for side in ('official', 'ours')]
    lines = [markdown_row(header), '|' + '---|' * len(header)]
    for epoch in shown_epochs(epochs):
        cells = [str(epoch)]
        for name in loss_names:
            for side in ('official', 'ours'):
                mean, low, high = stats[(side, name)][epoch - 1]
                cells.append(f'{mean:.3f} ± {high - low:.3f}')
        lines.append(markdown_row(cells))
    return '\n'.join(lines) + '\n'


def stage_names(runs: dict) -> list:
    """The trained pre-stages both sides ran (in the official order)."""
    official = list(runs['official'][0].stages) if runs['official'] else []
    return [name for name in official if 'losses' in runs['official'][0].stages[name]
            and all(name in r.stages for r in runs['ours'])]


def check_lines(runs: dict) -> str:
    """The official pre-stages that are checks, not trainings (no losses; KEPP's graph against
    ours), one line each with its values per seed (once when equal)."""
    lines = []
    for stage in (runs['official'][0].stages if runs['official'] else {}):
        values = [r.stages[stage] for r in runs['official']]
        if 'losses' in values[0]:
            continue
        shown = values[:1] if all(v == values[0] for v in values) else values
        lines.append(f'{stage}: ' + '; '.join(', '.join(f'{k} {v}' for k, v in value.items())
                                              for value in shown))
    return '\n'.join(lines) + ('\n' if lines else '')


def stage_text(runs: dict, stage: str) -> str:
    """A pre-stage: its per-epoch training loss on both sides, seconds per epoch, and the
    official test accuracy of its last epoch and of its test-selected checkpoint."""
    curves = {(side, 'total'): np.array([r.stages[stage]['losses'] for r in runs[side]])
              for side in ('official', 'ours')}
    seconds = {side: statistics.median(s for r in runs[side] for s in r.stages[stage]['seconds'])
               for side in ('official', 'ours')}
    official = [r.stages[stage] for r in runs['official']]
    lines = [f'pre-stage {stage}: training loss per epoch (mean ± 90% CI width over seeds):',
             '', loss_table(curves, ('total',), curves[('official', 'total')].shape[1]),
             f'seconds per epoch (median): official {seconds["official"]:.2f}, ours '
             f'{seconds["ours"]:.2f}: ours {seconds["official"] / seconds["ours"]:.1f}x faster']
    if 'accuracy' in official[0]:
        lines.append(
            'official test accuracy (mean over seeds): last epoch '
            f'{np.mean([o["accuracy"] for o in official]):.2f}%, its test-selected checkpoint '
            f'{np.mean([o["selected_accuracy"] for o in official]):.2f}% (epochs '
            f'{[o["selected_epoch"] for o in official]})')
    return '\n'.join(lines) + '\n'


def speed(runs: dict) -> dict:
    """Median seconds per training epoch of each side (over every epoch of every seed), the
    official per-epoch test pass, and official / ours."""
    official = statistics.median(s for r in runs['official'] for s in r.train_seconds)
    ours = statistics.median(s for r in runs['ours'] for s in r.train_seconds)
    evals = [s for r in runs['official'] for s in r.eval_seconds]
    return dict(official_train=official, ours_train=ours, ratio=official / ours,
                official_eval=statistics.median(evals) if evals else None)


def speed_lines(runs: dict) -> str:
    s = speed(runs)
    text = (f'seconds per training epoch (median over epochs and seeds): official '
            f'{s["official_train"]:.2f}, ours {s["ours_train"]:.2f}: ours '
            f'{s["ratio"]:.1f}x faster')
    if s['official_eval'] is not None:
        passes = len([e for r in runs['official'] for e in r.eval_seconds]) / len(runs['official'])
        text += (f'; the official loop also tests on the test windows during training '
                 f'({passes:g} pass{"" if passes == 1 else "es"} per seed, not counted above): '
                 f'{s["official_eval"]:.2f} s per pass (median)')
    return text + '\n'


def plot_losses(label: str, runs: dict, out_stem) -> list:
    """The training loss per epoch of both sides (mean over seeds and its 90% bootstrap band),
    one panel for the main training and one per pre-stage, one column wide."""
    from matplotlib.ticker import MaxNLocator
    from vpn_plugin.protocol.plots import OKABE_ITO, ONE_COLUMN, _pyplot, ci_label, \
        method_styles, paper_style, save_figure
    plt = _pyplot()
    colours = dict(official=OKABE_ITO[6],  # black, dashed: the official loop
                   ours=method_styles([method_names(label)[OURS]])[method_names(label)[OURS]]
                   ['color'])
    panels = [('training', {side: per_epoch(runs[side], 'total') for side in runs if
                            side in ('official', 'ours')})]
    panels += [(stage, {side: np.array([r.stages[stage]['losses'] for r in runs[side]])
                        for side in ('official', 'ours')}) for stage in stage_names(runs)]
    with paper_style():
        fig, axes = plt.subplots(len(panels), 1, figsize=(ONE_COLUMN, 1.9 * len(panels)),
                                 squeeze=False)
        for ax, (panel, curves) in zip(axes[:, 0], panels):
            for side, dashes in (('official', (4, 2)), ('ours', ())):
                mean, low, high = (np.array(v) for v in zip(*epoch_ci(curves[side])))
                epochs = np.arange(1, len(mean) + 1)
                ax.plot(epochs, mean, color=colours[side], dashes=dashes,
                        label=f'{label} {side}')
                ax.fill_between(epochs, low, high, color=colours[side], alpha=0.2, linewidth=0)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel('Epoch')
            ax.set_ylabel('Training loss' if panel == 'training'
                          else f'Loss ({panel.replace("_", " ")})')
            ax.grid(True, alpha=0.3)
        # above the first panel, never over a curve (the curves fill any corner)
        axes[0, 0].legend(title=ci_label('Bands', [len(runs['official']), len(runs['ours'])]),
                          title_fontsize=6, loc='lower center', bbox_to_anchor=(0.5, 1.02),
                          ncol=2, borderaxespad=0, frameon=False)
        fig.tight_layout()
        return save_figure(fig, out_stem)

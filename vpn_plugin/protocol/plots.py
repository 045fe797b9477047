"""Figures of the protocol (matplotlib, each saved as PNG and PDF).

* :func:`plot_curves`: a metric against a study setting (``variant`` key, e.g. the training
  fraction or the PKG perturbation level), one line per method or per ``variant`` group, with
  the 90% bootstrap CI over seeds as a band.
* :func:`plot_params_vs_metric`: parameters (log scale) against a metric, one point per method.
* :func:`plot_qualitative`: emissions and soft plan of one sample as (T, actions) heatmaps,
  next to the PKG transition probabilities among the same actions.
"""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from vpn_plugin.core.metrics import METRIC_NAMES
from vpn_plugin.core.stats import bootstrap_ci
from .results import METRIC_LABELS, ResultRow


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, out_stem) -> list[Path]:
    """Write ``<out_stem>.png`` and ``<out_stem>.pdf``; returns both paths."""
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [out_stem.with_suffix('.png'), out_stem.with_suffix('.pdf')]
    for path in paths:
        fig.savefig(path, bbox_inches='tight', dpi=200)
    _pyplot().close(fig)
    return paths


def curve_points(rows: list[ResultRow], x_key: str, metric: str, group_key: str | None = None,
                 num_resamples: int = 100) -> dict:
    """``{line name: [(x, mean, low, high), ...]}`` sorted by x, over seeds.

    A line is a method, or the value of ``variant[group_key]``; rows whose group is ``'none'``
    (the unperturbed reference) join every line at their x.
    """
    values = {}
    for row in rows:
        if x_key not in row.variant:
            raise ValueError(f'results row of {row.method!r} (seed {row.seed}) has no variant '
                             f'{x_key!r}; its variant is {row.variant}')
        if metric not in row.metrics:
            raise ValueError(f'results row of {row.method!r} has no metric {metric!r}; it has '
                             f'{sorted(row.metrics)}')
        line = row.method if group_key is None else str(row.variant.get(group_key))
        values.setdefault(line, {}).setdefault(float(row.variant[x_key]), []).append(
            row.metrics[metric])
    shared = values.pop('none', {}) if group_key is not None else {}
    curves = {}
    for line, by_x in values.items():
        merged = {**shared, **by_x}
        curves[line] = [(x, *bootstrap_ci(np.array(v), num_resamples=num_resamples))
                        for x, v in sorted(merged.items())]
    if not curves:
        raise ValueError(f'no lines to plot for x={x_key!r} group={group_key!r}')
    return curves


def plot_curves(rows, x_key, metric, out_stem, *, group_key=None, log_x=False, xlabel=None,
                title='') -> list[Path]:
    """Metric vs a study setting with CI bands; saves PNG and PDF."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for line, points in curve_points(rows, x_key, metric, group_key).items():
        x, mean, low, high = map(np.array, zip(*points))
        ax.plot(x, mean, marker='o', label=line)
        ax.fill_between(x, low, high, alpha=0.2)
    if log_x:
        ax.set_xscale('log')
    ax.set_xlabel(xlabel or x_key.replace('_', ' '))
    ax.set_ylabel(METRIC_LABELS.get(metric, metric) + (' (%)' if metric in METRIC_NAMES else ''))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return save_figure(fig, out_stem)


def params_points(rows: list[ResultRow], metric: str, horizon: int | None = None) -> dict:
    """``{method: (params, mean, low, high)}`` for methods with a parameter count."""
    points = {}
    for method in dict.fromkeys(r.method for r in rows):
        chosen = [r for r in rows if r.method == method and metric in r.metrics
                  and (horizon is None or r.horizon == horizon)]
        counts = [r.params for r in chosen if r.params]
        if not counts:
            continue
        mean, low, high = bootstrap_ci(np.array([r.metrics[metric] for r in chosen]))
        points[method] = (max(counts), mean, low, high)
    if not points:
        raise ValueError(f'no method has both a parameter count and metric {metric!r}')
    return points


def plot_params_vs_metric(rows, metric, out_stem, *, horizon=None, title='') -> list[Path]:
    """Parameters (log x) vs a metric, one point per method with its CI; PNG and PDF."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for method, (params, mean, low, high) in params_points(rows, metric, horizon).items():
        ax.errorbar([params], [mean], yerr=[[mean - low], [high - mean]], marker='o',
                    capsize=3, label=method)
    ax.set_xscale('log')
    ax.set_xlabel('parameters')
    ax.set_ylabel(METRIC_LABELS.get(metric, metric) + ' (%)')
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=10)
    return save_figure(fig, out_stem)


def plot_qualitative(emissions, soft_plan, transitions, action_names, out_stem, *,
                     gt_plan=None, pred_plan=None, title='') -> list[Path]:
    """Emissions and soft plan (T, A) heatmaps and the PKG (A, A) among the same A actions.

    Args:
        emissions: (T, A) emission probabilities of one sample.
        soft_plan: (T, A) DVL soft plan of the sample.
        transitions: (A, A) PKG transition probabilities [from, to].
        action_names: (A,) labels of the columns.
        gt_plan, pred_plan: optional (T,) column indices (0..A-1) marked on the heatmaps.
    """
    emissions, soft_plan = np.asarray(emissions), np.asarray(soft_plan)
    transitions = np.asarray(transitions)
    num_actions = len(action_names)
    if emissions.shape != soft_plan.shape or emissions.shape[1] != num_actions \
            or transitions.shape != (num_actions, num_actions):
        raise ValueError(f'emissions {emissions.shape}, soft_plan {soft_plan.shape} must be '
                         f'(T, {num_actions}) and transitions {transitions.shape} '
                         f'({num_actions}, {num_actions})')
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), layout='constrained',
                             gridspec_kw=dict(width_ratios=[1, 1, 0.8]))
    for ax, matrix, name in ((axes[0], emissions, 'emissions'),
                             (axes[1], soft_plan, 'soft plan (DVL)')):
        image = ax.imshow(matrix, aspect='auto', cmap='viridis', vmin=0)
        _mark(ax, gt_plan, 'o', 'white', 'ground truth')
        _mark(ax, pred_plan, 'x', 'red', 'prediction')
        ax.set_title(name, fontsize=10)
        ax.set_ylabel('step t')
        ax.set_yticks(range(matrix.shape[0]), [str(t + 1) for t in range(matrix.shape[0])])
        ax.set_xticks(range(num_actions), action_names, rotation=75, ha='right', fontsize=6)
        fig.colorbar(image, ax=ax, fraction=0.046)
    axes[0].legend(fontsize=7, loc='upper right')
    image = axes[2].imshow(transitions, cmap='magma', vmin=0, vmax=1)
    axes[2].set_title('PKG transitions', fontsize=10)
    axes[2].set_xticks(range(num_actions), action_names, rotation=75, ha='right', fontsize=6)
    axes[2].set_yticks(range(num_actions), action_names, fontsize=6)
    axes[2].set_xlabel('to')
    axes[2].set_ylabel('from')
    fig.colorbar(image, ax=axes[2], fraction=0.046)
    if title:
        fig.suptitle(title, fontsize=11)
    return save_figure(fig, out_stem)


def _mark(ax, plan, marker, color, label):
    if plan is None:
        return
    if marker == 'o':  # hollow circle so the prediction cross stays visible inside it
        ax.scatter(list(plan), range(len(plan)), marker=marker, s=60, facecolors='none',
                   edgecolors=color, label=label)
    else:
        ax.scatter(list(plan), range(len(plan)), marker=marker, s=40, c=color, label=label)


def qualitative_from_checkpoint(config: str, checkpoint: str, index: int = 0,
                                cfg_options: dict | None = None) -> dict:
    """Inputs of :func:`plot_qualitative` for test sample ``index`` of a trained model.

    The columns are the actions of the sample's task (plus any predicted action outside it).
    """
    import torch
    from mmengine.config import Config
    from mmengine.runner import load_checkpoint
    from mmaction.registry import DATASETS, MODELS
    cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(copy.deepcopy(cfg_options))
    dataset = DATASETS.build(cfg.test_dataloader.dataset)
    if not 0 <= index < len(dataset):
        raise IndexError(f'sample index {index} out of range: the test set has {len(dataset)}')
    model = MODELS.build(cfg.model)
    load_checkpoint(model, checkpoint, map_location='cpu')
    model.eval()
    item = dataset[index]
    inputs = {k: v[None] for k, v in item['inputs'].items()}
    samples = {k: v[None] for k, v in item['data_samples'].items()}
    with torch.no_grad():
        out = model(inputs, samples, mode='predict')[0]
    task_actions = list(dataset.taxonomy.task_actions[int(samples['task'][0])])
    columns = task_actions + [int(a) for a in out.pred_plan if int(a) not in task_actions]
    position = {a: i for i, a in enumerate(columns)}
    transitions = model.log_transitions.exp()[columns][:, columns]
    return dict(emissions=out.emissions[:, columns].numpy(),
                soft_plan=out.soft_plan[:, columns].numpy(),
                transitions=transitions.numpy(),
                action_names=[dataset.taxonomy.action_names[a] for a in columns],
                gt_plan=[position[int(a)] for a in samples['plan'][0]],
                pred_plan=[position[int(a)] for a in out.pred_plan],
                title=f'{dataset.taxonomy.task_names[int(samples["task"][0])]} (test sample '
                      f'{index})')

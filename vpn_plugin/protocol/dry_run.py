"""What ``tools/run_protocol.py --dry-run`` prints: every run, its epochs, folder and wall time.

The time estimate is ``epochs x seconds per epoch x share of the training set`` per training,
plus the pre-stages the model trains before it (:data:`STAGE_COSTS`: PDPP's task classifier,
KEPP's step model, ...), each printed apart (tests and the one-off feature extraction are not
counted). A ``--smoke`` run is estimated by its measured time (:data:`SMOKE_SECONDS`). Each
run's seconds per epoch is its own: ``epoch_seconds`` (ViterbiPlanNet on CrossTask T=3; default
the measured :data:`CPU_EPOCH_SECONDS`, ``--epoch-seconds``: measure your machine with
``tools/benchmark_epoch.py configs/vpn_crosstask_t3.py --epochs 3``) times the measured cost of
the run's dataset and model relative to it (:data:`RELATIVE_EPOCH_COST`, at T=3); a dataset or
model without a measured figure uses ViterbiPlanNet's on that dataset, else CrossTask's, and
its line says so.

The same cost model sets how often a training saves a checkpoint (``--checkpoint-interval``
default, :func:`checkpoint_epochs`): every as many epochs as take about
:data:`CHECKPOINT_SECONDS`, so a kill, preemption or requeue loses about that much training.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# ViterbiPlanNet, CrossTask T=3 (9.6k training windows, batch 256), one CPU thread with a second
# process beside it on a 2-core CPU: 500 epochs incl. validation every 10 in ~36 min
# (docs/results.md, "The paper's schedule").
CPU_EPOCH_SECONDS = 36 * 60 / 500
SUBSET_KEY = 'train_dataloader.dataset.subset_fraction'
REFERENCE = ('crosstask', 'ViterbiPlanNet')
# Seconds per training epoch relative to REFERENCE, (dataset, model type) -> ratio, at T=3,
# batch 256, synthetic features, one CPU thread: tools/benchmark_epoch.py CONFIG --epochs 3 for
# configs/vpn_<d>_t3.py, compact/compact_<d>_t3.py and baselines/pkg_beam_search_<d>_t3.py,
# run back to back on the shared 2-core CPU (2026-11-23; fastest epoch of each; two rounds for
# ViterbiPlanNet). Epochs (s), round 1 / round 2: ViterbiPlanNet CrossTask 13.5 / 10.2, NIV
# 1.19 / 0.69, COIN 45.8 / 47.7; CompactPlanNet CrossTask 10.8, NIV 0.92, COIN 28.7; PKG beam
# search CrossTask 1.98, NIV 0.16, COIN 2.03 (38 / 3 / 48 batches per epoch). Ratios of the
# same round; COIN ViterbiPlanNet 3.4 / 4.7 -> 4.0, NIV 0.088 / 0.068 -> 0.08.
# SCHEMA (issue 20): CrossTask from tools/benchmark_epoch.py back to back with ViterbiPlanNet
# (fastest epochs 200.6 / 16.35 s, load ~9); NIV and COIN = ViterbiPlanNet's ratio x SCHEMA's
# per-step cost relative to ViterbiPlanNet at their sizes (one process, alternating, B=256, T=3:
# 6.6x at N=48, 22.7x at N=778; 11.3x at N=133).
# PDPP (issue 21): an epoch is 200 steps (NIV 50) of batch 256 of a 42M-parameter U-Net whatever
# the dataset: tools/benchmark_epoch.py configs/baselines/pdpp_crosstask_t3.py back to back with
# ViterbiPlanNet (8.0-11.4 s per step, 18.8-25.7 s per ViterbiPlanNet epoch, load 8-11): ~90;
# the PKG beam search with the paper's PDPP step model trains the same U-Net (200 steps).
# The CrossTask+NIV+COIN union (ConcatPlanningDataset, 22,512 training windows at T=3, N=959):
# tools/benchmark_epoch.py configs/union/vpn_union_t3.py (29.6-31.4 s, one thread, 2026-11-23,
# idle but for one SCHEMA run on the other core) over 4.1 s -> 7.3; SCHEMA's union epoch is 88
# steps at 7.26 s (tools/train.py configs/union/schema_union_t3.py, the same day) -> 155.
# CEFITO (issue 31): one full-size training step of batch 16 (51 candidates x 2 passes of a
# 7-token, 4-block H=384 transformer per window) took 15-31 s on the 2-core CPU under load 8
# (2026-11-25): ~1-2 s per window, x 9.7k CrossTask windows / 4.3 s -> ~2500; NIV and COIN
# scaled by their window counts relative to CrossTask (ViterbiPlanNet's NIV ratio; COIN ~2.6x).
# KEPP (issue 30): its plan model trains PDPP's U-Net (a training step within 1.2x of PDPP's,
# tools/benchmark_epoch.py): PDPP's per epoch; its step model (the same U-Net, as many steps
# before the first epoch) is a pre-stage (STAGE_COSTS).
# A model with a step model is keyed '<type>/<step model type>' (model_kind).
# Models that do not train cost nothing.
RELATIVE_EPOCH_COST = {
    ('crosstask', 'ViterbiPlanNet'): 1.0,
    ('crosstask', 'CompactPlanNet'): 0.80,
    ('crosstask', 'PKGBeamSearchPlanner/EndpointMLP'): 0.15,
    ('niv', 'ViterbiPlanNet'): 0.08,
    ('niv', 'CompactPlanNet'): 0.062,
    ('niv', 'PKGBeamSearchPlanner/EndpointMLP'): 0.011,
    ('coin', 'ViterbiPlanNet'): 4.0,
    ('coin', 'CompactPlanNet'): 2.5,
    ('coin', 'PKGBeamSearchPlanner/EndpointMLP'): 0.15,
    ('crosstask', 'PDPP'): 90.0,
    ('niv', 'PDPP'): 23.0,
    ('coin', 'PDPP'): 90.0,
    ('crosstask', 'PKGBeamSearchPlanner/PDPPDiffusion'): 90.0,
    ('niv', 'PKGBeamSearchPlanner/PDPPDiffusion'): 90.0,
    ('coin', 'PKGBeamSearchPlanner/PDPPDiffusion'): 90.0,
    ('crosstask', 'KEPP'): 90.0,
    ('niv', 'KEPP'): 23.0,
    ('coin', 'KEPP'): 90.0,
    ('crosstask', 'SCHEMA'): 12.0,
    ('niv', 'SCHEMA'): 0.53,
    ('coin', 'SCHEMA'): 91.0,
    ('crosstask', 'CEFITO'): 2500.0,
    ('niv', 'CEFITO'): 200.0,
    ('coin', 'CEFITO'): 6500.0,
    ('union', 'ViterbiPlanNet'): 7.3,
    ('union', 'SCHEMA'): 155.0,
}
UNION = 'union'  # the dataset key of a ConcatPlanningDataset's runs
# Pre-stages, model type -> (stage, cost in epochs of the model's training, per epoch?): the
# stage costs factor x one training epoch, times the epochs when per epoch. Measured with one
# thread, back to back, CrossTask sizes (B=256, N=133, K=18, D=1536, T=3; 2026-11-27, a loaded
# 2-core CPU, two rounds): a task-classifier step is 0.066 / 0.096 of a U-Net training step and
# PDPP's classifier trains as many steps as the U-Net -> 0.08 per epoch; KEPP's step model trains
# its U-Net as many steps as the plan model -> 1.0 per epoch, then predicts the training windows
# once (DDIM, 1.1 / 1.5 U-Net steps per batch of 256: CrossTask's 9.6k windows ~50 steps, a
# quarter of an epoch of 200 steps); CEFITO's classifier trains 150 epochs of batch 256 (each
# step 0.08 of PDPP's U-Net step, 0.45 ViterbiPlanNet epochs / 200) against CEFITO's ~0.26
# ViterbiPlanNet epochs per window: 150 x 0.036 / 256 / 0.26 ~ 0.08 epochs of CEFITO's training.
STAGE_COSTS = {
    'PDPP': (('task classifier', 0.08, True),),
    'PKGBeamSearchPlanner/PDPPDiffusion': (('task classifier', 0.08, True),),
    'KEPP': (('step model', 1.0, True), ('step-model predictions', 0.25, False)),
    'CEFITO': (('task classifier', 0.08, False),),
}
# Time of a --smoke run (tools/run_protocol.py configs/protocol/standard_niv.py --smoke
# --methods M --seeds 0 --horizons 3: training, pre-stages and test), model type -> seconds: the
# CPU time (user + sys) of the process with OMP_NUM_THREADS=1, i.e. its wall time on an idle core,
# measured on the shared 2-core CPU under load 14 (2026-11-27; wall 32 / 96 / 126 / 126 / 174 s
# there, docs/usage.md); ViterbiPlanNet: 8 s wall in the same command with OMP_NUM_THREADS=1 at
# load 5 (2026-11-27, the six methods' run: SCHEMA 3, PKG beam search 17, PDPP 16, KEPP 39,
# CEFITO 68 s wall there); other models: SMOKE_DEFAULT_SECONDS.
SMOKE_SECONDS = {'ViterbiPlanNet': 8.0, 'SCHEMA': 8.0, 'PKGBeamSearchPlanner/PDPPDiffusion': 18.0,
                 'PDPP': 19.0, 'KEPP': 26.0, 'CEFITO': 44.0}
SMOKE_DEFAULT_SECONDS = 20.0
# training a kill or requeue may lose at most, by the cost model (default checkpoint interval)
CHECKPOINT_SECONDS = 10 * 60


def checkpoint_epochs(epoch_seconds: float, budget: float = CHECKPOINT_SECONDS) -> int:
    """Epochs between two checkpoints so that about ``budget`` seconds of training separate
    them (at least 1): the default of ``--checkpoint-interval``."""
    return max(1, int(budget // epoch_seconds)) if epoch_seconds > 0 else 1


@dataclass
class PlannedRun:
    """One line of the dry run."""
    slug: str
    config: str
    seed: int
    train_horizon: int
    test_horizons: list
    epochs: int            # 0: evaluated without training
    train_share: float     # fraction of the training windows used (sample efficiency)
    work_dir: Path
    seconds: float         # estimated wall time of the training and its pre-stages
    epoch_seconds: float = 0.0  # the estimate's seconds per epoch for this run
    cost_note: str = ''    # says when no measured figure of its dataset and model existed
    rows: list = field(default_factory=list)  # (method, test horizon, test variant) per row
    checkpoint_interval: int = 0  # epochs between checkpoints (0: no training)
    stages: list = field(default_factory=list)  # (pre-stage, seconds) before the training
    smoke: bool = False    # a --smoke run (seconds: its measured time)


def plan_runs(units, work_dir_of, max_epochs=None, epoch_seconds=CPU_EPOCH_SECONDS,
              checkpoint_interval=None, smoke: bool = False):
    """:class:`PlannedRun` of each unit; ``work_dir_of(unit)`` gives its folder.

    ``max_epochs`` overrides the configs' ``train_cfg.max_epochs`` (as the runner does);
    ``epoch_seconds``: ViterbiPlanNet's on CrossTask T=3, scaled per run (module docstring);
    ``checkpoint_interval``: epochs between checkpoints (default :func:`checkpoint_epochs`
    of the run's seconds per epoch); ``smoke``: smoke runs (one epoch, :data:`SMOKE_SECONDS`).
    """
    schedules = {}
    planned = []
    for unit in units:
        key = (unit.config, json.dumps(unit.cfg_options, sort_keys=True, default=str))
        if key not in schedules:
            schedules[key] = config_schedule(unit.config, unit.cfg_options)
        config_max_epochs, dataset, model = schedules[key]
        epochs = (1 if smoke else max_epochs or config_max_epochs) if unit.train else 0
        ratio, note = relative_cost(dataset, model)
        share = float(unit.cfg_options.get(SUBSET_KEY) or 1.0)
        seconds_per_epoch = ratio * epoch_seconds
        stages = [] if smoke else pre_stages(model, epochs, share * seconds_per_epoch)
        seconds = (SMOKE_SECONDS.get(model, SMOKE_DEFAULT_SECONDS) if smoke and epochs else
                   epochs * share * seconds_per_epoch + sum(s for _, s in stages))
        interval = (checkpoint_interval or checkpoint_epochs(share * seconds_per_epoch)
                    if epochs else 0)
        planned.append(PlannedRun(unit.slug, unit.config, unit.seed, unit.horizon,
                                  sorted({t.horizon for t in unit.tests}), epochs, share,
                                  Path(work_dir_of(unit)), seconds,
                                  seconds_per_epoch, note if epochs and not smoke else '',
                                  [(t.method, t.horizon, t.variant) for t in unit.tests],
                                  interval, stages, smoke))
    return planned


def pre_stages(model: str, epochs: int, epoch_seconds: float) -> list:
    """(stage, seconds) of the model's pre-stages (:data:`STAGE_COSTS`) before ``epochs``
    epochs of ``epoch_seconds``; [] without training."""
    if not epochs:
        return []
    return [(name, factor * (epochs if per_epoch else 1) * epoch_seconds)
            for name, factor, per_epoch in STAGE_COSTS.get(model, ())]


def relative_cost(dataset: str, model: str) -> tuple:
    """(epoch cost relative to ViterbiPlanNet on CrossTask, note) of a dataset and model type;
    the note names the figure used when none was measured for them."""
    if (dataset, model) in RELATIVE_EPOCH_COST:
        return RELATIVE_EPOCH_COST[(dataset, model)], ''
    for stand_in in ((dataset, REFERENCE[1]), REFERENCE):
        if stand_in in RELATIVE_EPOCH_COST:
            return RELATIVE_EPOCH_COST[stand_in], (f'no measured epoch time of {model} on '
                                                   f'{dataset}: {stand_in[1]} on {stand_in[0]}\'s')
    raise AssertionError('RELATIVE_EPOCH_COST lacks its reference')


def config_schedule(config: str, cfg_options: dict) -> tuple:
    """(``train_cfg.max_epochs``, dataset name, model type) of a config with its overrides;
    the dataset is the last folder of the training set's ``data_root`` (:data:`UNION` for a
    ``ConcatPlanningDataset``)."""
    from .configs import config_with_options
    cfg = config_with_options(config, cfg_options)
    if 'max_epochs' not in cfg.get('train_cfg', {}):
        raise ValueError(f'{config}: train_cfg has no max_epochs; expected an epoch-based '
                         'training schedule')
    train_set = cfg.get('train_dataloader', {}).get('dataset', {})
    data_root = str(train_set.get('data_root', ''))  # '{data_root}/niv' or '{data_root}'
    data_root = data_root.replace('{data_root}', str(cfg.get('data_root', '')))
    dataset = (UNION if train_set.get('type') == 'ConcatPlanningDataset'
               else Path(data_root).name)
    return int(cfg.train_cfg.max_epochs), dataset, model_kind(cfg.model)


def model_kind(model: dict) -> str:
    """The model's type, with its step model's (``PKGBeamSearchPlanner/PDPPDiffusion``; the
    beam search's default step model is ``EndpointMLP``)."""
    kind = str(model.get('type'))
    if kind == 'PKGBeamSearchPlanner':
        kind += '/' + str((model.get('step_model') or {}).get('type', 'EndpointMLP'))
    return kind


def format_duration(seconds: float) -> str:
    """``'42 s'``, ``'12.5 min'`` or ``'3.2 h'``."""
    if seconds < 60:
        return f'{seconds:.0f} s'
    if seconds < 3600:
        return f'{seconds / 60:.1f} min'
    return f'{seconds / 3600:.1f} h'


def format_plan(planned: list, epoch_seconds: float) -> list[str]:
    """One line per training: every results row it gives, by the method name ``--methods``
    takes and its test horizon, its config, time and folder; then the total (one process;
    parallel processes divide it)."""
    lines = []
    for run in planned:
        rows = ', '.join(f'{method!r} T={horizon}' + (
            ' (' + ', '.join(f'{k}={v}' for k, v in variant.items()) + ')' if variant else '')
            for method, horizon, variant in run.rows)
        share = f' x {run.train_share:g} of the data' if run.train_share != 1 else ''
        note = f' ({run.cost_note})' if run.cost_note else ''
        stages = ''.join(f'{name} ~{format_duration(seconds)} + '
                         for name, seconds in run.stages)
        epochs_time = format_duration(run.seconds - sum(s for _, s in run.stages))
        training = (f'{run.epochs} epochs{share} at {run.epoch_seconds:.2f} s, '
                    f'{stages}training ~{epochs_time} = ~{format_duration(run.seconds)}{note}'
                    if run.stages else f'{run.epochs} epochs{share} at {run.epoch_seconds:.2f} '
                    f's, ~{format_duration(run.seconds)}{note}')
        training += f', checkpoint every {min(run.checkpoint_interval, run.epochs)} epochs'
        if run.smoke and run.epochs:
            training = f'smoke run, ~{format_duration(run.seconds)} (measured)'
        if not run.epochs:
            training = 'no training'
        lines.append(f'seed={run.seed} T={run.train_horizon} rows: '
                     f'{rows or "none (a pre-training stage)"} | {run.config} | {training} | '
                     f'{run.work_dir}')
    total = sum(run.seconds for run in planned)
    if any(run.smoke for run in planned):
        lines.append(f'estimated time: ~{format_duration(total)} in one process (smoke runs: '
                     'their measured CPU time, training and test, one thread)')
        return lines
    lines.append(f'estimated training time: ~{format_duration(total)} in one process, from '
                 f'{epoch_seconds:.2f} s/epoch for ViterbiPlanNet on CrossTask T=3 '
                 '(--epoch-seconds; measure with tools/benchmark_epoch.py) scaled by each '
                 "dataset's and model's measured cost; tests not counted")
    return lines

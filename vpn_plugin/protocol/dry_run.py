"""What ``tools/run_protocol.py --dry-run`` prints: every run, its epochs, folder and wall time.

The time estimate is ``epochs x seconds per epoch x share of the training set`` per training
(tests and the one-off feature extraction are not counted). The default seconds per epoch is
a measured figure, :data:`CPU_EPOCH_SECONDS`; measure your machine with
``tools/benchmark_epoch.py CONFIG --epochs 3`` and pass it as ``--epoch-seconds``.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

# ViterbiPlanNet, CrossTask T=3 (9.6k training windows, batch 256), one CPU thread with a second
# process beside it on a 2-core CPU: 500 epochs incl. validation every 10 in ~36 min
# (docs/results.md, "The paper's schedule").
CPU_EPOCH_SECONDS = 36 * 60 / 500
SUBSET_KEY = 'train_dataloader.dataset.subset_fraction'


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
    seconds: float         # estimated wall time of the training


def plan_runs(units, work_dir_of, max_epochs=None, epoch_seconds=CPU_EPOCH_SECONDS):
    """:class:`PlannedRun` of each unit; ``work_dir_of(unit)`` gives its folder.

    ``max_epochs`` overrides the configs' ``train_cfg.max_epochs`` (as the runner does).
    """
    epochs_of = {}
    planned = []
    for unit in units:
        key = (unit.config, json.dumps(unit.cfg_options, sort_keys=True, default=str))
        if key not in epochs_of:
            epochs_of[key] = config_epochs(unit.config, unit.cfg_options)
        epochs = (max_epochs or epochs_of[key]) if unit.train else 0
        share = float(unit.cfg_options.get(SUBSET_KEY) or 1.0)
        planned.append(PlannedRun(unit.slug, unit.config, unit.seed, unit.horizon,
                                  sorted({t.horizon for t in unit.tests}), epochs, share,
                                  Path(work_dir_of(unit)), epochs * share * epoch_seconds))
    return planned


def config_epochs(config: str, cfg_options: dict) -> int:
    """``train_cfg.max_epochs`` of a config with its overrides."""
    from mmengine.config import Config
    cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(copy.deepcopy(cfg_options))
    if 'max_epochs' not in cfg.get('train_cfg', {}):
        raise ValueError(f'{config}: train_cfg has no max_epochs; expected an epoch-based '
                         'training schedule')
    return int(cfg.train_cfg.max_epochs)


def format_duration(seconds: float) -> str:
    """``'42 s'``, ``'12.5 min'`` or ``'3.2 h'``."""
    if seconds < 60:
        return f'{seconds:.0f} s'
    if seconds < 3600:
        return f'{seconds / 60:.1f} min'
    return f'{seconds / 3600:.1f} h'


def format_plan(planned: list, epoch_seconds: float) -> list[str]:
    """One line per run, then the total (one process; parallel processes divide it)."""
    lines = []
    for run in planned:
        tests = ','.join(str(h) for h in run.test_horizons) or '- (a pre-training stage)'
        share = f' x {run.train_share:g} of the data' if run.train_share != 1 else ''
        training = (f'{run.epochs} epochs{share}, ~{format_duration(run.seconds)}'
                    if run.epochs else 'no training')
        lines.append(f'{run.slug} seed={run.seed} T={run.train_horizon} test T={tests} | '
                     f'{run.config} | {training} | {run.work_dir}')
    total = sum(run.seconds for run in planned)
    lines.append(f'estimated training time: ~{format_duration(total)} in one process at '
                 f'{epoch_seconds:.2f} s/epoch (--epoch-seconds; measure with '
                 'tools/benchmark_epoch.py), tests not counted')
    return lines

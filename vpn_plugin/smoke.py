"""Smoke runs: any config end to end in about a minute on a CPU, marked shortened everywhere.

``tools/train.py CONFIG --smoke``, ``tools/test.py CONFIG CKPT --smoke`` and
``tools/run_protocol.py PROTOCOL --smoke`` apply :func:`smoke_config` to the loaded config,
whatever the method: the model is the config's, only the schedule and the data shrink (the
numbers: :data:`SMOKE`):

* one epoch of ``steps`` training steps of at most ``batch_size`` windows, on ``steps x
  batch_size`` training windows (``PlanningDataset(limit=)``: stratified over tasks); PDPP-style
  ``StepsPerEpochBatchSampler`` epochs take ``steps_per_epoch=steps``;
* pre-stages of ``pre_stage_steps`` steps (``TaskClassifierHook``, ``KEPPStepModelHook``);
* an EMA (``PDPPEMAHook``, ``CEFITOEMAHook``) that copies the model after every step, so that
  what is validated, saved and tested is the model the smoke run trained (on the official
  schedules it would be the model after step 1, or CEFITO's untrained initial weights);
* validation on ``val_windows`` held-out windows, the test on ``test_windows`` test windows
  (the windows ``llm_eval.py --limit`` would plan);
* a checkpoint every epoch without the optimiser state (a smoke run is not resumed), a log
  line every step.

The config's top-level ``shortened`` says so (``'smoke: ...'``): ``PlanningRunner`` logs it,
writes it into every checkpoint's meta and refuses to resume a run of another ``shortened``;
``tools/test.py`` marks the metrics of such a checkpoint (and of ``--limit``) shortened in its
log and ``test_metrics.json``; the protocol writes it into the rows' ``shortened`` field, which
``tools/report.py`` and ``tools/plots.py`` mark with a dagger. A smoke run measures nothing:
it checks that a method runs end to end, not what it scores.
"""
from __future__ import annotations

import os

SMOKE = dict(steps=4, batch_size=8, val_windows=16, test_windows=32, pre_stage_steps=4)
PRE_STAGE_HOOKS = ('TaskClassifierHook', 'KEPPStepModelHook')
EMA_COPY_EVERY = {'PDPPEMAHook': 'interval', 'CEFITOEMAHook': 'update_every'}  # option names
LIMITED_DATASETS = ('PlanningDataset', 'ConcatPlanningDataset')


def limit_windows(dataset: dict, count: int, where: str) -> None:
    """Keep ``count`` windows of a dataset config (``limit``; a union's every source)."""
    kind = dataset.get('type')
    if kind == 'PlanningDataset':
        dataset['limit'] = min(count, dataset.get('limit') or count)
    elif kind == 'ConcatPlanningDataset':
        options = dict(dataset.get('dataset_options') or {})
        dataset['dataset_options'] = dict(options, limit=min(count, options.get('limit') or count))
    else:
        raise ValueError(f'{where}: a {kind} cannot be limited to {count} windows (limit is an '
                         f'option of {" and ".join(LIMITED_DATASETS)})')


def training_limit_reason(limit) -> str:
    """The ``shortened`` reason of a training split cut to ``limit`` windows (tools/train.py
    writes it; ``PlanningRunner`` drops it when the split has no more windows than that)."""
    return f'training split limit={limit} windows'


def batches_reason(batches) -> str:
    """The ``shortened`` reason of ``train_dataloader.num_batch_per_epoch`` (tools/train.py
    writes it; ``PlanningRunner`` drops it when those batches cover the whole split)."""
    return f'train_dataloader.num_batch_per_epoch={batches}'


def drop_reason(shortened, reason: str) -> str:
    """``shortened`` without ``reason`` (its other reasons kept; '' when none is left): an
    option that cut nothing does not shorten the run."""
    return '; '.join(part for part in str(shortened or '').split('; ')
                     if part and part != reason)


def limit_test_windows(cfg, count: int) -> None:
    """``tools/test.py --limit N``: the test split keeps N windows stratified over tasks."""
    if count < 1:
        raise ValueError(f'--limit {count}: expected at least 1 window')
    loader = cfg.get('test_dataloader') or {}
    if not loader.get('dataset'):
        raise ValueError(f'{cfg.filename or "config"}: no test_dataloader.dataset to limit')
    limit_windows(loader['dataset'], count, f'{cfg.filename}: test_dataloader.dataset')


def check_shortened_hooks(cfg, where: str) -> None:
    """Build each hook entry a smoke run rewrites (pre-stage steps, EMA copies) as the config
    gives it, so that an option a full run refuses (``max_iters=0``, ``max_iters`` beside
    ``max_epochs``) is refused here too instead of being overwritten by the smoke's values;
    ``ValueError`` naming ``where`` and the entry."""
    import copy
    from mmaction.registry import HOOKS
    for index, hook in enumerate(cfg.get('custom_hooks') or []):
        if not isinstance(hook, dict) or hook.get('type') not in (*PRE_STAGE_HOOKS,
                                                                  *EMA_COPY_EVERY):
            continue
        try:
            HOOKS.build(copy.deepcopy(dict(hook)))
        except (TypeError, ValueError) as error:
            raise ValueError(f'{where}: custom_hooks.{index} ({hook["type"]}): {error} (as a '
                             'full run refuses it; --smoke checks the config before shortening '
                             'it)') from None


def smoke_config(cfg, test_windows: int = SMOKE['test_windows']):
    """Shorten ``cfg`` in place into a smoke run (module docstring); returns it."""
    from vpn_plugin.errors import check_number
    where = cfg.filename or 'config'
    config_epochs = (cfg.get('train_cfg') or {}).get('max_epochs')
    if config_epochs is not None:  # recorded in every output as "(config: N epochs)"
        check_number(f'{where}: train_cfg.max_epochs', config_epochs, integer=True, low=1)
    if cfg.get('train_cfg'):
        batch_size = cfg.train_dataloader.get('batch_size')
        check_number(f'{where}: train_dataloader.batch_size', batch_size, integer=True, low=1,
                     optional=True)  # "(0 or 8)" below would read 0 as unset, int(1.5) as 1
        cfg.train_cfg.max_epochs = 1
        cfg.train_cfg.val_interval = 1
        loader = cfg.train_dataloader
        loader.batch_size = min(int(loader.get('batch_size') or SMOKE['batch_size']),
                                SMOKE['batch_size'])
        sampler = loader.get('batch_sampler') or {}
        if 'steps_per_epoch' in sampler:
            sampler['steps_per_epoch'] = SMOKE['steps']
        limit_windows(loader.dataset, SMOKE['steps'] * loader.batch_size,
                      f'{where}: train_dataloader.dataset')
        check_shortened_hooks(cfg, where)
        for hook in cfg.get('custom_hooks') or []:
            if hook.get('type') in PRE_STAGE_HOOKS:
                hook.update(max_iters=SMOKE['pre_stage_steps'])
                if hook.get('type') == 'TaskClassifierHook':
                    hook.update(max_epochs=None, val_interval=SMOKE['pre_stage_steps'] // 2)
            if hook.get('type') in EMA_COPY_EVERY:
                hook[EMA_COPY_EVERY[hook['type']]] = 1
        hooks = cfg.setdefault('default_hooks', {})
        for name, options in (('checkpoint', dict(interval=1, max_keep_ckpts=1,
                                                  save_optimizer=False)),
                              ('logger', dict(interval=1))):
            hooks[name] = dict(hooks.get(name) or {}, **options)
    if (cfg.get('val_dataloader') or {}).get('dataset'):
        limit_windows(cfg.val_dataloader.dataset, SMOKE['val_windows'],
                      f'{where}: val_dataloader.dataset')
    if (cfg.get('test_dataloader') or {}).get('dataset'):
        limit_windows(cfg.test_dataloader.dataset, test_windows,
                      f'{where}: test_dataloader.dataset')
    cfg.shortened = smoke_text(cfg, test_windows, config_epochs)
    return cfg


def smoke_text(cfg, test_windows: int, config_epochs=None) -> str:
    """What a smoke run of ``cfg`` is: ``'smoke: 1 epoch of 4 steps of 8 windows (config: 130
    epochs), pre-stages 8 steps'`` (its test: ``'smoke: 50 test windows'``)."""
    if cfg.get('train_cfg'):
        staged = any(hook.get('type') in PRE_STAGE_HOOKS for hook in cfg.get('custom_hooks') or [])
        # torchrun's processes share the smoke windows: each runs fewer steps, of one batch
        # per process (a steps_per_epoch sampler keeps its steps)
        world = int(os.environ.get('WORLD_SIZE') or 1)
        sampler = cfg.train_dataloader.get('batch_sampler') or {}
        steps = SMOKE['steps'] if 'steps_per_epoch' in sampler else -(-SMOKE['steps'] // world)
        batch = cfg.train_dataloader.batch_size
        return (f'smoke: 1 epoch of {steps} steps of '
                + (f'{world} x {batch} windows ({world} processes)' if world > 1
                   else f'{batch} windows')
                + f' (config: {config_epochs} epochs)'
                + (f', pre-stages {SMOKE["pre_stage_steps"]} steps' if staged else ''))
    return f'smoke: {test_windows} test windows'


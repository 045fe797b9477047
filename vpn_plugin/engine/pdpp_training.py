"""PDPP's training recipe in the mmengine Runner (configs/_base_/schedules/pdpp.py).

* ``StepsPerEpochBatchSampler`` (DATA_SAMPLERS): an epoch is a fixed number of batches drawn
  from a cycled, reshuffled, drop-last pass over the data (the official
  ``n_train_steps`` per epoch over ``cycle(DataLoader(shuffle=True, drop_last=True))``), so a
  config's ``max_epochs`` x ``steps_per_epoch`` is the official epochs x steps.
* ``PDPPWarmupStepLR`` (PARAM_SCHEDULERS): the official ``get_lr_schedule_with_warmup``
  (``core.diffusion.pdpp_lr_multiplier``) over the train loop's iterations.
* ``PDPPEMAHook`` (HOOKS): mmengine's ``EMAHook`` with the official ``Trainer``'s schedule: the
  EMA copy is reset to the model every 10 steps before step 400, then
  ``ema = 0.995 ema + 0.005 model`` every 10 steps; evaluation and checkpoints use the EMA.
* ``TaskClassifierHook`` (HOOKS): stage 1, the task classifier of every ``PDPPDiffusion``,
  trained alone before the U-Net (official ``train_mlp.py``, from the initial weights its
  seed draws there: :func:`official_head_draw`) with its progress logged, saved
  as ``<work_dir>/task_classifier.pth`` (a pre-stage file, ``engine.pre_stage``: with what and
  how it was trained) and reused from there (a file of another training set or setting is
  refused naming both) or from a loaded checkpoint, never retrained silently. Trained or
  loaded, it runs on its own random streams seeded with the run's seed
  (``random_states.own_seeded_stream``), as ``train_mlp.py`` runs in its own seeded process:
  the U-Net's training then draws the same numbers whether the classifier was trained or
  reused.
"""
from __future__ import annotations

import copy
import itertools
import time
from pathlib import Path

from typing import Annotated, Literal, Optional
from vpn_plugin.config_types import (Count, NonNegativeInt, Positive, NonNegative, Range,
                                     checked_arguments)
import torch
from mmengine.dist import broadcast, is_main_process
from mmengine.hooks import EMAHook, Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, _ParamScheduler
from torch.utils.data import DataLoader

from mmaction.registry import DATA_SAMPLERS, HOOKS, PARAM_SCHEDULERS
from vpn_plugin.core.diffusion import pdpp_lr_multiplier
from vpn_plugin.datasets.planning_dataset import planning_collate
from vpn_plugin.errors import check_bool, check_number
from vpn_plugin.models.base_planner import check_finite_loss
from vpn_plugin.models.pdpp import PDPPDiffusion, TaskClassifier, TaskHead, observation_pair

from .checkpoint import check_finite
from .ema import ScheduledEMAHook, sync_pre_stages
from .pre_stage import (CLASSIFIER_FILE, DATA_KEYS, check_identity, data_identity,
                        read_pre_stage, save_pre_stage, stage_progress)
from .random_states import load_first_draw, own_seeded_stream



@DATA_SAMPLERS.register_module()
class StepsPerEpochBatchSampler:
    """Batches of ``batch_size`` indices, ``steps_per_epoch`` per epoch (module docstring).

    Global step s of the training reads batch ``s % P`` of pass ``s // P`` (P batches per pass);
    pass p is the ``sampler``'s order after ``sampler.set_epoch(p)`` (``DefaultSampler``:
    shuffled from seed + p, sharded over ranks). Epoch e (set by ``DistSamplerSeedHook``)
    covers steps e * steps_per_epoch onwards, so a resumed run draws the same batches.
    """

    @checked_arguments(prefix='StepsPerEpochBatchSampler: ')
    def __init__(self, sampler, batch_size: Count, steps_per_epoch: Count, drop_last: bool = True):
        if not (hasattr(sampler, 'set_epoch') and hasattr(sampler, 'epoch')):
            raise TypeError(f'StepsPerEpochBatchSampler needs a sampler with set_epoch/epoch '
                            f'(DefaultSampler); got {type(sampler).__name__}')
        self.sampler, self.batch_size = sampler, batch_size
        self.steps_per_epoch, self.drop_last = steps_per_epoch, drop_last

    def __len__(self) -> int:
        return self.steps_per_epoch

    def batches_per_pass(self) -> int:
        count = len(self.sampler)
        per_pass = count // self.batch_size if self.drop_last else -(-count // self.batch_size)
        if per_pass < 1:
            raise ValueError(f'the training split has {count} windows (per process), fewer '
                             f'than one batch of {self.batch_size} with drop_last=True; lower '
                             'the batch size')
        return per_pass

    def __iter__(self):
        epoch, per_pass = self.sampler.epoch, self.batches_per_pass()
        current, order = None, []
        first = epoch * self.steps_per_epoch
        for step in range(first, first + self.steps_per_epoch):
            pass_index, position = divmod(step, per_pass)
            if pass_index != current:
                self.sampler.set_epoch(pass_index)
                current, order = pass_index, list(self.sampler)
            yield order[position * self.batch_size:(position + 1) * self.batch_size]
        self.sampler.set_epoch(epoch)


@PARAM_SCHEDULERS.register_module()
class PDPPWarmupStepLR(LRSchedulerMixin, _ParamScheduler):
    """lr = base lr x ``pdpp_lr_multiplier(step, total_steps)``: linear warm-up over the first
    1/6 of the steps, then halved every 1/4. ``total_steps`` defaults to ``end - begin`` (in a
    config: ``by_epoch=True, convert_to_iter_based=True`` and no ``end``, so it is the train
    loop's iterations, shortened runs included)."""

    @checked_arguments(prefix='PDPPWarmupStepLR: ')
    def __init__(self, optimizer, begin: NonNegativeInt = 0, end: int = INF,
                 total_steps: Optional[Count] = None, last_step: int = -1, by_epoch: bool = True,
                 verbose: bool = False):
        self.total_steps = total_steps if total_steps is not None else end - begin
        if (total_steps is None and end == INF) or self.total_steps < 1:
            raise ValueError(f'PDPPWarmupStepLR: total_steps={self.total_steps}; give end (a '
                             'config leaves it to the train loop) or total_steps >= 1')
        super().__init__(optimizer, begin=begin, end=end, last_step=last_step,
                         by_epoch=by_epoch, verbose=verbose)

    @classmethod
    def build_iter_from_epoch(cls, *args, begin=0, end=INF, by_epoch=True, epoch_length=None,
                              **kwargs):
        """The iteration-based scheduler of an epoch-based config (``epoch_length`` iterations
        per epoch)."""
        check_number('PDPPWarmupStepLR: begin', begin, low=0)  # before int() reads 'abc' x 4
        check_bool('PDPPWarmupStepLR: by_epoch', by_epoch)  # mmengine reads 'abc' as True
        check_number('PDPPWarmupStepLR: end', end, low=begin, low_open=True)
        end = end if end == INF else int(end * epoch_length)
        return cls(*args, begin=int(begin * epoch_length), end=end, by_epoch=False, **kwargs)

    def _get_value(self):
        factor = pdpp_lr_multiplier(self.last_step, self.total_steps)
        return [base * factor for base in self.base_values]


@HOOKS.register_module()
class PDPPEMAHook(ScheduledEMAHook, EMAHook):
    """mmengine's ``EMAHook`` with the official PDPP ``Trainer`` schedule (module docstring).

    At step s (0-based) with s % interval == 0: s < start_step copies the model into the EMA;
    from start_step on, ema = decay * ema + (1 - decay) * model (parameters; buffers copied).
    mmengine's averaged model copies at its first update and averages every ``interval``-th
    one after, so it starts at step start_step - interval. Runs shorter than start_step are
    allowed: their EMA is the model of the last multiple of ``interval``, as there.
    """

    @checked_arguments(prefix='PDPPEMAHook: ')
    def __init__(self, decay: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = 0.995,
                 start_step: NonNegativeInt = 400, interval: Count = 10):
        if start_step < interval or start_step % interval:
            raise ValueError(f'PDPPEMAHook: start_step={start_step} must be a positive '
                             f'multiple of interval={interval}')
        super().__init__(momentum=1 - decay, interval=interval, update_buffers=False,
                         begin_iter=start_step - interval + 1)
        self.interval = interval

    def schedule(self) -> dict:
        # copies after steps 1, 1 + interval, ... (1-based); averages from start_step + 1
        return dict(first_copy=1, every=self.interval,
                    averages_from=self.begin_iter + self.interval)

    def resumed_ema_count_note(self) -> str:
        return (f'from step {self.begin_iter} on its updates go through mmengine\'s averaged '
                'model, whose update count starts again at 0: the first of them after the '
                'resume copies the model instead of averaging, and it averages every '
                f'{self.interval}th update counted from there')

    def before_train(self, runner) -> None:
        sync_pre_stages(self)  # the pre-stages' weights and flags (engine/ema.py)
        self.log_short_run(runner)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if self._ema_started(runner) or runner.iter % self.interval == 0:
            super().after_train_iter(runner, batch_idx, data_batch, outputs)


# ---------------------------------------------------------------------- stage 1
CLASSIFIER_SCHEDULES = ('warmup_step', 'constant')  # TaskClassifierHook.schedule


@HOOKS.register_module()
class TaskClassifierHook(Hook):
    """Train the task classifier of every ``PDPPDiffusion`` / ``TaskClassifier`` (CEFITO's)
    of the model before training.

    A classifier is taken, in this order, from the loaded checkpoint (``classifier_ready``),
    from ``<work_dir>/task_classifier.pth`` (an earlier start of this run), or trained: AdamW
    (``lr``, ``weight_decay``), the official warm-up/step schedule, ``max_iters`` steps
    (default: as many as the diffusion's, as the official scripts share --epochs and
    --n_train_steps) of the train loader's batch size over the training split, keeping the
    weights of the best validation accuracy (evaluated every ``val_interval`` steps, default
    2 epochs of the train loop as ``train_mlp.py``; the last weights without a validation split).
    Each case is logged. Rank 0 trains and saves; the other ranks receive its weights.
    CEFITO's recipe: ``schedule='constant'``, ``max_epochs`` passes of ``batch_size``
    (drop-last), validated every epoch.
    """

    priority = 'HIGH'
    SCHEDULES = CLASSIFIER_SCHEDULES

    @checked_arguments(prefix='TaskClassifierHook: ')
    def __init__(self, lr: Positive = 1e-4, weight_decay: NonNegative = 0.0,
                 max_iters: Optional[Count] = None, val_interval: Optional[Count] = None,
                 schedule: Literal[CLASSIFIER_SCHEDULES] = 'warmup_step',
                 max_epochs: Optional[Count] = None, batch_size: Optional[Count] = None):
        if max_epochs is not None and max_iters is not None:
            raise ValueError('TaskClassifierHook: give max_iters or max_epochs, not both')
        self.lr, self.weight_decay = lr, weight_decay
        self.max_iters, self.val_interval = max_iters, val_interval
        self.schedule, self.max_epochs, self.batch_size = schedule, max_epochs, batch_size

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        modules = {name: m for name, m in model.named_modules()
                   if isinstance(m, (PDPPDiffusion, TaskClassifier))}
        pending = {name: m for name, m in modules.items() if not bool(m.classifier_ready)}
        for name in sorted(set(modules) - set(pending)):
            print_log(f'TaskClassifierHook: {name}.task_head from the loaded checkpoint (not '
                      'retrained)', logger='current')
        if not pending:
            return
        with own_seeded_stream(runner.seed):  # as train_mlp.py, its own seeded process
            self.train_or_load(runner, pending)

    def train_or_load(self, runner, pending: dict) -> None:
        """The classifiers of ``pending`` from ``<work_dir>/task_classifier.pth``, else trained
        (and saved), then the same on every rank."""
        path = Path(runner.work_dir) / CLASSIFIER_FILE
        plan = self.plan(runner)
        identity = classifier_identity(runner.train_dataloader.dataset, pending)
        if path.is_file():
            load_classifiers(path, pending, {**identity, **plan})
        else:
            self.train_all(runner, pending, path, plan, identity)
        for module in pending.values():
            for parameter in module.task_head.parameters():
                broadcast(parameter.data, 0)
            module.classifier_ready.fill_(True)

    def plan(self, runner) -> dict:
        """How the classifiers are trained: steps, validation interval, batch size, lr, weight
        decay, schedule and seed (recorded in the file, checked on reuse)."""
        loader = runner.train_dataloader
        batch_size = self.batch_size or loader.batch_size or loader.batch_sampler.batch_size
        if self.max_epochs is not None:  # epochs of its own drop-last passes (CEFITO's script)
            per_epoch = max(1, len(loader.dataset) // batch_size)
            steps, val_every = self.max_epochs * per_epoch, self.val_interval or per_epoch
        else:
            steps = self.max_iters or runner.max_iters
            val_every = self.val_interval or 2 * len(loader)
        return dict(steps=steps, val_every=val_every, batch_size=batch_size, lr=self.lr,
                    weight_decay=self.weight_decay, schedule=self.schedule, seed=runner.seed)

    def train_all(self, runner, modules: dict, path: Path, plan: dict, identity: dict) -> None:
        val_loop = getattr(runner, '_val_loop', None)
        val_set = getattr(getattr(val_loop, 'dataloader', None), 'dataset', None)
        records = {}
        if is_main_process():
            for name, module in modules.items():
                if isinstance(module, PDPPDiffusion):
                    official_head_draw(module, runner.seed)
                records[name] = train_classifier(
                    module, runner.train_dataloader.dataset, val_set, plan['batch_size'],
                    plan['steps'], plan['val_every'], self.lr, self.weight_decay,
                    seed=runner.seed, schedule=self.schedule, what=f'{name}.task_head',
                    epoch_steps=(plan['steps'] // self.max_epochs if self.max_epochs
                                 else len(runner.train_dataloader)))
            save_pre_stage(path, dict(
                identity=identity, settings=plan,
                state_dicts={f'{n}.task_head': m.task_head.state_dict()
                             for n, m in modules.items()},
                records={f'{n}.task_head': r for n, r in records.items()}))
            for name in modules:  # said once saved: a failed save logged "saved" before
                print_log(f'TaskClassifierHook: trained {name}.task_head for {plan["steps"]} '
                          f'steps: {describe(records[name])}; saved {path}', logger='current')


def official_head_draw(module: PDPPDiffusion, seed: int) -> None:
    """Give PDPP's task head the initial weights ``train_mlp.py`` draws for ``seed``: torch
    seeded, then the head built before anything else (our model builds its U-Net first, which
    would leave the same seed other head weights). The global torch stream is left as it
    was."""
    load_first_draw(module.task_head, lambda: TaskHead(module.feature_dim, module.num_tasks),
                    seed)


def classifier_identity(dataset, modules: dict) -> dict:
    """What task classifiers are tied to (``pre_stage.data_identity``): the training set, its
    horizon, the task count and feature dim of each."""
    module = next(iter(modules.values()))
    return data_identity(dataset, horizon=getattr(dataset, 'horizon', None),
                         num_tasks=module.num_tasks, feature_dim=module.feature_dim)


def load_classifiers(path: Path, modules: dict, expected: dict) -> None:
    """Load each module's task head from ``path`` (saved by ``TaskClassifierHook`` for the
    training set and settings ``expected``)."""
    saved = read_pre_stage(path, 'a task classifier saved by TaskClassifierHook',
                           ('state_dicts',))  # a file without identity: "not recorded" below
    recorded = {**(saved.get('identity') or {}), **(saved.get('settings') or {})}
    check_identity(path, 'a task classifier', recorded, expected,
                   DATA_KEYS + tuple(sorted(set(expected) - set(DATA_KEYS) - {'dataset'})))
    heads = {f'{name}.task_head': module.task_head for name, module in modules.items()}
    missing = sorted(set(heads) - set(saved.get('state_dicts', {})))
    if missing:
        raise ValueError(f'{path} holds no task classifier for {missing}; it has '
                         f'{sorted(saved.get("state_dicts", {}))}: delete it to retrain')
    for name, head in heads.items():
        check_finite(saved['state_dicts'][name], f'{path} (the saved {name})')
        try:
            head.load_state_dict(saved['state_dicts'][name])
        except RuntimeError as error:
            reason = ' '.join(str(error).split())
            raise ValueError(f'{path}: the saved {name} does not fit the model ({reason}); '
                             'delete it to retrain') from None
        print_log(f'TaskClassifierHook: {name} reused from {path} (not retrained): '
                  f'{describe(saved.get("records", {}).get(name, {}))}', logger='current')


def describe(record: dict) -> str:
    if not record:
        return 'no record'
    if record.get('val_accuracy') is None:
        return f'last step kept (no validation split), train loss {record["train_loss"]:.4f}'
    return (f'best validation accuracy {record["val_accuracy"]:.2f}% at step '
            f'{record["step"]}, train loss {record["train_loss"]:.4f}')


def to_device(batch: dict, device) -> tuple:
    """(inputs, data_samples) of a collated batch, tensors on ``device``."""
    return tuple({k: v.to(device) for k, v in batch[part].items()}
                 for part in ('inputs', 'data_samples'))


def train_classifier(module, dataset, val_set, batch_size: int, steps: int, val_every: int,
                     lr: float, weight_decay: float, seed: int,
                     schedule: str = 'warmup_step', what: str = 'task_head',
                     epoch_steps: int | None = None) -> dict:
    """Train ``module.task_head`` with cross-entropy (``module.task_loss``); keeps the best
    validation weights. ``schedule``: PDPP's warm-up/step lr or a constant lr (CEFITO's).
    Logs its progress as ``TaskClassifierHook: <what>``. Returns ``{step, val_accuracy,
    train_loss}`` of the kept weights and, per block of ``epoch_steps`` steps (the main loop's
    epoch; default ``val_every``), ``epoch_losses`` (mean training loss) and ``epoch_seconds``
    (wall time, validation included)."""
    head = module.task_head
    device = next(head.parameters()).device
    head.requires_grad_(True)
    optimizer = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, (lambda step: pdpp_lr_multiplier(step, steps)) if schedule == 'warmup_step'
        else (lambda step: 1.0))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True,
                        drop_last=len(dataset) >= batch_size, collate_fn=planning_collate,
                        generator=torch.Generator().manual_seed(seed))
    batches = itertools.chain.from_iterable(itertools.repeat(loader))
    best = dict(step=steps, val_accuracy=None, train_loss=float('nan'))
    best_state = None
    progress = stage_progress(f'TaskClassifierHook: {what}', steps)
    curve = EpochCurve(epoch_steps or val_every, steps)
    for step in range(1, steps + 1):
        loss = module.task_loss(*to_device(next(batches), device))
        check_finite_loss(loss, f'the task classifier\'s loss at step {step}')
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        if val_set is not None and (step % val_every == 0 or step == steps):
            accuracy = task_accuracy(module, val_set, batch_size)
            if best['val_accuracy'] is None or accuracy > best['val_accuracy']:
                best = dict(step=step, val_accuracy=accuracy, train_loss=loss.item())
                best_state = copy.deepcopy(head.state_dict())
        curve.add(step, loss)
        progress.update(extra=lambda: f'loss {loss.item():.4f}' + (
            '' if best['val_accuracy'] is None else
            f', best validation accuracy {best["val_accuracy"]:.2f}% (step {best["step"]})'))
    if best_state is None:
        best["train_loss"] = loss.item()
    else:
        head.load_state_dict(best_state)
    head.requires_grad_(False)
    return dict(best, **curve.record())


class EpochCurve:
    """A stage's training curve: the mean loss and the wall seconds of each block of
    ``epoch_steps`` steps (the last block may be shorter), as an official script logs per
    epoch; read by tools/compare_official_training.py."""

    def __init__(self, epoch_steps: int, steps: int):
        self.epoch_steps, self.steps = max(1, int(epoch_steps)), steps
        self.losses, self.seconds, self.block = [], [], []
        self.started = time.perf_counter()

    def add(self, step: int, loss: torch.Tensor) -> None:
        """The loss of (1-based) ``step``; closes a block every ``epoch_steps`` steps."""
        self.block.append(loss.detach())
        if step % self.epoch_steps == 0 or step == self.steps:
            self.losses.append(float(torch.stack(self.block).mean()))
            self.seconds.append(time.perf_counter() - self.started)
            self.block, self.started = [], time.perf_counter()

    def record(self) -> dict:
        return dict(epoch_losses=self.losses, epoch_seconds=self.seconds)


@torch.no_grad()
def task_accuracy(module, dataset, batch_size: int) -> float:
    """Task accuracy (%) of ``module.task_head`` on ``dataset``."""
    device = next(module.task_head.parameters()).device
    correct = total = 0
    for batch in DataLoader(dataset, batch_size=batch_size, collate_fn=planning_collate):
        inputs, samples = to_device(batch, device)
        logits = module.task_head(observation_pair(inputs))
        correct += int((logits.argmax(-1) == samples['task']).sum())
        total += len(samples['task'])
    return 100.0 * correct / max(total, 1)

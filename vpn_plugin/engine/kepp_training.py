"""KEPP's first stage in the mmengine Runner: ``KEPPStepModelHook`` (HOOKS).

KEPP's step model (``models.kepp``) is trained alone, before the plan model, with PDPP's
recipe (AdamW, the official warm-up/step schedule ``core.diffusion.pdpp_lr_multiplier``, EMA
0.995 reset every 10 steps before step 400 then updated every 10, the EMA weights kept), as the
official ``step/`` Trainer; then it predicts the first/last actions of every training window
once (DDIM, per-window seeds), which the plan model's training paths are retrieved for. Both
log their progress with an ETA (``engine.pre_stage``).
Saved as ``<work_dir>/kepp_step_model.pth`` (a pre-stage file, ``engine.pre_stage``: no
checkpoint of the run) with what it was trained on (the training windows and features,
horizon, action count, feature dim), how (steps, lr, batch size, seed, endpoint weight) and
its predictions on the training windows, and reused from there (a restart of the run in its
work dir: the predictions too), from ``model.step_checkpoint`` (data checked, settings not: a
file chosen by hand; settings that differ from the run's are named in a warning) or from a
loaded KEPP checkpoint; never retrained silently, and a file of another dataset, horizon, action count or setting is refused naming both.
Trained, loaded or reused, the step model and its predictions run on their own random streams
seeded with the run's seed (``random_states.own_seeded_stream``), as the official step script
runs in its own seeded process before the plan script: the plan model's training then draws
the same numbers whether the step model was trained or reused.
"""
from __future__ import annotations

import copy
import itertools
import logging
from pathlib import Path

from typing import Optional
from vpn_plugin.config_types import Count, Positive, NonNegative, checked_arguments
import torch
from mmengine.dist import broadcast, is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from torch.utils.data import DataLoader

from mmaction.registry import HOOKS
from vpn_plugin.core.diffusion import pdpp_lr_multiplier
from vpn_plugin.datasets.planning_dataset import planning_collate
from vpn_plugin.models.base_planner import check_finite_loss
from vpn_plugin.models.kepp import KEPP

from .checkpoint import check_finite
from .pdpp_training import EpochCurve, to_device
from .pre_stage import (DATA_KEYS, RETRAIN, STEP_FILE, check_identity, data_identity,
                        read_pre_stage, save_pre_stage, stage_progress)
from .random_states import load_first_draw, own_seeded_stream

EMA_DECAY, EMA_START, EMA_INTERVAL = 0.995, 400, 10
# settings a step model file saved before they were recorded was trained with (the official)
UNRECORDED_SETTINGS = dict(endpoint_weight=10.0)
WHAT = 'a KEPP step model'


def training_identity(model: KEPP, dataset) -> dict:
    """What a step model is tied to: the training set, T, N, D (``pre_stage.data_identity``)."""
    return data_identity(dataset, horizon=model.horizon, num_actions=model.num_actions,
                         feature_dim=model.step.feature_dim)


def load_step_model(path, model: KEPP, expected: dict, settings=None) -> dict:
    """Load a step model saved by the hook into ``model.step``; returns the saved dict. The
    file must have been trained on ``expected`` (and with ``settings``, when given). A file
    the config names (``model.step_checkpoint``) is not the run's to delete: its refusals say
    to give another or unset the option."""
    advice = RETRAIN
    named = getattr(model, 'step_checkpoint', None)
    if named and Path(path) == Path(named):
        advice = ('give model.step_checkpoint a step model saved by KEPPStepModelHook '
                  f'({STEP_FILE} in a KEPP work dir), or unset it to train one')
        if not Path(path).is_file():
            raise ValueError(f'model.step_checkpoint={str(path)!r}: no such file; {advice}')
    saved = read_pre_stage(path, f'{WHAT} saved by KEPPStepModelHook', ('identity', 'state_dict'),
                           advice)
    identity, state = saved['identity'], saved['state_dict']
    check_finite(state, f'{path} (the saved step model)')
    keys = DATA_KEYS + tuple(sorted(settings or {}))
    check_identity(path, WHAT, {**identity, **recorded_settings(saved)},
                   {**expected, **(settings or {})}, keys, advice)
    try:
        model.step.load_state_dict(state)
    except RuntimeError as error:
        raise ValueError(f'{path}: the saved step model does not fit the model '
                         f'({" ".join(str(error).split())})') from None
    model.step_ready.fill_(True)
    return saved


def recorded_settings(saved: dict) -> dict:
    """The settings a step model file was trained with: those it records, and for a file saved
    before a setting was recorded the official value it was then trained with
    (:data:`UNRECORDED_SETTINGS`)."""
    return {**UNRECORDED_SETTINGS, **(saved.get('settings') or {})}


def warn_other_settings(path, saved: dict, settings: dict) -> list:
    """Name the settings a step model chosen by hand (``model.step_checkpoint``: its data
    checked, its settings not) was trained with (:func:`recorded_settings`) that differ from
    this run's step options: the run's own options for the step model (lr, steps, endpoint
    weight, seed, ...) then change nothing. Returns the lines."""
    recorded = recorded_settings(saved)
    lines = [f'{key}: {recorded[key]!r} in the file, {value!r} in this run'
             for key, value in settings.items() if key in recorded and recorded[key] != value]
    if lines:
        print_log(f'{path} (model.step_checkpoint) was trained with other settings than this '
                  f'run\'s step model: {"; ".join(lines)}; it is reused as it is, so these '
                  'options of the run change nothing in its step model (unset '
                  'model.step_checkpoint to train one with them)', logger='current',
                  level=logging.WARNING)
    return lines


@HOOKS.register_module()
class KEPPStepModelHook(Hook):
    """Train (or reuse) KEPP's step model before the plan model (module docstring).

    Args: lr (None: the optimiser's, as the official step scripts share --lr), weight_decay of
    AdamW; max_iters (default: the train loop's, as the official
    step and plan scripts share --epochs and --n_train_steps)."""

    priority = 'HIGH'

    @checked_arguments(prefix='KEPPStepModelHook: ')
    def __init__(self, lr: Optional[Positive] = None, weight_decay: NonNegative = 0.0,
                 max_iters: Optional[Count] = None):
        self.lr, self.weight_decay, self.max_iters = lr, weight_decay, max_iters

    def settings(self, runner, model: KEPP) -> dict:
        """How the step model is trained (recorded in its file, checked on reuse)."""
        loader = runner.train_dataloader
        group = runner.optim_wrapper.param_groups[0]
        return dict(steps=self.max_iters or runner.max_iters,
                    batch_size=loader.batch_size or loader.batch_sampler.batch_size,
                    lr=self.lr or group.get('initial_lr', group['lr']),
                    weight_decay=self.weight_decay, seed=runner.seed,
                    sampling_seed=model.step.sampling_seed,
                    endpoint_weight=model.step.endpoint_weight)

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if not isinstance(model, KEPP):
            return
        with own_seeded_stream(runner.seed):  # as step/main_distributed.py, its own process
            self.train_or_load(runner, model)

    def train_or_load(self, runner, model: KEPP) -> None:
        """The step model from the loaded checkpoint, a saved file or trained (and saved),
        then its first/last actions of the training windows (module docstring)."""
        dataset = runner.train_dataloader.dataset
        identity = training_identity(model, dataset)
        path = Path(runner.work_dir) / STEP_FILE
        settings = self.settings(runner, model)
        saved = {}
        if bool(model.step_ready):
            print_log('KEPPStepModelHook: the step model from the loaded checkpoint (not '
                      'retrained)', logger='current')
        elif model.step_checkpoint or path.is_file():
            source = Path(model.step_checkpoint or path)
            saved = load_step_model(source, model, identity,
                                    None if model.step_checkpoint else settings)
            print_log(f'KEPPStepModelHook: the step model reused from {source} (not '
                      'retrained)', logger='current')
            if model.step_checkpoint:
                warn_other_settings(source, saved, settings)
        else:
            saved = self.train(runner, model, dataset, identity, settings, path)
        if model.train_paths == 'step':
            model.train_endpoints = self.endpoints(runner, model, dataset, saved, path)

    def train(self, runner, model: KEPP, dataset, identity: dict, settings: dict,
              path: Path) -> dict:
        """Train the step model (rank 0; broadcast to the others) and save it; returns what
        was saved."""
        saved = {}
        if is_main_process():
            official_step_draw(model, runner.seed)
            record = train_step_model(model, dataset, settings['batch_size'],
                                      settings['steps'], settings['lr'], self.weight_decay,
                                      runner.seed, epoch_steps=len(runner.train_dataloader))
            saved = dict(identity=identity, settings=settings,
                         state_dict=model.step.state_dict(),
                         record=dict(steps=settings['steps'], **record))
            save_pre_stage(path, saved)
            print_log(f'KEPPStepModelHook: trained the step model for {settings["steps"]} '
                      f'steps (last loss {record["train_loss"]:.4f}); saved {path}',
                      logger='current')
        for tensor in model.step.state_dict().values():
            broadcast(tensor, 0)
        model.step_ready.fill_(True)
        return saved

    def endpoints(self, runner, model: KEPP, dataset, saved: dict, path: Path):
        """The step model's (first, last) actions of the training windows: from the file when
        it holds them for this training set and sampling seed, else predicted (and added to
        the run's own file)."""
        kept = saved.get('endpoints')
        if (kept is not None and len(kept) == len(dataset)
                and (saved.get('settings') or {}).get('sampling_seed') == model.step.sampling_seed):
            check_saved_endpoints(kept, len(dataset), model.num_actions,
                                  model.step_checkpoint or path)
            print_log(f'KEPPStepModelHook: first/last actions of {len(dataset)} training '
                      'windows reused from the step model\'s file (not predicted again)',
                      logger='current')
            return kept.to(next(model.step.parameters()).device)
        endpoints = training_endpoints(model, dataset, runner)
        own = saved and Path(path).is_file() and not model.step_checkpoint
        if own and is_main_process():
            save_pre_stage(path, dict(saved, endpoints=endpoints.cpu()))
        return endpoints

    def before_val(self, runner) -> None:
        self._require(runner)

    def before_test(self, runner) -> None:
        self._require(runner)

    @staticmethod
    def _require(runner) -> None:
        """Evaluation without a trained step model: load ``model.step_checkpoint`` (or the
        run's file) when given, else the model's own message."""
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if not isinstance(model, KEPP) or bool(model.step_ready):
            return
        path = Path(model.step_checkpoint or Path(runner.work_dir) / STEP_FILE)
        if path.is_file():
            loader = runner.test_dataloader if runner._test_dataloader else runner.val_dataloader
            load_step_model(path, model, training_identity(model, loader.dataset))
        model.require_step()


def official_step_draw(model: KEPP, seed: int) -> None:
    """Give the step model's U-Net the initial weights ``step/main_distributed.py`` draws for
    ``seed``: torch seeded, then the step U-Net built before anything else (our KEPP builds the
    plan U-Net first, which would leave the same seed other step weights; ``TemporalUNet``
    built so equals the official ``TemporalUnet``). The global torch stream is left as it
    was."""
    from vpn_plugin.models.temporal_unet import TemporalUNet
    load_first_draw(model.step.unet, lambda: TemporalUNet(*model.step.unet.arguments), seed)


def train_step_model(model: KEPP, dataset, batch_size: int, steps: int, lr: float,
                     weight_decay: float, seed: int, epoch_steps: int | None = None) -> dict:
    """The official step Trainer: AdamW, warm-up/step LR, the EMA kept. Returns the last
    loss (``train_loss``) and the mean loss and seconds of every ``epoch_steps`` steps
    (``epoch_losses``, ``epoch_seconds``: :class:`EpochCurve`). Logs its progress
    (``pre_stage.stage_progress``)."""
    module = model.step
    device = next(module.parameters()).device
    module.requires_grad_(True)
    ema = copy.deepcopy(module).requires_grad_(False)
    optimizer = torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: pdpp_lr_multiplier(step, steps))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True,
                        drop_last=len(dataset) >= batch_size, collate_fn=planning_collate,
                        generator=torch.Generator().manual_seed(seed))
    batches = itertools.chain.from_iterable(itertools.repeat(loader))
    loss = torch.tensor(float('nan'))
    progress = stage_progress('KEPPStepModelHook: step model', steps)
    curve = EpochCurve(epoch_steps or steps, steps)
    for step in range(steps):
        loss = model.step_loss(*to_device(next(batches), device))
        check_finite_loss(loss, f'KEPPStepModelHook: the step model\'s loss at step {step + 1}')
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        if step % EMA_INTERVAL == 0:
            update_ema(ema, module, copy_only=step < EMA_START)
        curve.add(step + 1, loss)
        progress.update(extra=lambda: f'loss {float(loss.detach()):.4f}')
    module.load_state_dict(ema.state_dict())
    module.requires_grad_(False)
    return dict(train_loss=float(loss.detach()), **curve.record())


@torch.no_grad()
def update_ema(ema, module, copy_only: bool) -> None:
    """Official ``EMA``: ema = 0.995 ema + 0.005 model (parameters), or a copy."""
    if copy_only:
        ema.load_state_dict(module.state_dict())
        return
    for average, current in zip(ema.parameters(), module.parameters()):
        average.mul_(EMA_DECAY).add_(current, alpha=1 - EMA_DECAY)


def check_saved_endpoints(kept, count: int, num_actions: int, path) -> None:
    """The (first, last) actions a step model file holds for ``count`` training windows must
    be an integer (count, 2) tensor of action ids in [0, num_actions): an edited -1 would
    index the last action and train the plan model on its paths without a word."""
    valid = (torch.is_tensor(kept) and not kept.is_floating_point() and kept.dtype != torch.bool
             and tuple(kept.shape) == (count, 2))
    if valid and kept.numel():
        low, high = int(kept.min()), int(kept.max())
        valid = 0 <= low and high < num_actions
    if not valid:
        found = (f'{kept.dtype} {tuple(kept.shape)}, ids {int(kept.min())}..{int(kept.max())}'
                 if torch.is_tensor(kept) and kept.numel() else repr(kept)[:80])
        raise ValueError(f'{path}: endpoints (the step model\'s first/last actions of the '
                         f'training windows) are {found}; expected integer action ids in '
                         f'0..{num_actions - 1} of shape ({count}, 2): delete the file to '
                         'retrain the step model')


@torch.no_grad()
def training_endpoints(model: KEPP, dataset, runner) -> torch.Tensor:
    """(M, 2): the step model's first/last actions of every training window (by index)."""
    device = next(model.step.parameters()).device
    loader = DataLoader(dataset, batch_size=runner.train_dataloader.batch_size or 256,
                        collate_fn=planning_collate)
    endpoints = torch.zeros(len(dataset), 2, dtype=torch.long, device=device)
    progress = stage_progress('KEPPStepModelHook: first/last actions of the training windows',
                              len(dataset), unit='windows')
    for batch in loader:
        inputs, samples = to_device(batch, device)
        endpoints[samples['index']] = model.predict_endpoints(inputs, samples)
        progress.update(len(samples['index']))
    print_log(f'KEPPStepModelHook: first/last actions of {len(dataset)} training windows '
              'predicted by the step model (the plan model\'s training paths)', logger='current')
    return endpoints

"""KEPP's first stage in the mmengine Runner: ``KEPPStepModelHook`` (HOOKS).

KEPP's step model (``models.kepp``) is trained alone, before the plan model, with PDPP's
recipe (AdamW, the official warm-up/step schedule ``core.diffusion.pdpp_lr_multiplier``, EMA
0.995 reset every 10 steps before step 400 then updated every 10, the EMA weights kept), as the
official ``step/`` Trainer; then it predicts the first/last actions of every training window
once (DDIM, per-window seeds), which the plan model's training paths are retrieved for.
Saved as ``<work_dir>/kepp_step_model.pth`` with what it was trained on (dataset actions,
horizon, action count, feature dim) and reused from there, from ``model.step_checkpoint`` or
from a loaded KEPP checkpoint; never retrained silently, and a file of another dataset,
horizon or action count is refused with one message.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
from pathlib import Path

import torch
from mmengine.dist import broadcast, is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from torch.utils.data import DataLoader

from mmaction.registry import HOOKS
from vpn_plugin.core.diffusion import pdpp_lr_multiplier
from vpn_plugin.datasets.planning_dataset import planning_collate
from vpn_plugin.models.kepp import KEPP

from .pdpp_training import EpochCurve, to_device

STEP_FILE = 'kepp_step_model.pth'
EMA_DECAY, EMA_START, EMA_INTERVAL = 0.995, 400, 10


def training_identity(model: KEPP, dataset) -> dict:
    """What a step model is tied to: the dataset's actions, T, N, D."""
    names = '\n'.join(map(str, getattr(dataset.taxonomy, 'action_names', [])))
    return dict(actions_sha1=hashlib.sha1(names.encode()).hexdigest()[:16],
                dataset=str(getattr(dataset.taxonomy, 'path', type(dataset).__name__)),
                horizon=model.horizon, num_actions=model.num_actions,
                feature_dim=model.step.feature_dim)


def check_identity(path, saved: dict, expected: dict) -> None:
    """One message when a saved step model was trained on something else."""
    keys = ('actions_sha1', 'horizon', 'num_actions', 'feature_dim')
    differ = [k for k in keys if saved.get(k) != expected[k]]
    if differ:
        def describe(d):
            return (f'{d.get("dataset")} (T={d.get("horizon")}, N={d.get("num_actions")}, '
                    f'D={d.get("feature_dim")}, actions {d.get("actions_sha1")})')
        raise ValueError(f'{path}: a KEPP step model trained on {describe(saved)}, but this '
                         f'run is {describe(expected)} (differs in {", ".join(differ)}); use '
                         'the step model of this dataset and horizon, or delete the file to '
                         'retrain')


def load_step_model(path, model: KEPP, expected: dict) -> dict:
    """Load a step model saved by the hook into ``model.step``; returns the saved dict."""
    try:
        saved = torch.load(path, map_location='cpu', weights_only=True)
        identity, state = saved['identity'], saved['state_dict']
    except Exception as error:  # noqa: BLE001  (any unreadable file: say which)
        raise ValueError(f'{path}: not a KEPP step model saved by KEPPStepModelHook '
                         f'({type(error).__name__}: {error})') from None
    check_identity(path, identity, expected)
    try:
        model.step.load_state_dict(state)
    except RuntimeError as error:
        raise ValueError(f'{path}: the saved step model does not fit the model '
                         f'({" ".join(str(error).split())})') from None
    model.step_ready.fill_(True)
    return saved


@HOOKS.register_module()
class KEPPStepModelHook(Hook):
    """Train (or reuse) KEPP's step model before the plan model (module docstring).

    Args: lr (None: the optimiser's, as the official step scripts share --lr), weight_decay of
    AdamW; max_iters (default: the train loop's, as the official
    step and plan scripts share --epochs and --n_train_steps)."""

    priority = 'HIGH'

    def __init__(self, lr=None, weight_decay: float = 0.0, max_iters=None):
        self.lr, self.weight_decay, self.max_iters = lr, weight_decay, max_iters

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if not isinstance(model, KEPP):
            return
        dataset = runner.train_dataloader.dataset
        identity = training_identity(model, dataset)
        path = Path(runner.work_dir) / STEP_FILE
        if bool(model.step_ready):
            print_log('KEPPStepModelHook: the step model from the loaded checkpoint (not '
                      'retrained)', logger='current')
        elif model.step_checkpoint or path.is_file():
            source = Path(model.step_checkpoint or path)
            load_step_model(source, model, identity)
            print_log(f'KEPPStepModelHook: the step model reused from {source} (not '
                      'retrained)', logger='current')
        else:
            loader = runner.train_dataloader
            batch_size = loader.batch_size or loader.batch_sampler.batch_size
            steps = self.max_iters or runner.max_iters
            if is_main_process():
                group = runner.optim_wrapper.param_groups[0]
                lr = self.lr or group.get('initial_lr', group['lr'])
                record = train_step_model(model, dataset, batch_size, steps, lr,
                                          self.weight_decay, runner.seed,
                                          epoch_steps=len(loader))
                torch.save(dict(identity=identity, state_dict=model.step.state_dict(),
                                record=dict(steps=steps, **record)), path)
                print_log(f'KEPPStepModelHook: trained the step model for {steps} steps '
                          f'(last loss {record["train_loss"]:.4f}); saved {path}',
                          logger='current')
            for tensor in model.step.state_dict().values():
                broadcast(tensor, 0)
            model.step_ready.fill_(True)
        if model.train_paths == 'step':
            model.train_endpoints = training_endpoints(model, dataset, runner)

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


def train_step_model(model: KEPP, dataset, batch_size: int, steps: int, lr: float,
                     weight_decay: float, seed: int, epoch_steps: int | None = None) -> dict:
    """The official step Trainer: AdamW, warm-up/step LR, the EMA kept. Returns the last
    loss (``train_loss``) and the mean loss and seconds of every ``epoch_steps`` steps
    (``epoch_losses``, ``epoch_seconds``: :class:`EpochCurve`)."""
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
    curve = EpochCurve(epoch_steps or steps, steps)
    for step in range(steps):
        loss = model.step_loss(*to_device(next(batches), device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        if step % EMA_INTERVAL == 0:
            update_ema(ema, module, copy_only=step < EMA_START)
        curve.add(step + 1, loss)
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


@torch.no_grad()
def training_endpoints(model: KEPP, dataset, runner) -> torch.Tensor:
    """(M, 2): the step model's first/last actions of every training window (by index)."""
    device = next(model.step.parameters()).device
    loader = DataLoader(dataset, batch_size=runner.train_dataloader.batch_size or 256,
                        collate_fn=planning_collate)
    endpoints = torch.zeros(len(dataset), 2, dtype=torch.long, device=device)
    for batch in loader:
        inputs, samples = to_device(batch, device)
        endpoints[samples['index']] = model.predict_endpoints(inputs, samples)
    print_log(f'KEPPStepModelHook: first/last actions of {len(dataset)} training windows '
              'predicted by the step model (the plan model\'s training paths)', logger='current')
    return endpoints

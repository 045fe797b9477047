"""``BasePlanner``: what every procedure planner shares.

* the PKG: buffer ``log_transitions`` (N, N) [from, to] and the persistent flag ``pkg_ready``
  (both saved in checkpoints), filled by :meth:`build_pkg` from a training dataset through the
  model's ``pkg`` config (``PKGBuilder``) or by :meth:`set_pkg`; ``PKGHook`` calls
  ``build_pkg`` before train/val/test unless a loaded checkpoint carried the graph;
* the forward dispatch (``mode`` 'loss' / 'predict' / 'tensor') and the horizon checks;
* the result packing: one ``ActionDataSample`` per window with compact copies.

A subclass implements ``loss(inputs, data_samples) -> dict``,
``predict_fields(inputs, data_samples, horizon) -> dict`` (``pred_plan`` (B, T') and optional
``soft_plan``/``emissions`` (B, T', N), ``pred_task`` (B,), ``metainfo`` (list of B dicts)) and
``tensor(inputs, horizon)``.

A planner that predicts the task returns ``pred_task`` (B,) with ``pred_task_score`` (B,)
(:func:`task_fields`) and says where it comes from in three class (or instance) attributes,
copied into each result's metainfo (:meth:`BasePlanner.task_metainfo`) for the displays:
``task_source`` ('classifier': the model's own prediction; 'ground_truth': the batch's true
task; None: no task), ``task_score`` (what ``pred_task_score`` is: 'probability', a softmax, or
'score', a head's raw output) and ``plan_uses_task`` (False: an auxiliary head the plan does
not depend on).

A planner that can fail to produce a plan for a window (an LLM reply without a usable plan, a
beam search without a PKG path) returns that row of ``pred_plan`` filled with
``core.metrics.NO_PLAN`` (-1; ``core.metrics.no_plan(T)`` is such a row): the one metric
implementation (``core.metrics``, ``PlanningMetric``) scores it 0 on every metric and logs
their number. Never emit an id outside the taxonomy for it (the legacy mIoU would credit it).
"""
import contextlib
import functools
from vpn_plugin.config_types import Range, checked_arguments
import math
from typing import Annotated, Dict, List, Optional

import numpy as np
import torch
from mmengine.logging import print_log
from mmengine.model import BaseModel

from mmaction.structures import ActionDataSample

from .. import core
from ..errors import check_numbers
from .pkg_builder import build_pkg_builder, changed_pkg_options

FORWARD_MODES = ('loss', 'predict', 'tensor')
# (N, N) float64 matrices of 16 GiB at most (COIN, the largest taxonomy here, has 778 actions)
MAX_ACTIONS = 46_340
# a plan of more steps than this is no procedure window (the datasets' longest are ~30 steps); a
# horizon of 10**9 was a torch allocation error deep in a model's build
MAX_HORIZON = 1024
ActionCount = Annotated[int, Range(1, MAX_ACTIONS)]  # N, K: a taxonomy the planner can hold
Horizon = Annotated[int, Range(1, MAX_HORIZON)]  # T
# data_samples key -> ActionDataSample field of the ground truth copied into each result
TRUTH_FIELDS = (('plan', 'gt_plan'), ('task', 'gt_task'), ('index', 'sample_idx'))


class BasePlanner(BaseModel):
    """A planner over N actions with a training horizon T and a PKG (module docstring).

    Args:
        num_actions: N.
        horizon: T the planner is built for (and the default without ground-truth plans).
        pkg: ``PKGBuilder`` config (None: its defaults).
        data_preprocessor: mmengine data preprocessor config.
    Class attributes: ``follows_data_horizon`` (True: any evaluated horizon T' is planned as
    is; False: T' must be T unless ``self.cross_horizon`` names one of the subclass's
    ``cross_horizon_modes``, a rule for T' < T).
    """

    follows_data_horizon = False
    cross_horizon: Optional[str] = None
    cross_horizon_modes: tuple = (None,)  # the rules a subclass offers for T' < T
    # where pred_task comes from (module docstring): None | 'classifier' | 'ground_truth'
    task_source: Optional[str] = None
    task_score: str = 'probability'  # what pred_task_score is: 'probability' | 'score'
    plan_uses_task: bool = False
    # the (non-persistent) buffers holding a planner's text features, and their config
    text_feature_buffers: tuple = ()
    text_loader = 'load_state_features'  # the models.text_embeddings loader of text_source
    text_source: Optional[dict] = None
    # {term: weight} of a planner's ``loss_weights`` option: the weight of a term the option
    # leaves out (None: every term at its default)
    default_loss_weights: Optional[dict] = None

    @classmethod
    def resolved_options(cls, options: dict) -> dict:
        """``options`` (a config's ``model``, defaults filled) as the class reads them: what a
        test compares with its training's (``engine.checkpoint.model_option_differences``).
        ``loss_weights`` with the terms it leaves out at :attr:`default_loss_weights` (None,
        {} and the defaults written out are one option)."""
        weights = options.get('loss_weights')
        if cls.default_loss_weights is None or not (weights is None or isinstance(weights, dict)):
            return options
        return dict(options, loss_weights=cls.loss_weights_of(weights))

    @classmethod
    def loss_weights_of(cls, loss_weights: Optional[dict]) -> dict:
        """{term: weight} of every loss term for the option ``loss_weights``."""
        return {**(cls.default_loss_weights or {}), **(loss_weights or {})}

    @checked_arguments(prefix='model.')  # every planner's __init__ is checked the same way
    def __init__(self, num_actions: ActionCount, horizon: Horizon, pkg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None):
        super().__init__(data_preprocessor=data_preprocessor)
        self.num_actions, self.horizon = num_actions, horizon
        self.pkg_builder = build_pkg_builder(pkg)
        self.register_buffer('log_transitions',
                             torch.full((num_actions, num_actions), -math.log(num_actions)))
        self.register_buffer('pkg_ready', torch.tensor(False))

    # ------------------------------------------------------------------ the PKG
    @classmethod
    def plans_read_pkg(cls, model_cfg: dict) -> bool:
        """Whether the plans of a model of this config read the PKG (False: it is counted
        for the record only, e.g. PDPP with ``decode='argmax'``, CEFITO)."""
        return True

    def build_pkg(self, dataset) -> np.ndarray:
        """Count the PKG (N, N) on a training ``dataset`` with the ``pkg`` config, install
        it and return it."""
        if getattr(dataset, 'horizon', self.horizon) != self.horizon:
            raise ValueError(f'horizon mismatch: the training dataset has horizon='
                             f'{dataset.horizon} but model.horizon={self.horizon}; the PKG is '
                             'counted on training windows of the model\'s horizon: set both '
                             'to the same T')
        pkg = self.pkg_builder.build(dataset, self.num_actions)
        self.set_pkg(pkg)
        print_log(f'{type(self).__name__}: PKG with {int((pkg > 0).sum())} edges over '
                  f'{self.num_actions} actions ({self.pkg_builder.describe()})',
                  logger='current')
        return pkg

    def recount_difference(self) -> Optional[str]:
        """After ``model.pkg.recount`` counted the graph again over a loaded checkpoint's:
        'same graph' when the two agree (probabilities within 1e-6, the same edges), else what
        differs; None when no checkpoint's graph was replaced."""
        loaded = getattr(self, 'checkpoint_transitions', None)
        if loaded is None or not bool(self.pkg_ready):
            return None
        old, new = loaded.double().exp().cpu(), self.log_transitions.detach().double().exp().cpu()
        if old.shape != new.shape:
            return f'another graph ({tuple(old.shape)} in the checkpoint, {tuple(new.shape)} now)'
        added, removed = int(((new > 0) & (old == 0)).sum()), int(((old > 0) & (new == 0)).sum())
        largest = float((new - old).abs().max()) if old.numel() else 0.0
        if not added and not removed and largest <= 1e-6:
            return 'same graph'
        return (f'another graph than the checkpoint\'s: {added} edge(s) added, {removed} removed, '
                f'largest probability change {largest:.3g}')

    def set_pkg(self, pkg) -> None:
        """Install a PKG given as transition probabilities (N, N) [from, to]."""
        expected = (self.num_actions, self.num_actions)
        if tuple(np.shape(pkg)) != expected:
            raise ValueError(f'PKG has shape {tuple(np.shape(pkg))} but the model has '
                             f'num_actions={self.num_actions}; expected {expected}')
        log_transitions = core.pkg_log_transitions(pkg)  # checks it is a PKG
        self.log_transitions.copy_(log_transitions.to(self.log_transitions))
        self.pkg_ready.fill_(True)

    def pkg_probabilities(self) -> np.ndarray:
        """The installed PKG (N, N) as float64 probabilities."""
        self.require_pkg()
        return self.log_transitions.detach().double().exp().cpu().numpy()

    def require_pkg(self) -> None:
        if not bool(self.pkg_ready):
            raise RuntimeError(
                f'{type(self).__name__}: the PKG was never filled (log_transitions is the '
                'placeholder); load a checkpoint that carries it, run through a Runner whose '
                "custom_hooks hold dict(type='PKGHook') with a train_dataloader, or call "
                'model.build_pkg(train_dataset)')

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        # checkpoints written before the flag existed always carried a filled PKG
        if prefix + 'log_transitions' in state_dict and prefix + 'pkg_ready' not in state_dict:
            state_dict[prefix + 'pkg_ready'] = torch.tensor(True)
        if self.pkg_builder.recount:  # model.pkg.recount: PKGHook counts the config's graph
            loaded, ready = (state_dict.get(prefix + key) for key in ('log_transitions',
                                                                      'pkg_ready'))
            self.checkpoint_transitions = loaded.detach().clone() if torch.is_tensor(
                loaded) and torch.is_tensor(ready) and bool(ready) else None
            state_dict[prefix + 'log_transitions'] = self.log_transitions.clone()
            state_dict[prefix + 'pkg_ready'] = torch.tensor(False)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def text_features_identity(self) -> Optional[dict]:
        """The identity of the text features the planner holds (``text_embeddings.
        features_identity``: SHA-256, shapes, source, kind), None when it holds none. Training
        records it in every checkpoint; loading a checkpoint compares it."""
        tensors = [functools.reduce(getattr, name.split('.'), self)
                   for name in self.text_feature_buffers]
        tensors = [t for t in tensors if t is not None]  # e.g. built without text features
        if not tensors:
            return None
        from .text_embeddings import features_identity
        return features_identity(tensors, self.text_source, self.text_loader)

    # ------------------------------------------------------------------ forward
    def forward(self, inputs: Dict[str, torch.Tensor], data_samples=None, mode: str = 'tensor'):
        if mode not in FORWARD_MODES:
            raise ValueError(f'forward mode={mode!r} is unknown; expected one of '
                             f'{FORWARD_MODES}')
        horizon = self.eval_horizon(data_samples, training=(mode == 'loss'))
        if mode == 'loss':
            with named_divergence(self, inputs):
                return self.loss(inputs, data_samples)
        if mode == 'tensor':  # the samples' indices seed a stochastic planner's noise
            return self.tensor(inputs, horizon, data_samples)
        self.require_pkg()
        with torch.no_grad(), named_overflow(inputs):
            samples = pack_samples(self.predict_fields(inputs, data_samples, horizon),
                                   data_samples)
        if samples and 'pred_task' in samples[0] and self.task_source is not None:
            for sample in samples:
                sample.set_metainfo(self.task_metainfo())
        return samples

    def task_metainfo(self) -> dict:
        """Where the results' ``pred_task`` comes from (module docstring)."""
        return dict(task_source=self.task_source, task_score=self.task_score,
                    plan_uses_task=self.plan_uses_task)

    def eval_horizon(self, data_samples, training: bool) -> int:
        """T' of the batch's plans (B, T') (T without plans), checked against the model."""
        if not data_samples or 'plan' not in data_samples:
            return self.horizon
        horizon = data_samples['plan'].shape[-1]
        if training and horizon != self.horizon:
            raise ValueError(f'horizon mismatch: training data has T={horizon} but the model '
                             f'was built with horizon={self.horizon}; set model.horizon to the '
                             "dataset's horizon")
        error = self.horizon_mismatch(self.cross_horizon, self.horizon, horizon)
        if error:
            raise ValueError(error)
        return horizon

    @classmethod
    def horizon_mismatch(cls, cross_horizon: Optional[str], model_horizon: int,
                         data_horizon: int) -> Optional[str]:
        """Why this planner class built for T = ``model_horizon`` (with ``cross_horizon``)
        cannot plan windows of T' = ``data_horizon``; None when it can. Used at predict time
        and by ``data_paths.apply_horizon`` for a config's ``test_horizon`` (which finds it on
        the registered class: data_paths is below models)."""
        if cls.follows_data_horizon or data_horizon == model_horizon:
            return None
        if data_horizon < model_horizon and cross_horizon is not None:
            return None
        rules = ' or '.join(f'model.cross_horizon={mode!r}'
                            for mode in cls.cross_horizon_modes if mode is not None)
        if rules:
            fix = (f'a model is evaluated at a shorter T with {rules}, or build it with '
                   f'horizon={data_horizon}')
        else:
            fix = (f'{cls.__name__} plans only the horizon it was built for: train and '
                   f'test a model with horizon={data_horizon}')
        return (f'horizon mismatch: the data has T={data_horizon} but the model was built for '
                f'horizon={model_horizon}; {fix}')

    def parse_losses(self, losses):
        """mmengine's, refusing a loss that is not finite before anything is updated
        (:func:`check_finite_loss`): no optimizer step, no checkpoint of NaN weights."""
        from mmengine.logging import MessageHub
        loss, log_vars = super().parse_losses(losses)
        if not isinstance(loss, torch.Tensor):  # no 'loss' term: an AttributeError on int 0
            weights = getattr(self, 'loss_weights', None)
            raise ValueError(f'{type(self).__name__}: the training loss has no term (the model '
                             f'returned {sorted(losses)}, none named loss*)'
                             + (f'; model.loss_weights={dict(weights)} are all 0'
                                if weights is not None else '')
                             + ': nothing would be learned; expected a loss weight > 0')
        step = MessageHub.get_current_instance().get_info('iter')
        check_finite_loss(loss, f'{type(self).__name__}: the training loss' + (
            f' at iteration {step + 1}' if step is not None else ''), log_vars)
        return loss, log_vars

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        raise ValueError(f"{type(self).__name__} has no trainable parameters (mode='loss'); "
                         "evaluate it with mode='predict' (tools/test.py without a "
                         'checkpoint; run_protocol: train=False)')

    def tensor(self, inputs, horizon: int, data_samples=None) -> torch.Tensor:
        """The model's tensor output for the batch; ``data_samples`` (their ``index``) seed a
        stochastic planner's draws as in ``predict`` (the scores behind its plans)."""
        raise NotImplementedError

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        raise NotImplementedError


class NonFiniteLossError(ValueError):
    """A training loss is NaN or infinite: the run stops before the optimizer step."""


@contextlib.contextmanager
def named_overflow(inputs: Dict[str, torch.Tensor]):
    """A decoder's refusal of non-finite emissions computed from finite observations says so,
    with the observations' largest magnitude (features far off the trained scale overflow)."""
    from vpn_plugin.core.viterbi import NonFiniteValues
    try:
        yield
    except NonFiniteValues as error:
        tensors = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)
                   and v.is_floating_point()}
        if not all(bool(torch.isfinite(v).all()) for v in tensors.values()):
            raise
        largest = max((float(v.abs().max()) for v in tensors.values() if v.numel()), default=0)
        raise ValueError(
            f'{error}: the model computed them from finite observations ({", ".join(tensors)}; '
            f'largest |value| {largest:.3g}): observations this far off the scale the model '
            'was trained on overflow the network; expected features of the training data\'s '
            'scale (same extraction and normalisation)') from error


@contextlib.contextmanager
def named_divergence(model, inputs: Dict[str, torch.Tensor]):
    """A decoder's refusal of non-finite values computed in training from finite observations
    says so, with the step and the model's largest weight (weight_decay=1e9 scaled every
    weight by -9e5 in the first optimizer step; the next step ended in "log_emissions holds
    NaN or +inf values", naming no cause)."""
    from vpn_plugin.core.viterbi import NonFiniteValues
    try:
        yield
    except NonFiniteValues as error:
        if not all(bool(torch.isfinite(v).all()) for v in inputs.values()
                   if isinstance(v, torch.Tensor) and v.is_floating_point()):
            raise
        from mmengine.logging import MessageHub
        step = MessageHub.get_current_instance().get_info('iter')
        at = f' at iteration {step + 1}' if step is not None else ''
        largest = max(((float(p.detach().abs().max()), name)
                       for name, p in model.named_parameters() if p.numel()), default=(0, '-'))
        raise NonFiniteLossError(
            f'{type(model).__name__}: training{at}: {error}, computed from finite observations; '
            f'the largest |weight| is {largest[0]:.3g} ({largest[1]}): the optimizer steps '
            'before diverged (a learning rate or optim_wrapper.optimizer.weight_decay so large '
            'that a step overshoots); training stopped, no checkpoint is written from here; '
            'fix the setting and start again') from error


def check_finite_loss(loss: torch.Tensor, what: str, terms: Optional[dict] = None) -> None:
    """``loss`` must be finite; else :class:`NonFiniteLossError` naming ``what`` (the loss
    and its step) and the loss ``terms``, so that training stops with no weight updated by it
    and no checkpoint written after it."""
    if bool(torch.isfinite(loss.detach()).all()):
        return
    shown = ', '.join(f'{name}={float(torch.as_tensor(value).detach()):.4g}'
                      for name, value in (terms or {}).items())
    raise NonFiniteLossError(
        f'{what} is {float(loss.detach().float().sum()):g}'
        f'{f" ({shown})" if shown else ""}: training stopped before this step updated any '
        'weight; no checkpoint is written from here. A setting that makes the loss not finite '
        '(a NaN or negative loss weight, a learning rate so large the run diverges) or '
        'non-finite input features; fix it and start again')


def num_parameters(model) -> int:
    """Parameters (trainable or frozen) of a model, or of a wrapper's ``module``; buffers
    excluded, and so are the submodules a model names in ``counted_apart`` (dotted names; PDPP's
    task classifier, which the paper does not count)."""
    model = getattr(model, 'module', model)
    apart = {id(p) for name in getattr(model, 'counted_apart', ())
             for p in model.get_submodule(name).parameters()}
    return int(sum(p.numel() for p in model.parameters() if id(p) not in apart))


def task_fields(logits: torch.Tensor, softmax: bool = True) -> dict:
    """``pred_task`` (B,), the argmax of a task head's outputs (B, K), and ``pred_task_score``
    (B,), its softmax probability (``softmax``) or its raw output."""
    task = logits.argmax(-1)
    scores = logits.softmax(-1) if softmax else logits
    return dict(pred_task=task, pred_task_score=scores.gather(-1, task[:, None])[:, 0])


def check_loss_terms(loss_weights: Optional[dict], terms) -> None:
    """``model.loss_weights`` may only name the model's loss ``terms``, each weighted by a
    finite number >= 0 (a NaN or negative weight would train on a NaN or reversed loss)."""
    if loss_weights is not None and not isinstance(loss_weights, dict):  # 0 would read as None
        raise ValueError(f'model.loss_weights={loss_weights!r}; expected a dict '
                         f'{{term: weight}} with terms among {tuple(terms)}, or None')
    unknown = set(loss_weights or {}) - set(terms)
    if unknown:
        raise ValueError(f'model.loss_weights has unknown terms {sorted(unknown)}; '
                         f'expected keys among {tuple(terms)}')
    check_numbers(dict(loss_weights or {}), 'model.loss_weights.', low=0)


def pack_samples(fields: dict, data_samples) -> List[ActionDataSample]:
    """One ``ActionDataSample`` per row of ``fields`` (tensors with a leading batch axis B;
    ``metainfo``: a list of B dicts) plus the batch's ground truth; every tensor is a
    contiguous copy (a pickled sample holds its own data, never a view of the batch)."""
    data_samples = data_samples or {}
    fields = dict(fields)
    metainfo = fields.pop('metainfo', None)
    results = []
    for i in range(len(fields['pred_plan'])):
        sample = ActionDataSample()
        for name, values in fields.items():
            setattr(sample, name, values[i].clone())
        for key, name in TRUTH_FIELDS:
            if key in data_samples:
                setattr(sample, name, data_samples[key][i].clone())
        if metainfo is not None:
            sample.set_metainfo(metainfo[i])
        results.append(sample)
    return results


def plans_read_pkg(model_cfg) -> bool:
    """Whether the plans of the planner a model config builds read its PKG
    (``BasePlanner.plans_read_pkg``); True for anything else (no planner type, a dict)."""
    from collections.abc import Mapping
    from mmaction.registry import MODELS
    kind = model_cfg.get('type') if isinstance(model_cfg, Mapping) else None
    model_class = MODELS.get(kind) if isinstance(kind, str) else None
    return not (isinstance(model_class, type) and issubclass(model_class, BasePlanner)) or \
        model_class.plans_read_pkg(model_cfg)


def unread_pkg_note(model_cfg) -> Optional[str]:
    """What a results row and the log say of a model config whose plans do not read the PKG
    (``plans_read_pkg``) while its ``model.pkg`` changes options (``changed_pkg_options``):
    those options change nothing in its plans, so a PKG-study row of it measures no effect.
    None otherwise (the default configs: a PKG counted for the record, nothing changed)."""
    from collections.abc import Mapping
    if not isinstance(model_cfg, Mapping) or plans_read_pkg(model_cfg):
        return None
    changed = changed_pkg_options(model_cfg.get('pkg'))
    if not changed:
        return None
    decode = f" (decode={model_cfg.get('decode')!r})" if 'decode' in model_cfg else ''
    return (f"{model_cfg['type']}{decode} plans without the PKG: model.pkg options "
            f"{', '.join(changed)} change nothing in its plans (the graph is counted for the "
            'record only)')

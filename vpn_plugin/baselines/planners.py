"""Baselines next to ViterbiPlanNet (registered in MMAction2's MODELS).

* ``PKGBeamSearchPlanner``: a step model on the start/goal observations predicts the first and
  the last action; a beam search over the PKG finds the most probable path between them (a
  window without such a path of T steps has no plan: ``core.metrics.NO_PLAN``, scored 0). The
  step model is the paper's, PDPP's U-Net with task conditioning trained on the first and last
  actions (``PDPPDiffusion(middle_actions=False)``, the ViterbiPlanNet authors'
  ``step_models/Diffusion_based_with_task``; the paper configs' default), or this plugin's
  small MLP (``EndpointMLP``).
* ``UniformEmissionPlanner``: Viterbi decoding through the PKG with uniform emissions (the plan
  the graph alone prefers; it ignores the observations). It has no parameters: evaluate it
  without training (``run_protocol`` does: ``train=False``), the PKG comes from ``PKGHook``.

Both are ``BasePlanner`` s: the PKG is built from ``model.pkg`` (``PKGHook`` fills it before
train/val/test), and both plan at the horizon of the data.
Shapes: B batch, D feature dim, H hidden dim, T horizon, N actions.
"""
from vpn_plugin.config_types import Count, DropoutRate, checked_arguments
from vpn_plugin.models.base_planner import ActionCount, Horizon
import math
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn

from mmaction.registry import MODELS

from .. import core
from ..core.beam_search import pkg_beam_search
from ..models.base_planner import BasePlanner
from ..models.state_encoder import check_observation_dim


@MODELS.register_module()
class EndpointMLP(nn.Sequential):
    """Step model: an MLP on the concatenated start/goal observations -> logits of the first
    and the last action, trained with cross-entropy. 2D -> H -> GELU -> dropout -> 2N."""

    @checked_arguments(prefix='model.')
    def __init__(self, feature_dim: Count, num_actions: ActionCount, hidden_dim: Count = 256,
                 dropout: DropoutRate = 0.2):
        super().__init__(nn.Linear(2 * feature_dim, hidden_dim), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(hidden_dim, 2 * num_actions))
        self.num_actions, self.feature_dim = num_actions, feature_dim

    def endpoint_scores(self, inputs: Dict[str, torch.Tensor], data_samples=None) -> torch.Tensor:
        """Logits (B, 2, N) of the first and the last action."""
        check_observation_dim(type(self).__name__, inputs['start'], self.feature_dim)
        features = torch.cat([inputs['start'], inputs['goal']], -1)
        return self(features).view(-1, 2, self.num_actions)

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        """Cross-entropy of the first and the last action."""
        logits, plan = self.endpoint_scores(inputs), data_samples['plan']
        return dict(loss_first=F.cross_entropy(logits[:, 0], plan[:, 0]),
                    loss_last=F.cross_entropy(logits[:, 1], plan[:, -1]))


@MODELS.register_module()
class PKGBeamSearchPlanner(BasePlanner):
    """Step model (first/last action) + beam search over the PKG.

    Args:
        feature_dim: D of the start/goal observations.
        num_actions: N.
        horizon: T (the PDPP step model's horizon; default T when the batch carries no plan).
        step_model: config of the step model, given ``feature_dim``, ``num_actions`` (and
            ``horizon`` for ``PDPPDiffusion``): ``dict(type='PDPPDiffusion', num_tasks=K,
            middle_actions=False, ...)`` (the paper's, 41.87M at CrossTask; its task classifier
            is counted apart and trained first by ``TaskClassifierHook``) or
            ``dict(type='EndpointMLP', hidden_dim=256, dropout=0.2)`` (default; 0.86M).
        beam_width: prefixes kept per step of the beam search.
        pkg: ``PKGBuilder`` config of the graph (``BasePlanner``).
    """

    follows_data_horizon = True

    @checked_arguments(prefix='model.')
    def __init__(self, feature_dim: Count, num_actions: ActionCount, horizon: Horizon,
                 step_model: Optional[dict] = None, beam_width: Count = 10,
                 pkg: Optional[dict] = None, data_preprocessor: Optional[dict] = None):
        super().__init__(num_actions, horizon, pkg, data_preprocessor)
        self.beam_width = beam_width
        step_model = dict(step_model or dict(type='EndpointMLP'))
        given = dict(feature_dim=feature_dim, num_actions=num_actions, horizon=horizon)
        for key in [k for k in given if k in step_model and step_model[k] != given[k]]:
            # dict(step_model, feature_dim=...) below replaced it without a word
            raise ValueError(f'model.step_model.{key}={step_model[key]!r} contradicts model.'
                             f'{key}={given[key]!r}: the step model is built with the '
                             f"planner's {key}; leave model.step_model.{key} out")
        if step_model.get('type') == 'PDPPDiffusion':
            step_model.setdefault('horizon', horizon)
            self.counted_apart = ('step_model.task_head',)
        self.step_model = MODELS.build(dict(step_model, feature_dim=feature_dim,
                                            num_actions=num_actions))

    def step_logits(self, inputs: Dict[str, torch.Tensor], data_samples=None) -> torch.Tensor:
        """Scores (B, 2, N) of the first and the last action (the MLP's logits, or the action
        dims of the PDPP step model's sampled first and last steps)."""
        return self.step_model.endpoint_scores(inputs, data_samples)

    def tensor(self, inputs, horizon: int, data_samples=None) -> torch.Tensor:
        return self.step_logits(inputs, data_samples)

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        return self.step_model.loss(inputs, data_samples)

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        first, last = self.step_logits(inputs, data_samples).argmax(-1).unbind(-1)
        plans, scores = pkg_beam_search(self.log_transitions.cpu(), first.cpu(), last.cpu(),
                                        horizon, self.beam_width)
        # no PKG path of T steps from the first to the last action: no plan (scored 0)
        plans[~torch.isfinite(scores)] = core.NO_PLAN
        return dict(pred_plan=plans.to(first.device))


@MODELS.register_module()
class UniformEmissionPlanner(BasePlanner):
    """Viterbi decoding of uniform emissions through the PKG (no parameters, no observations).

    Args:
        num_actions: N.
        horizon: default T when the batch carries no ground-truth plan.
        pkg: ``PKGBuilder`` config of the graph (``BasePlanner``).
    """

    follows_data_horizon = True

    def tensor(self, inputs, horizon: int, data_samples=None) -> torch.Tensor:
        """Uniform log emissions (B, T', N)."""
        return torch.full((inputs['start'].shape[0], horizon, self.num_actions),
                          -math.log(self.num_actions), device=inputs['start'].device)

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        log_emissions = self.tensor(inputs, horizon)
        plans, _ = core.viterbi_decode(log_emissions, self.log_transitions)
        return dict(pred_plan=plans, emissions=log_emissions.exp())

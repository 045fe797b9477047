"""Baselines next to ViterbiPlanNet (registered in MMAction2's MODELS).

* ``PKGBeamSearchPlanner``: a step model on the start/goal observations predicts the first and
  the last action; a beam search over the PKG finds the most probable path between them.
* ``UniformEmissionPlanner``: Viterbi decoding through the PKG with uniform emissions (the plan
  the graph alone prefers; it ignores the observations). It has no parameters: evaluate it
  without training (``run_protocol`` does: ``train=False``), the PKG comes from ``PKGHook``.

Both are ``BasePlanner`` s: the PKG is built from ``model.pkg`` (``PKGHook`` fills it before
train/val/test), and both plan at the horizon of the data.
Shapes: B batch, D feature dim, H hidden dim, T horizon, N actions.
"""
import math
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn

from mmaction.registry import MODELS

from .. import core
from ..core.beam_search import pkg_beam_search
from ..models.base_planner import BasePlanner


@MODELS.register_module()
class PKGBeamSearchPlanner(BasePlanner):
    """Step model (first/last action) + beam search over the PKG.

    Args:
        feature_dim: D of the start/goal observations.
        num_actions: N.
        horizon: default T when the batch carries no ground-truth plan.
        hidden_dim: H of the step model (an MLP on the concatenated observations).
        dropout: of the step model.
        beam_width: prefixes kept per step of the beam search.
        pkg: ``PKGBuilder`` config of the graph (``BasePlanner``).
    """

    follows_data_horizon = True

    def __init__(self, feature_dim: int, num_actions: int, horizon: int, hidden_dim: int = 256,
                 dropout: float = 0.2, beam_width: int = 10, pkg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None):
        super().__init__(num_actions, horizon, pkg, data_preprocessor)
        self.beam_width = beam_width
        self.step_model = nn.Sequential(nn.Linear(2 * feature_dim, hidden_dim), nn.GELU(),
                                        nn.Dropout(dropout), nn.Linear(hidden_dim, 2 * num_actions))

    def step_logits(self, inputs: Dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits (B, 2, N) of the first and the last action."""
        features = torch.cat([inputs['start'], inputs['goal']], -1)
        return self.step_model(features).view(-1, 2, self.num_actions)

    def tensor(self, inputs, horizon: int) -> torch.Tensor:
        return self.step_logits(inputs)

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        """Cross-entropy of the first and the last action."""
        logits, plan = self.step_logits(inputs), data_samples['plan']
        return dict(loss_first=F.cross_entropy(logits[:, 0], plan[:, 0]),
                    loss_last=F.cross_entropy(logits[:, 1], plan[:, -1]))

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        logits = self.step_logits(inputs)
        first, last = logits.argmax(-1).unbind(-1)
        plans, _ = pkg_beam_search(self.log_transitions.cpu(), first.cpu(), last.cpu(),
                                   horizon, self.beam_width)
        return dict(pred_plan=plans.to(logits.device))


@MODELS.register_module()
class UniformEmissionPlanner(BasePlanner):
    """Viterbi decoding of uniform emissions through the PKG (no parameters, no observations).

    Args:
        num_actions: N.
        horizon: default T when the batch carries no ground-truth plan.
        pkg: ``PKGBuilder`` config of the graph (``BasePlanner``).
    """

    follows_data_horizon = True

    def tensor(self, inputs, horizon: int) -> torch.Tensor:
        """Uniform log emissions (B, T', N)."""
        return torch.full((inputs['start'].shape[0], horizon, self.num_actions),
                          -math.log(self.num_actions), device=inputs['start'].device)

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        log_emissions = self.tensor(inputs, horizon)
        plans, _ = core.viterbi_decode(log_emissions, self.log_transitions)
        return dict(pred_plan=plans, emissions=log_emissions.exp())

"""Baselines next to ViterbiPlanNet (registered in MMAction2's MODELS).

* ``PKGBeamSearchPlanner``: a step model on the start/goal observations predicts the first and
  the last action; a beam search over the PKG finds the most probable path between them.
* ``UniformEmissionPlanner``: Viterbi decoding through the PKG with uniform emissions (the plan
  the graph alone prefers; it ignores the observations). It has no parameters: evaluate it
  without training (``run_protocol`` does: ``train=False``), the PKG comes from ``PKGHook``.

Both hold the PKG in the buffer ``log_transitions`` (N, N) that ``PKGHook`` fills through
``set_transitions``, exactly as ``ViterbiPlanNet``.
Shapes: B batch, D feature dim, H hidden dim, T horizon, N actions.
"""
import math
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from torch import nn

from mmaction.registry import MODELS
from mmaction.structures import ActionDataSample

from .. import core
from ..core.beam_search import pkg_beam_search
from ..models.viterbi_plan_net import ViterbiPlanNet


class _PKGPlanner(BaseModel):
    """Shared PKG buffer and prediction packing of the baseline planners."""

    set_transitions = ViterbiPlanNet.set_transitions  # one implementation of installing a PKG

    def __init__(self, num_actions: int, horizon: int, data_preprocessor: Optional[dict] = None):
        super().__init__(data_preprocessor=data_preprocessor)
        if num_actions < 1 or horizon < 1:
            raise ValueError(f'num_actions={num_actions} and horizon={horizon} must be >= 1')
        self.num_actions, self.horizon = num_actions, horizon
        self.register_buffer('log_transitions',
                             torch.full((num_actions, num_actions), -math.log(num_actions)))

    def _horizon_of(self, data_samples) -> int:
        if data_samples and 'plan' in data_samples:
            return data_samples['plan'].shape[-1]
        return self.horizon

    @staticmethod
    def _pack(plans: torch.Tensor, data_samples, **fields) -> List[ActionDataSample]:
        """One ``ActionDataSample`` per plan (T,) with ``pred_plan``, ``gt_plan`` and extras."""
        data_samples = data_samples or {}
        results = []
        for i, plan in enumerate(plans):
            sample = ActionDataSample()
            sample.pred_plan = plan
            for name, values in fields.items():
                setattr(sample, name, values[i])
            for field, key in (('gt_plan', 'plan'), ('gt_task', 'task'), ('sample_idx', 'index')):
                if key in data_samples:
                    setattr(sample, field, data_samples[key][i])
            results.append(sample)
        return results


@MODELS.register_module()
class PKGBeamSearchPlanner(_PKGPlanner):
    """Step model (first/last action) + beam search over the PKG.

    Args:
        feature_dim: D of the start/goal observations.
        num_actions: N.
        horizon: default T when the batch carries no ground-truth plan.
        hidden_dim: H of the step model (an MLP on the concatenated observations).
        dropout: of the step model.
        beam_width: prefixes kept per step of the beam search.
    """

    def __init__(self, feature_dim: int, num_actions: int, horizon: int, hidden_dim: int = 256,
                 dropout: float = 0.2, beam_width: int = 10,
                 data_preprocessor: Optional[dict] = None):
        super().__init__(num_actions, horizon, data_preprocessor)
        self.beam_width = beam_width
        self.step_model = nn.Sequential(nn.Linear(2 * feature_dim, hidden_dim), nn.GELU(),
                                        nn.Dropout(dropout), nn.Linear(hidden_dim, 2 * num_actions))

    def step_logits(self, inputs: Dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits (B, 2, N) of the first and the last action."""
        features = torch.cat([inputs['start'], inputs['goal']], -1)
        return self.step_model(features).view(-1, 2, self.num_actions)

    def forward(self, inputs, data_samples=None, mode: str = 'tensor'):
        logits = self.step_logits(inputs)
        if mode == 'tensor':
            return logits
        if mode == 'loss':
            plan = data_samples['plan']
            return dict(loss_first=F.cross_entropy(logits[:, 0], plan[:, 0]),
                        loss_last=F.cross_entropy(logits[:, 1], plan[:, -1]))
        if mode == 'predict':
            return self.predict(logits, data_samples)
        raise ValueError(f"forward mode={mode!r} is unknown; expected 'loss', 'predict' or "
                         "'tensor'")

    @torch.no_grad()
    def predict(self, logits: torch.Tensor, data_samples) -> List[ActionDataSample]:
        first, last = logits.argmax(-1).unbind(-1)
        plans, _ = pkg_beam_search(self.log_transitions.cpu(), first.cpu(), last.cpu(),
                                   self._horizon_of(data_samples), self.beam_width)
        return self._pack(plans.to(logits.device), data_samples)


@MODELS.register_module()
class UniformEmissionPlanner(_PKGPlanner):
    """Viterbi decoding of uniform emissions through the PKG (no parameters, no observations).

    Args:
        num_actions: N.
        horizon: default T when the batch carries no ground-truth plan.
    """

    def forward(self, inputs, data_samples=None, mode: str = 'tensor'):
        batch = inputs['start'].shape[0]
        log_emissions = torch.full((batch, self._horizon_of(data_samples), self.num_actions),
                                   -math.log(self.num_actions), device=inputs['start'].device)
        if mode == 'tensor':
            return log_emissions
        if mode == 'predict':
            plans, _ = core.viterbi_decode(log_emissions, self.log_transitions)
            return self._pack(plans, data_samples,
                              emissions=log_emissions.exp())
        raise ValueError(f"UniformEmissionPlanner has no parameters to train (mode={mode!r}); "
                         "evaluate it with mode='predict' (run_protocol: train=False)")

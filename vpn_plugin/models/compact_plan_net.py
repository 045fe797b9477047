"""CompactPlanNet: this plugin's earlier, smaller planner (0.63M parameters at CrossTask T=3).

A step-query transformer emission network + DVL over the PKG + a contrastive alignment of
start/goal with MiniLM state-description embeddings. It is NOT the paper's network (that is
``ViterbiPlanNet``); it stays as a named alternative (configs ``configs/compact/``).

Shapes: B batch, D feature dim, E embed dim, T horizon, N actions, K tasks,
S state sentences per action, Dt text-embedding dim.
"""
from vpn_plugin.config_types import (Count, DropoutRate, Positive, NonNegative, Text,
                                     checked_arguments)
import math
from typing import Dict, List, Literal, Optional

import torch
import torch.nn.functional as F
from torch import nn

from mmaction.registry import MODELS

from .. import core
from ..errors import check_choice
from .base_planner import ActionCount, Horizon, BasePlanner, check_loss_terms, task_fields
from .pretrained_encoder import init_visual_encoder
from .text_embeddings import taxonomy_state_embeddings
from .viterbi_plan_net import DECODE_MODES

CROSS_HORIZON_MODES = (None, 'ends', 'spread')
LOSS_TERMS = ('plan', 'align', 'task')
EPS = 1e-8


def horizon_queries(train_horizon: int, eval_horizon: int, mode: Optional[str]) -> List[int]:
    """Step queries of a model trained at ``train_horizon`` used for ``eval_horizon`` steps.

    'ends': the first ``eval_horizon - 1`` queries and the last one (the start observation
    determines the first step, the goal observation the last one); 'spread': evenly spaced
    queries from first to last.
    """
    if eval_horizon == train_horizon:
        return list(range(train_horizon))
    if mode is None or eval_horizon > train_horizon or eval_horizon < 2:
        raise ValueError(
            f'horizon mismatch: the data has T={eval_horizon} but the model was built for '
            f'horizon={train_horizon}; set model.cross_horizon to one of '
            f"{CROSS_HORIZON_MODES[1:]} to evaluate a longer-horizon model on 2 <= T < "
            f'{train_horizon}, or build the model with horizon={eval_horizon}')
    if mode == 'ends':
        return list(range(eval_horizon - 1)) + [train_horizon - 1]
    return [round(i * (train_horizon - 1) / (eval_horizon - 1)) for i in range(eval_horizon)]


def mlp(in_dim: int, hidden_dim: int, out_dim: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(hidden_dim, out_dim))


@MODELS.register_module()
class CompactPlanNet(BasePlanner):
    """Procedure planner: per-step emissions decoded through the PKG (module docstring).

    Args:
        feature_dim: D of the start/goal observations.
        num_actions: N.
        num_tasks: K.
        horizon: T the emission head is built for.
        embed_dim: E.
        num_layers, num_heads: of the transformer encoder of the emission head.
        dropout: in the visual encoder, transformer and MLP heads.
        use_dvl: plan loss on the DVL soft plan (ViterbiPlanNet) or on the emissions (Base Model).
        decode: inference decoding, one of ``DECODE_MODES``.
        dvl_temperature: temperature of the DVL's soft max.
        dvl_layers: stacked DVL layers (the paper uses 2 for COIN T=6); layer k+1 decodes
            log(soft plan of layer k) through the same PKG.
        loss_weights: weight of 'plan', 'align', 'task'; 0 switches a term off.
        text_embeddings: ``dict(taxonomy, state_descriptions, encoder=None,
            cache_dir='data/text_cache', allow_encode=True)``; required when the align weight > 0.
        align_temperature: of the contrastive alignment logits.
        freeze_visual: freeze the visual encoder (sample-efficiency study; needs
            ``init_visual_from``).
        init_visual_from: checkpoint of a planner whose visual encoder is loaded
            (``pretrained_encoder.py``).
        cross_horizon: how a shorter evaluation horizon selects step queries (see
            ``horizon_queries``); None makes a horizon mismatch an error.
        pkg: ``PKGBuilder`` config of the graph (``BasePlanner``).
        data_preprocessor: mmengine data preprocessor config.
    """
    default_loss_weights = dict.fromkeys(LOSS_TERMS, 1.0)

    cross_horizon_modes = CROSS_HORIZON_MODES
    # the task head's softmax regresses one-hot targets; the plan does not use it
    task_source, task_score, plan_uses_task = 'classifier', 'probability', False
    text_feature_buffers = ('state_before', 'state_after')
    text_loader = 'taxonomy_state_embeddings'

    @checked_arguments(prefix='model.')
    def __init__(self, feature_dim: Count, num_actions: ActionCount, num_tasks: ActionCount,
                 horizon: Horizon, embed_dim: Count = 128, num_layers: Count = 2,
                 num_heads: Count = 4, dropout: DropoutRate = 0.2, use_dvl: bool = True,
                 decode: Literal[DECODE_MODES] = 'dvl_viterbi', dvl_temperature: Positive = 1.0,
                 dvl_layers: Count = 1, loss_weights: Optional[Dict[str, NonNegative]] = None,
                 text_embeddings: Optional[dict] = None, align_temperature: Positive = 0.1,
                 freeze_visual: bool = False, cross_horizon: Literal[CROSS_HORIZON_MODES] = None,
                 max_observed: Count = 8, init_visual_from: Optional[Text] = None,
                 pkg: Optional[dict] = None, data_preprocessor: Optional[dict] = None):
        super().__init__(num_actions, horizon, pkg, data_preprocessor)
        self.text_source = text_embeddings  # what text_features_identity records
        self._check_text_source(loss_weights, text_embeddings)
        if embed_dim % num_heads:  # torch's assertion named neither option
            raise ValueError(f'model.embed_dim={embed_dim} with num_heads={num_heads}; expected '
                             'an embed_dim divisible by num_heads (each head gets embed_dim / '
                             'num_heads dimensions)')
        self.num_tasks = num_tasks
        self.feature_dim = feature_dim
        self.use_dvl, self.decode, self.cross_horizon = use_dvl, decode, cross_horizon
        self.dvl_temperature, self.align_temperature = dvl_temperature, align_temperature
        self.dvl_layers = dvl_layers
        self.loss_weights = self.loss_weights_of(loss_weights)
        if not self.loss_weights['task'] > 0:  # an untrained head predicts no task
            self.task_source = None
        self.visual_encoder = nn.Sequential(nn.Linear(feature_dim, embed_dim), nn.GELU(),
                                            nn.Dropout(dropout), nn.Linear(embed_dim, embed_dim))
        init_visual_encoder(self.visual_encoder, init_visual_from, freeze_visual,
                            type(self).__name__)
        # token types: 0 start, 1 goal, 2 observed, 3 step query
        self.token_type = nn.Embedding(4, embed_dim)
        self.step_position = nn.Embedding(max(horizon, max_observed + 1), embed_dim)
        layer = nn.TransformerEncoderLayer(embed_dim, num_heads, 2 * embed_dim, dropout,
                                           activation='gelu', batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.emission_head = mlp(embed_dim, 2 * embed_dim, num_actions, dropout)
        # Start the sigmoid emissions at the prior 1/N. From 0.5, the squared error of the N-1
        # negatives swamps the one positive and drives every logit into saturation, where the
        # positive's gradient (prop. to b(1-b)) vanishes: the Base Model (MSE on emissions)
        # collapsed to b ~ 0. The DVL sees log b, so for it this is ~ a constant shift.
        nn.init.constant_(self.emission_head[-1].bias, -math.log(max(num_actions - 1, 1)))
        self.task_head = mlp(2 * embed_dim, embed_dim, num_tasks, dropout)
        self._init_alignment(text_embeddings, embed_dim, num_actions)

    @staticmethod
    def _check_text_source(loss_weights, text_embeddings):
        check_loss_terms(loss_weights, LOSS_TERMS)
        if (loss_weights or {}).get('align', 1.0) > 0 and text_embeddings is None:
            raise ValueError('model.text_embeddings is missing but the alignment loss is on '
                             "(loss_weights['align'] > 0): give text_embeddings=dict(taxonomy=..., "
                             "state_descriptions=...) or set loss_weights=dict(align=0)")

    def _init_alignment(self, text_cfg: Optional[dict], embed_dim: int, num_actions: int):
        """Frozen state-text embeddings (N, S, Dt) and a projection of E into the text space."""
        if self.loss_weights['align'] <= 0:
            self.state_before = self.state_after = self.text_projection = None
            return
        before, after = taxonomy_state_embeddings(**text_cfg)
        if before.shape[0] != num_actions:
            raise ValueError(f"model.text_embeddings.taxonomy={text_cfg.get('taxonomy')!r} "
                             f'has {before.shape[0]} actions but num_actions={num_actions}')
        self.register_buffer('state_before', before, persistent=False)
        self.register_buffer('state_after', after, persistent=False)
        self.text_projection = nn.Linear(embed_dim, before.shape[-1])

    # ------------------------------------------------------------------ network
    def encode(self, inputs: Dict[str, torch.Tensor]):
        """Encoded start and goal (B, E) each, and encoded observed steps (B, k, E) or None."""
        if inputs['start'].shape[-1] != self.feature_dim:
            raise ValueError(f"observation dim {inputs['start'].shape[-1]} does not match "
                             f'model.feature_dim={self.feature_dim} (concat3 features are '
                             '3x512=1536-d, mean3 512-d); set model.feature_dim accordingly')
        start = self.visual_encoder(inputs['start'])
        goal = self.visual_encoder(inputs['goal'])
        observed = inputs.get('observed')
        if observed is not None and observed.shape[1] > 0:
            return start, goal, self.visual_encoder(observed)
        return start, goal, None

    def emissions(self, start, goal, observed=None, horizon: Optional[int] = None):
        """Emission probabilities b (B, T, N) in (0, 1) for ``horizon`` (default: model's) steps."""
        steps = horizon_queries(self.horizon, horizon or self.horizon, self.cross_horizon)
        batch, device = start.shape[0], start.device
        step_ids = torch.tensor(steps, device=device)
        queries = (self.token_type.weight[3] + self.step_position(step_ids)).expand(batch, -1, -1)
        tokens = [start + self.token_type.weight[0], goal + self.token_type.weight[1]]
        tokens = torch.stack(tokens, 1)
        if observed is not None:
            position = self.step_position(torch.arange(1, observed.shape[1] + 1, device=device))
            tokens = torch.cat([tokens, observed + self.token_type.weight[2] + position], 1)
        encoded = self.transformer(torch.cat([tokens, queries], 1))
        return torch.sigmoid(self.emission_head(encoded[:, -len(steps):]))

    def soft_plan(self, emissions: torch.Tensor) -> torch.Tensor:
        """DVL soft plan (B, T, N) of emissions (B, T, N) through the PKG."""
        soft, _ = core.differentiable_viterbi(torch.log(emissions.clamp(min=EPS)),
                                              self.log_transitions,
                                              temperature=self.dvl_temperature,
                                              num_layers=self.dvl_layers)
        return soft

    # ------------------------------------------------------------------ forward
    def tensor(self, inputs, horizon: int, data_samples=None) -> torch.Tensor:
        """Emission probabilities (B, T', N)."""
        return self.emissions(*self.encode(inputs), horizon)

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        """Weighted losses; a term with weight 0 is not computed."""
        start, goal, observed = self.encode(inputs)
        emissions = self.emissions(start, goal, observed)
        plan, task = data_samples['plan'], data_samples['task']
        losses = {}
        if self.loss_weights['plan'] > 0:
            target = F.one_hot(plan, self.num_actions).to(emissions.dtype)
            predicted = self.soft_plan(emissions) if self.use_dvl else emissions
            losses['loss_plan'] = self.loss_weights['plan'] * squared_error(predicted, target)
        if self.loss_weights['task'] > 0:
            task_prob = self.task_head(torch.cat([start, goal], -1)).softmax(-1)
            target = F.one_hot(task, self.num_tasks).to(task_prob.dtype)
            losses['loss_task'] = self.loss_weights['task'] * squared_error(task_prob, target)
        if self.loss_weights['align'] > 0:
            align = (self.alignment_loss(start, self.state_before, plan[:, 0])
                     + self.alignment_loss(goal, self.state_after, plan[:, -1]))
            losses['loss_align'] = self.loss_weights['align'] * align / 2
        return losses

    def alignment_loss(self, visual: torch.Tensor, states: torch.Tensor,
                       actions: torch.Tensor) -> torch.Tensor:
        """Multi-positive contrastive CE between visual (B, E) and all states (N, S, Dt).

        The positives of sample b are the S sentences of action ``actions[b]``.
        """
        num_actions, num_states, _ = states.shape
        visual = F.normalize(self.text_projection(visual), dim=-1)
        logits = visual @ states.flatten(0, 1).t() / self.align_temperature  # (B, N*S)
        logits = logits.view(-1, num_actions, num_states)
        positive = logits[torch.arange(len(actions), device=logits.device), actions]  # (B, S)
        return (logits.flatten(1).logsumexp(-1) - positive.logsumexp(-1)).mean()

    @torch.no_grad()
    def decode_plan(self, emissions: torch.Tensor, soft_plan: Optional[torch.Tensor] = None,
                    mode: Optional[str] = None) -> torch.Tensor:
        """Plans (B, T) long from emissions (B, T, N) by ``mode`` (default: ``self.decode``)."""
        mode = mode or self.decode
        check_choice('decode mode', mode, DECODE_MODES)
        scores = emissions
        if mode.startswith('dvl'):
            scores = self.soft_plan(emissions) if soft_plan is None else soft_plan
        if mode.endswith('argmax'):
            return scores.argmax(-1)
        paths, _ = core.viterbi_decode(torch.log(scores.clamp(min=EPS)), self.log_transitions)
        return paths

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        """Plans, soft plans and emissions (B, T', N), tasks (B,)."""
        start, goal, observed = self.encode(inputs)
        emissions = self.emissions(start, goal, observed, horizon)
        soft = self.soft_plan(emissions)
        return dict(pred_plan=self.decode_plan(emissions, soft), soft_plan=soft,
                    emissions=emissions,
                    **(task_fields(self.task_head(torch.cat([start, goal], -1)))
                       if self.task_source else {}))


def squared_error(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """MSE summed over the class axis and averaged over the rest: (..., C) -> ().

    With one-hot targets an element-wise mean would divide by C (133-778 actions) and make the
    plan loss negligible next to the alignment loss.
    """
    return (predicted - target).pow(2).sum(-1).mean()

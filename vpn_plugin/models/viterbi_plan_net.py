"""ViterbiPlanNet exactly as the authors' released code computes it (Gigi-G/ViterbiPlanNet).

Shapes: B batch, D observation dim (1536), Dt text dim (768), E embed dim, T training
horizon, T' evaluated horizon, N actions, K tasks.

Network (names of the authors' modules in brackets, see ``AUTHORS_PREFIXES``):
* visual encoder [state_encoder.state_encoder]: dropout 0.4, Linear(D, 2D) -> Linear(2D, E),
  no activation between, on the start and goal observations;
* text encoder [state_encoder.desc_encoder]: dropout 0.4, Linear(Dt, E, bias=False) on the
  CLIP features of the state descriptions (N, 6, Dt): slots 0-2 "before", 3-5 "after";
* state logits: exp(logit_scale) x cosine(visual, text), averaged over the 3 sentences;
* emission encoder [viterbi_plan.encoder]: 1-layer 1-head transformer encoder (feed-forward
  mlp_ratio*E, GELU, final LayerNorm) over [start, goal]; emission head
  [viterbi_plan.projection_mlp]: Linear(2E, mlp_ratio*E) -> Sigmoid -> Dropout ->
  Linear(mlp_ratio*E, T*N); log-sigmoid = log emissions (B, T, N);
* task head [task_decoder]: Linear(2E, E) -> GELU -> Dropout -> Linear(E, K);
* DVL: transitions clamped at 1e-10 and rows renormalised (an unobserved row becomes
  uniform), uniform prior; the first DVL over the log emissions gives the soft plan, a second
  DVL over log(soft plan) gives the authors' "viterbi-DVL" decoding, and the hard Viterbi
  over the soft plan with the raw PKG gives their "viterbi-DVL+VD" decoding.
"""
import math
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from torch import nn

from mmaction.registry import MODELS

from .. import core
from .base_planner import BasePlanner, check_choice, check_loss_terms, num_parameters
from .pretrained_encoder import init_visual_encoder
from .text_embeddings import load_state_features

# Decoding of a plan, each with the authors' name of the same output (README "Decoding"):
#   emission_argmax  argmax of the log emissions
#   emission_viterbi hard Viterbi over the emissions with the raw PKG
#   dvl_argmax       argmax of the second DVL over the soft plan   (authors: "viterbi-DVL")
#   dvl_viterbi      hard Viterbi over the soft plan with the raw PKG ("viterbi-DVL+VD")
DECODE_MODES = ('emission_argmax', 'emission_viterbi', 'dvl_argmax', 'dvl_viterbi')
LOSS_TERMS = ('state', 'plan', 'task')
CROSS_HORIZON_MODES = (None, 'repeat_last')
CLAMP = 1e-10  # the authors' floor of transition and soft-plan probabilities
INIT_LOGIT_SCALE = math.log(1 / 0.07)

# authors' parameter-name prefix -> this module's
AUTHORS_PREFIXES = {
    'state_encoder.logit_scale': 'logit_scale',
    'state_encoder.state_encoder.': 'visual_encoder.',
    'state_encoder.desc_encoder.': 'text_encoder.',
    'task_decoder.': 'task_head.',
    'viterbi_plan.encoder.': 'emission_encoder.',
    'viterbi_plan.projection_mlp.': 'emission_head.',
}


def plugin_name(authors_name: str) -> str:
    """This module's parameter name of one of the authors' parameter names."""
    for prefix, ours in AUTHORS_PREFIXES.items():
        if authors_name.startswith(prefix):
            return ours + authors_name[len(prefix):]
    raise KeyError(f'parameter {authors_name!r} is not one of the authors\' ProcedureModel; '
                   f'expected a name starting with one of {sorted(AUTHORS_PREFIXES)}')


def repeat_last_emission(log_emissions: torch.Tensor, eval_horizon: int) -> torch.Tensor:
    """The authors' cross-horizon rule on (B, T, N): keep the first T'-1 steps, then repeat
    the last (goal) step T-T'+1 times; the result is again (B, T, N)."""
    horizon = log_emissions.shape[1]
    if eval_horizon >= horizon:
        return log_emissions
    last = log_emissions[:, -1:].expand(-1, horizon - eval_horizon + 1, -1)
    return torch.cat([log_emissions[:, :eval_horizon - 1], last], 1)


class LinearPair(nn.Sequential):
    """``Linear(D, H) -> Linear(H, E)`` with no activation between (the authors' visual
    encoder; parameters ``0.weight``, ``0.bias``, ``1.weight``, ``1.bias``).

    The pair is one affine map, ``W2 (W1 x + b1) + b2``. For more than E input rows it is
    applied as ``x (W2 W1)^T + (W2 b1 + b2)``: forming ``W2 W1`` (E, D) and its gradients costs
    E*H*D whatever the batch, against rows*H*(D+E) for the two products (at B=256, 512 rows:
    ~4x fewer operations, forward and backward). Same map, same gradients, float rounding aside.
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int):
        super().__init__(nn.Linear(in_dim, hidden_dim), nn.Linear(hidden_dim, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = self[0], self[1]
        if x.numel() // x.shape[-1] <= second.out_features:
            return second(first(x))
        return F.linear(x, second.weight @ first.weight,
                        torch.addmv(second.bias, second.weight, first.bias))


@MODELS.register_module()
class ViterbiPlanNet(BasePlanner):
    """The paper's procedure planner (module docstring).

    Args:
        num_actions, num_tasks: N, K.
        horizon: T the emission head is built for.
        feature_dim: D of the start/goal observations (3 x 512 concatenated frames).
        text_dim: Dt of the state-description features.
        embed_dim: E.
        mlp_ratio: hidden width of the feed-forward and emission MLP, in units of E.
        dropout: of the transformer, emission head and task head.
        input_dropout: of the visual and text inputs (the authors' 0.4).
        text_embeddings: where the (N, 6, Dt) state features come from (see
            ``load_state_features``); required when the state loss weight is > 0.
        use_dvl: the plan loss supervises the DVL's soft plan (True) or the emission
            probabilities (False: the paper's Base Model).
        decode: one of ``DECODE_MODES``.
        loss_weights: weight of 'state', 'plan', 'task' (1 each; 0 switches a term off).
        cross_horizon: None (a data horizon != T is an error) or 'repeat_last' (the authors'
            rule for evaluating at T' < T, see ``repeat_last_emission``).
        freeze_visual: freeze the visual encoder (sample-efficiency study; needs
            ``init_visual_from``).
        init_visual_from: checkpoint of a planner whose visual encoder is loaded (the
            sample-efficiency study's pre-trained encoder, ``pretrained_encoder.py``).
        pkg: ``PKGBuilder`` config of the graph (``BasePlanner``).
    """

    cross_horizon_modes = CROSS_HORIZON_MODES

    def __init__(self, num_actions: int, num_tasks: int, horizon: int, feature_dim: int = 1536,
                 text_dim: int = 768, embed_dim: int = 128, mlp_ratio: int = 2,
                 dropout: float = 0.2, input_dropout: float = 0.4,
                 text_embeddings: Optional[dict] = None, use_dvl: bool = True,
                 decode: str = 'dvl_viterbi', loss_weights: Optional[Dict[str, float]] = None,
                 cross_horizon: Optional[str] = None, freeze_visual: bool = False,
                 init_visual_from: Optional[str] = None,
                 pkg: Optional[dict] = None, data_preprocessor: Optional[dict] = None):
        super().__init__(num_actions, horizon, pkg, data_preprocessor)
        self.loss_weights = {**dict(state=1.0, plan=1.0, task=1.0), **(loss_weights or {})}
        self._check_options(decode, cross_horizon, loss_weights, text_embeddings)
        self.num_tasks = num_tasks
        self.feature_dim, self.embed_dim = feature_dim, embed_dim
        self.use_dvl, self.decode, self.cross_horizon = use_dvl, decode, cross_horizon
        self.input_dropout = nn.Dropout(input_dropout)
        self.visual_encoder = LinearPair(feature_dim, 2 * feature_dim, embed_dim)
        init_visual_encoder(self.visual_encoder, init_visual_from, freeze_visual,
                            type(self).__name__)
        self.text_encoder = nn.Linear(text_dim, embed_dim, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(INIT_LOGIT_SCALE))
        self.task_head = nn.Sequential(nn.Linear(2 * embed_dim, embed_dim), nn.GELU(),
                                       nn.Dropout(dropout), nn.Linear(embed_dim, num_tasks))
        layer = nn.TransformerEncoderLayer(embed_dim, 1, mlp_ratio * embed_dim, dropout,
                                           activation='gelu', batch_first=True)
        self.emission_encoder = nn.TransformerEncoder(layer, 1, norm=nn.LayerNorm(embed_dim),
                                                      enable_nested_tensor=False)
        self.emission_head = nn.Sequential(
            nn.Linear(2 * embed_dim, mlp_ratio * embed_dim), nn.Sigmoid(), nn.Dropout(dropout),
            nn.Linear(mlp_ratio * embed_dim, horizon * num_actions))
        self._init_text(text_embeddings, text_dim)
        print_log(f'{type(self).__name__}: {num_parameters(self):,} parameters (N={num_actions},'
                  f' K={num_tasks}, T={horizon}, E={embed_dim})', logger='current')

    def _check_options(self, decode, cross_horizon, loss_weights, text_embeddings):
        check_choice('model.decode', decode, DECODE_MODES)
        check_choice('model.cross_horizon', cross_horizon, CROSS_HORIZON_MODES)
        check_loss_terms(loss_weights, LOSS_TERMS)
        if self.loss_weights['state'] > 0 and text_embeddings is None:
            raise ValueError('model.text_embeddings is missing but the state loss is on '
                             "(loss_weights['state'] > 0): give text_embeddings=dict(file="
                             "'<(N, 6, 768) .npy>') or set loss_weights=dict(state=0)")

    def _init_text(self, text_cfg: Optional[dict], text_dim: int):
        """Frozen state-description features (N, 6, Dt), or None without a state loss."""
        if text_cfg is None:
            self.state_features = None
            return
        features = load_state_features(**text_cfg)
        expected = (self.num_actions, 6, text_dim)
        if tuple(features.shape) != expected:
            raise ValueError(f'model.text_embeddings={dict(text_cfg)}: state features have '
                             f'shape {tuple(features.shape)}; expected {expected} '
                             '(num_actions, 3 before + 3 after sentences, text_dim)')
        self.register_buffer('state_features', features.float(), persistent=False)

    # ------------------------------------------------------------------ network
    def encode(self, inputs: Dict[str, torch.Tensor]) -> torch.Tensor:
        """Encoded [start, goal] (B, 2, E) of observations ``start``, ``goal`` (B, D)."""
        if inputs['start'].shape[-1] != self.feature_dim:
            raise ValueError(f"observation dim {inputs['start'].shape[-1]} does not match "
                             f'model.feature_dim={self.feature_dim} (the paper observes 3 '
                             'concatenated 512-d frames: 1536)')
        states = torch.stack([inputs['start'], inputs['goal']], 1)
        return self.visual_encoder(self.input_dropout(states))

    def state_logits(self, states: torch.Tensor) -> torch.Tensor:
        """(B, 2, N) scaled cosine similarity of start / goal (B, 2, E) with the "before" /
        "after" descriptions of each action, averaged over the 3 sentences."""
        text = self.text_encoder(self.input_dropout(self.state_features))  # (N, 6, E)
        text = text.view(self.num_actions, 2, -1, text.shape[-1]).transpose(0, 1)  # (2,N,3,E)
        similarity = torch.einsum('bse,sne->bsn', F.normalize(states, dim=-1),
                                  F.normalize(text, dim=-1).flatten(1, 2))
        similarity = similarity.view(*states.shape[:2], self.num_actions, -1).mean(-1)
        return self.logit_scale.exp() * similarity

    def log_emissions(self, states: torch.Tensor, eval_horizon: Optional[int] = None,
                      observed: Optional[torch.Tensor] = None):
        """(B, T, N) log emissions entering the DVL, rearranged for ``eval_horizon`` < T,
        times the evidence of the ``observed`` steps (:meth:`observed_evidence`)."""
        encoded = self.emission_encoder(states).flatten(1)
        logits = self.emission_head(encoded).view(len(states), self.horizon, self.num_actions)
        log_emissions = F.logsigmoid(logits)
        if observed is not None and observed.shape[1] > 0:
            log_emissions = log_emissions + self.observed_evidence(observed)
        return repeat_last_emission(log_emissions, eval_horizon or self.horizon)

    def observed_evidence(self, observed: torch.Tensor) -> torch.Tensor:
        """(B, T, N) log evidence of intermediate observations ``observed`` (B, k, D), the
        end states of steps 1..k (dataset ``observed_steps=k``): step i gets the log-softmax
        over actions of the state logits of its end state against the "after" descriptions
        (how the goal is scored against the last action), the later steps 0 (no evidence)."""
        if self.state_features is None:
            raise ValueError('intermediate observations (observed_steps > 0) are scored with '
                             'the state-description features, but model.text_embeddings is '
                             'None')
        batch, steps = observed.shape[:2]
        if steps >= self.horizon:
            raise ValueError(f'{steps} observed steps of a T={self.horizon} plan; expected '
                             f'fewer than {self.horizon}')
        encoded = self.visual_encoder(self.input_dropout(observed)).flatten(0, 1)  # (B*k, E)
        after = self.state_logits(encoded.unsqueeze(1).expand(-1, 2, -1))[:, 1]  # (B*k, N)
        evidence = after.view(batch, steps, -1).log_softmax(-1)
        return F.pad(evidence, (0, 0, 0, self.horizon - steps))

    def dvl_log_transitions(self) -> torch.Tensor:
        """(N, N) the authors' DVL transitions: PKG clamped at 1e-10, rows renormalised."""
        clamped = self.log_transitions.exp().clamp(min=CLAMP)
        return (clamped / clamped.sum(1, keepdim=True)).log()

    def soft_plan(self, log_emissions: torch.Tensor) -> torch.Tensor:
        """DVL soft plan (B, T, N) of log emissions (B, T, N)."""
        soft, _ = core.differentiable_viterbi(log_emissions, self.dvl_log_transitions())
        return soft

    def second_dvl(self, soft_plan: torch.Tensor) -> torch.Tensor:
        """(B, T, N): the DVL applied again to a soft plan read as emission probabilities."""
        return self.soft_plan(torch.log(soft_plan.clamp(min=CLAMP)))

    def hard_viterbi(self, probabilities: torch.Tensor) -> torch.Tensor:
        """(B, T) Viterbi path over emission probabilities (B, T, N) with the raw PKG."""
        tiny = torch.finfo(probabilities.dtype).tiny
        paths, _ = core.viterbi_decode(torch.log(probabilities.clamp(min=tiny)),
                                       self.log_transitions.to(probabilities.dtype))
        return paths

    def task_logits(self, states: torch.Tensor) -> torch.Tensor:
        """(B, K) raw task logits of encoded [start, goal] (B, 2, E)."""
        return self.task_head(states.flatten(1))

    # ------------------------------------------------------------------ forward
    def tensor(self, inputs, horizon: int) -> torch.Tensor:
        """Emission probabilities (B, T', N) of the first T' steps."""
        return self.log_emissions(self.encode(inputs), horizon,
                                  inputs.get('observed')).exp()[:, :horizon]

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        """Weighted losses over (B, T) plans; a term with weight 0 is not computed."""
        states = self.encode(inputs)
        log_emissions = self.log_emissions(states, None, inputs.get('observed'))
        return self.loss_terms(states, log_emissions, data_samples['plan'], data_samples['task'])

    def loss_terms(self, states, log_emissions, plan, task) -> Dict[str, torch.Tensor]:
        """The authors' losses: CE(state logits (2B, N), first and last actions), MSE mean over
        B*T*N (soft plan vs one-hot plan), MSE (raw task logits vs one-hot task)."""
        weights, losses = self.loss_weights, {}
        if weights['state'] > 0:
            logits = self.state_logits(states).flatten(0, 1)
            losses['loss_state'] = weights['state'] * F.cross_entropy(
                logits, plan[:, [0, -1]].flatten())
        if weights['plan'] > 0:
            predicted = self.soft_plan(log_emissions) if self.use_dvl else log_emissions.exp()
            target = F.one_hot(plan, self.num_actions).to(predicted.dtype)
            losses['loss_plan'] = weights['plan'] * F.mse_loss(predicted, target)
        if weights['task'] > 0:
            logits = self.task_logits(states)
            target = F.one_hot(task, self.num_tasks).to(logits.dtype)
            losses['loss_task'] = weights['task'] * F.mse_loss(logits, target)
        return losses

    @torch.no_grad()
    def decode_plan(self, log_emissions: torch.Tensor, soft_plan: Optional[torch.Tensor] = None,
                    mode: Optional[str] = None) -> torch.Tensor:
        """Plans (B, T) long from log emissions (B, T, N) by ``mode`` (default ``self.decode``)."""
        mode = mode or self.decode
        check_choice('decode mode', mode, DECODE_MODES)
        if mode == 'emission_argmax':
            return log_emissions.argmax(-1)
        if mode == 'emission_viterbi':
            return self.hard_viterbi(log_emissions.exp())
        soft_plan = self.soft_plan(log_emissions) if soft_plan is None else soft_plan
        if mode == 'dvl_argmax':
            return self.second_dvl(soft_plan).argmax(-1)
        return self.hard_viterbi(soft_plan)

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        """Plans, soft plans and emissions of the first T' = ``horizon`` steps, tasks."""
        states = self.encode(inputs)
        log_emissions = self.log_emissions(states, horizon, inputs.get('observed'))
        soft = self.soft_plan(log_emissions)
        plans = self.decode_plan(log_emissions, soft)
        return dict(pred_plan=plans[:, :horizon], soft_plan=soft[:, :horizon],
                    emissions=log_emissions[:, :horizon].exp(),
                    pred_task=self.task_logits(states).argmax(-1))

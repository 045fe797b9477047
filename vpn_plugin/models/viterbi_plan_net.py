"""ViterbiPlanNet exactly as the authors' released code computes it (Gigi-G/ViterbiPlanNet).

Shapes: B batch, D observation dim (1536), Dt text dim (768), E embed dim, T training
horizon, T' evaluated horizon, N actions, K tasks.

Network (names of the authors' modules in brackets, see ``AUTHORS_PREFIXES``):
* state encoder [state_encoder], the module SCHEMA shares (``state_encoder.StateEncoder``):
  dropout 0.4, Linear(D, 2D) -> Linear(2D, E), no activation between, on the start and goal
  observations; dropout 0.4, Linear(Dt, E, bias=False) on the CLIP features of the state
  descriptions (N, 6, Dt): slots 0-2 "before", 3-5 "after"; state logits:
  exp(logit_scale) x cosine(visual, text), averaged over the 3 sentences;
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
from typing import Annotated, Dict, Literal, Optional

from vpn_plugin.config_types import Count, DropoutRate, NonNegative, Text, Range, checked_arguments
import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from torch import nn

from mmaction.registry import MODELS

from .. import core
from ..errors import check_choice
from .base_planner import (ActionCount, BasePlanner, Horizon, check_loss_terms, num_parameters,
                           task_fields)
from .state_encoder import OFFICIAL_PREFIXES as STATE_ENCODER_PREFIXES
from .pretrained_encoder import init_visual_encoder
from .state_encoder import StateEncoder, rename_legacy_keys

# Decoding of a plan, each with the authors' name of the same output (README "Decoding"):
#   emission_argmax  argmax of the log emissions
#   emission_viterbi hard Viterbi over the emissions with the raw PKG
#   dvl_argmax       argmax of the second DVL over the soft plan   (authors: "viterbi-DVL")
#   dvl_viterbi      hard Viterbi over the soft plan with the raw PKG ("viterbi-DVL+VD")
DECODE_MODES = ('emission_argmax', 'emission_viterbi', 'dvl_argmax', 'dvl_viterbi')
LOSS_TERMS = ('state', 'plan', 'task')
CROSS_HORIZON_MODES = (None, 'repeat_last')
CLAMP = 1e-10  # the authors' floor of transition and soft-plan probabilities

# authors' parameter-name prefix -> this module's
AUTHORS_PREFIXES = {
    **STATE_ENCODER_PREFIXES,
    'task_decoder.': 'task_head.',
    'viterbi_plan.encoder.': 'emission_encoder.',
    'viterbi_plan.projection_mlp.': 'emission_head.',
}


def repeat_last_emission(log_emissions: torch.Tensor, eval_horizon: int) -> torch.Tensor:
    """The authors' cross-horizon rule on (B, T, N): keep the first T'-1 steps, then repeat
    the last (goal) step T-T'+1 times; the result is again (B, T, N)."""
    horizon = log_emissions.shape[1]
    if eval_horizon >= horizon:
        return log_emissions
    last = log_emissions[:, -1:].expand(-1, horizon - eval_horizon + 1, -1)
    return torch.cat([log_emissions[:, :eval_horizon - 1], last], 1)


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
        dvl_layers: stacked DVLs (``core.differentiable_viterbi(num_layers=...)``): layer k+1
            reads log(soft plan of layer k); the soft plan (plan loss, outputs, decoding) is
            the last layer's. 1 = the released code; the paper trains COIN T=6 with 2
            (supplementary, "Hyperparameter Configuration"; the released code has no switch).
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
    default_loss_weights = dict.fromkeys(LOSS_TERMS, 1.0)

    cross_horizon_modes = CROSS_HORIZON_MODES
    # the task head regresses one-hot targets (MSE on its raw outputs); the plan does not use it
    task_source, task_score, plan_uses_task = 'classifier', 'score', False
    text_feature_buffers = ('state_encoder.state_features',)
    official_prefixes = AUTHORS_PREFIXES  # their checkpoints' names (oracles.authors)

    @checked_arguments(prefix='model.')
    def __init__(self, num_actions: ActionCount, num_tasks: ActionCount, horizon: Horizon,
                 feature_dim: Count = 1536, text_dim: Count = 768,
                 embed_dim: Annotated[int, Range(1, 4096)] = 128,
                 mlp_ratio: Annotated[int, Range(1, 64)] = 2, dropout: DropoutRate = 0.2,
                 input_dropout: DropoutRate = 0.4, text_embeddings: Optional[dict] = None,
                 use_dvl: bool = True, dvl_layers: Count = 1,
                 decode: Literal[DECODE_MODES] = 'dvl_viterbi',
                 loss_weights: Optional[Dict[str, NonNegative]] = None,
                 cross_horizon: Literal[CROSS_HORIZON_MODES] = None, freeze_visual: bool = False,
                 init_visual_from: Optional[Text] = None, pkg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None):
        super().__init__(num_actions, horizon, pkg, data_preprocessor)
        self.text_source = text_embeddings  # what text_features_identity records
        check_loss_terms(loss_weights, LOSS_TERMS)  # before merging: '{}' is no dict
        self.loss_weights = self.loss_weights_of(loss_weights)
        if not self.loss_weights['task'] > 0:  # an untrained head predicts no task
            self.task_source = None
        self._check_text_source(text_embeddings)
        self.num_tasks = num_tasks
        self.feature_dim, self.embed_dim = feature_dim, embed_dim
        self.use_dvl, self.decode, self.cross_horizon = use_dvl, decode, cross_horizon
        self.dvl_layers = dvl_layers
        self.state_encoder = StateEncoder(num_actions, feature_dim, text_dim, embed_dim,
                                          input_dropout, text_embeddings, type(self).__name__)
        init_visual_encoder(self.state_encoder.visual_encoder, init_visual_from,
                            freeze_visual, type(self).__name__)
        self.task_head = nn.Sequential(nn.Linear(2 * embed_dim, embed_dim), nn.GELU(),
                                       nn.Dropout(dropout), nn.Linear(embed_dim, num_tasks))
        layer = nn.TransformerEncoderLayer(embed_dim, 1, mlp_ratio * embed_dim, dropout,
                                           activation='gelu', batch_first=True)
        self.emission_encoder = nn.TransformerEncoder(layer, 1, norm=nn.LayerNorm(embed_dim),
                                                      enable_nested_tensor=False)
        self.emission_head = nn.Sequential(
            nn.Linear(2 * embed_dim, mlp_ratio * embed_dim), nn.Sigmoid(), nn.Dropout(dropout),
            nn.Linear(mlp_ratio * embed_dim, horizon * num_actions))
        print_log(f'{type(self).__name__}: {num_parameters(self):,} parameters (N={num_actions},'
                  f' K={num_tasks}, T={horizon}, E={embed_dim})', logger='current')

    def _check_text_source(self, text_embeddings):
        if self.loss_weights['state'] > 0 and text_embeddings is None:
            raise ValueError('model.text_embeddings is missing but the state loss is on '
                             "(loss_weights['state'] > 0): give text_embeddings=dict(file="
                             "'<(N, 6, 768) .npy>') or set loss_weights=dict(state=0)")

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # checkpoints from before the shared encoder
        rename_legacy_keys(state_dict, prefix, {name: value.shape for name, value in
                                                self.state_dict().items()})
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # ------------------------------------------------------------------ network
    def encode(self, inputs: Dict[str, torch.Tensor]) -> torch.Tensor:
        """Encoded [start, goal] (B, 2, E) of observations ``start``, ``goal`` (B, D)."""
        return self.state_encoder.encode_ends(inputs)

    def state_logits(self, states: torch.Tensor) -> torch.Tensor:
        """(B, 2, N) state logits of encoded [start, goal] (B, 2, E) (``StateEncoder``)."""
        encoder = self.state_encoder
        return encoder.state_logits(states, encoder.encode_text())

    def log_emissions(self, states: torch.Tensor, eval_horizon: Optional[int] = None,
                      observed: Optional[torch.Tensor] = None):
        """(B, T, N) log emissions entering the DVL, rearranged for ``eval_horizon`` < T,
        plus the log evidence of ``observed`` steps (B, k, D)
        (``StateEncoder.observed_evidence``)."""
        encoded = self.emission_encoder(states).flatten(1)
        logits = self.emission_head(encoded).view(len(states), self.horizon, self.num_actions)
        log_emissions = F.logsigmoid(logits)
        if observed is not None and observed.shape[1] > 0:
            log_emissions = log_emissions + self.state_encoder.observed_evidence(
                observed, self.horizon)
        return repeat_last_emission(log_emissions, eval_horizon or self.horizon)

    def dvl_log_transitions(self) -> torch.Tensor:
        """(N, N) the authors' DVL transitions: PKG clamped at 1e-10, rows renormalised."""
        clamped = self.log_transitions.exp().clamp(min=CLAMP)
        return (clamped / clamped.sum(1, keepdim=True)).log()

    def soft_plan(self, log_emissions: torch.Tensor, num_layers: Optional[int] = None
                  ) -> torch.Tensor:
        """DVL soft plan (B, T, N) of log emissions (B, T, N): the last of ``num_layers``
        (default ``dvl_layers``) stacked DVLs."""
        soft, _ = core.differentiable_viterbi(log_emissions, self.dvl_log_transitions(),
                                              num_layers=num_layers or self.dvl_layers)
        return soft

    def second_dvl(self, soft_plan: torch.Tensor) -> torch.Tensor:
        """(B, T, N): one more DVL over a soft plan read as emission probabilities."""
        return self.soft_plan(torch.log(soft_plan.clamp(min=CLAMP)), num_layers=1)

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
    def tensor(self, inputs, horizon: int, data_samples=None) -> torch.Tensor:
        """Emission probabilities (B, T', N) of the first T' steps."""
        return self.log_emissions(self.encode(inputs), horizon,
                                  inputs.get('observed')).exp()[:, :horizon]

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        """Weighted losses over (B, T) plans; a term with weight 0 is not computed."""
        states = self.encode(inputs)
        log_emissions = self.log_emissions(states, None, inputs.get('observed'))
        return self.loss_terms(states, log_emissions, data_samples['plan'],
                               data_samples['task'])

    def loss_terms(self, states, log_emissions, plan, task) -> Dict[str, torch.Tensor]:
        """The authors' losses: CE(state logits (2B, N), first and last actions), MSE mean over
        B*T*N (soft plan vs one-hot plan), MSE (raw task logits vs one-hot task)."""
        weights, losses = self.loss_weights, {}
        if weights['state'] > 0:
            logits = self.state_logits(states).flatten(0, 1)
            ends = torch.stack([plan[:, 0], plan[:, -1]], 1)  # no index tensor to upload
            losses['loss_state'] = weights['state'] * F.cross_entropy(logits, ends.flatten())
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
                    **(task_fields(self.task_logits(states), softmax=False)
                       if self.task_source else {}))

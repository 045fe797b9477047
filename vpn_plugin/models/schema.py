"""SCHEMA (Niu et al., ICLR 2024) as its official code computes it (WenliangGuo/SCHEMA).

Shapes: B batch, D observation dim (1536 in the unified protocol), Dt text dim (768), E embed
dim, T horizon (fixed at construction), N actions, K tasks, M = 6N text tokens.

Network (official module names in brackets, see ``SCHEMA_PREFIXES``):
* state encoder [state_encoder]: the module ViterbiPlanNet shares (``StateEncoder``): start
  and goal embeddings (B, 2, E), projected state descriptions (N, 6, E), state logits (B, 2, N);
* task head [task_decoder]: Linear(2E, E) -> ReLU -> Dropout -> Linear(E, K) on [start, goal];
* state decoder [state_decoder]: tokens [F(s), 0 x (T-1), F(g)] with F = Linear(E, E), plus a
  fixed sinusoidal table, plus Linear(K, E) of the detached raw task logits (unless
  ``no_state_task``); L post-norm decoder layers with cross-attention to the M projected
  descriptions; the T-1 middle tokens through Linear(E, E, bias=False), framed by the encoder's
  start and goal embeddings: decoded states (B, T+1, E);
* action decoder [action_decoder]: tokens [s_0, 0, s_1, 0, ..., 0, s_T] (2T+1) from the decoded
  states, plus the sinusoidal table, plus Embedding(K, E) of the task (the ground truth in
  training, the argmax of the predicted task otherwise); the same decoder layers; classifier
  Linear(E, E) -> ReLU -> Dropout -> Linear(E, N) on the tokens 1, 3, ..., 2T-1: action logits;
* decoder layer: ``x = LN1(x + Drop(LNa(Drop(SelfAttn(x)))))``,
  ``x = LN2(x + Drop(LNb(Drop(CrossAttn(x, memory)))))``,
  ``x = LN3(x + Drop(Linear -> GELU -> Dropout -> Linear(x)))`` (H heads, no masks);
* losses: CE(action logits, plan) + CE(state logits, first/last action) + CE(task logits,
  task) + 0.1 x MSE(middle decoded states, mean of the 3 "after" descriptions of a_i and the
  3 "before" of a_{i+1}, projected, detached);
* inference: softmax over N, then SCHEMA's Viterbi through the PKG (``decode='viterbi'``,
  ``core.viterbi_decode_probs``: probabilities, float32 trellis, uniform prior, ties to the
  first index) or the argmax (``decode='argmax'``: "w/o PKG"); ``'viterbi_log'`` is this
  plugin's log-space Viterbi (``core.viterbi_decode``), which does not underflow.

The official model also holds ``state_decoder.logit_scale``, ``action_decoder.logit_scale``
and ``action_decoder.proj``, which no computation uses: they are kept (frozen) so that the
parameter counts and checkpoints are the official ones. Cross-attention projects the shared
memory once per batch instead of once per sample, and attends to it with the batch's queries
as the rows of one attention (same function; ``multi_head_attention``).
"""
from vpn_plugin.config_types import DropoutRate, NonNegative, Text, Range, checked_arguments
import math
from typing import Annotated, Dict, Literal, Optional

import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from torch import nn

from mmaction.registry import MODELS

from .. import core
from ..errors import check_choice
from .base_planner import (ActionCount, Horizon, BasePlanner, check_loss_terms,
                           num_parameters, task_fields)
from .pretrained_encoder import init_visual_encoder
from .state_encoder import INIT_LOGIT_SCALE
from .state_encoder import OFFICIAL_PREFIXES as STATE_ENCODER_PREFIXES
from .state_encoder import StateEncoder
from .temporal_unet import MAX_FEATURE_DIM

# model.decode: 'viterbi' = SCHEMA's default ("w/ PKG"), 'argmax' = "w/o PKG",
# 'viterbi_log' = this plugin's log-space Viterbi (same paths unless the float32 trellis
# underflows or ties)
DECODE_MODES = ('viterbi', 'argmax', 'viterbi_log')
# loss term -> official weight (main.py: total = action + state + task + 0.1 * state_decode)
DEFAULT_LOSS_WEIGHTS = dict(action=1.0, state=1.0, task=1.0, state_decode=0.1)
# official parameter-name prefix -> this module's
SCHEMA_PREFIXES = {
    **STATE_ENCODER_PREFIXES,
    'task_decoder.': 'task_head.',
    'state_decoder.feat_encode.': 'state_decoder.query_proj.',
    'state_decoder.query_embed.': 'state_decoder.task_proj.',
    'state_decoder.state_proj.': 'state_decoder.out_proj.',
    'state_decoder.decoder.layers.': 'state_decoder.layers.',
    'state_decoder.logit_scale': 'state_decoder.unused_logit_scale',
    'action_decoder.query_embed.': 'action_decoder.task_embedding.',
    'action_decoder.decoder.layers.': 'action_decoder.layers.',
    'action_decoder.classifier.': 'action_decoder.classifier.',
    'action_decoder.proj.': 'action_decoder.unused_proj.',
    'action_decoder.logit_scale': 'action_decoder.unused_logit_scale',
}
# official buffers -> number of rows of the sinusoidal table, from T
OFFICIAL_TABLES = {'state_decoder.pos_encoder.pe': lambda horizon: horizon + 1,
                   'action_decoder.pos_encoder.pe': lambda horizon: 2 * horizon + 1}


def sinusoidal_table(length: int, dim: int) -> torch.Tensor:
    """(length, dim) float32: ``[:, 0::2] = sin(pos w)``, ``[:, 1::2] = cos(pos w)``,
    ``w_i = exp(-2i ln(10000) / dim)`` (computed in float32 as the official table)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    frequency = (torch.arange(0, dim, 2, dtype=torch.float32)
                 * -(math.log(10000.0) / dim)).exp()
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


def multi_head_attention(query: torch.Tensor, memory: torch.Tensor,
                         attention: nn.MultiheadAttention) -> torch.Tensor:
    """``attention``'s function (no masks, no attention dropout) on batch-first tensors:
    query (B, L, E), memory (B, S, E) or (1, S, E) shared by the batch -> (B, L, E).

    A shared memory is projected once, and since attention rows are independent, the B*L
    queries attend to it as the rows of ONE attention (no per-sample copy of keys and values,
    no reduction of their gradients over the batch)."""
    w_q, w_k, w_v = attention.in_proj_weight.chunk(3)
    b_q, b_k, b_v = attention.in_proj_bias.chunk(3)
    q = F.linear(query, w_q, b_q)
    k, v = F.linear(memory, w_k, b_k), F.linear(memory, w_v, b_v)
    if len(memory) == 1 < len(query):
        return attention.out_proj(_attend(q.reshape(1, -1, q.shape[-1]), k, v,
                                          attention.num_heads).view_as(q))
    return attention.out_proj(_attend(q, k, v, attention.num_heads))


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    """Scaled dot-product attention of q (b, L, E) over k, v (b, S, E) with ``heads`` heads."""
    def split(x):  # (b, s, E) -> (b, H, s, E/H)
        return x.unflatten(-1, (heads, -1)).transpose(1, 2)

    return F.scaled_dot_product_attention(split(q), split(k), split(v)).transpose(1, 2).flatten(2)


class AttentionBlock(nn.Module):
    """Multi-head attention -> Dropout -> LayerNorm (official ``modules.Attention``)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float):
        super().__init__()
        self.attention = nn.MultiheadAttention(embed_dim, num_heads)  # its parameters
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(embed_dim)

    def forward(self, query: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return self.ln(self.dropout(multi_head_attention(query, memory, self.attention)))


class DecoderLayer(nn.Module):
    """Post-norm decoder layer with two LayerNorms per attention sub-layer (module docstring);
    batch-first (B, L, E)."""

    def __init__(self, embed_dim: int, num_heads: int, mlp_ratio: int, dropout: float):
        super().__init__()
        self.self_attn = AttentionBlock(embed_dim, num_heads, dropout)
        self.cross_attn = AttentionBlock(embed_dim, num_heads, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(embed_dim) for _ in range(3))
        self.dropout = nn.Dropout(dropout)
        self.mlp = nn.Sequential(nn.Linear(embed_dim, mlp_ratio * embed_dim), nn.GELU(),
                                 nn.Dropout(dropout), nn.Linear(mlp_ratio * embed_dim, embed_dim))

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x)))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory)))
        return self.norm3(x + self.dropout(self.mlp(x)))


def decoder_layers(num_layers: int, *args) -> nn.ModuleList:
    return nn.ModuleList(DecoderLayer(*args) for _ in range(num_layers))


def run_layers(layers: nn.ModuleList, tokens: torch.Tensor, memory: torch.Tensor):
    for layer in layers:
        tokens = layer(tokens, memory)
    return tokens


class StateDecoder(nn.Module):
    """Decoded states (B, T+1, E) of the encoded [start, goal] (module docstring)."""

    def __init__(self, embed_dim, num_tasks, horizon, num_heads, num_layers, mlp_ratio,
                 dropout, state_task: bool):
        super().__init__()
        self.query_proj = nn.Linear(embed_dim, embed_dim)
        self.task_proj = nn.Linear(num_tasks, embed_dim) if state_task else None
        self.layers = decoder_layers(num_layers, embed_dim, num_heads, mlp_ratio, dropout)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.unused_logit_scale = nn.Parameter(torch.tensor(INIT_LOGIT_SCALE),
                                               requires_grad=False)
        self.register_buffer('positions', sinusoidal_table(horizon + 1, embed_dim),
                             persistent=False)

    def forward(self, states, memory, task_logits):
        """states (B, 2, E), memory (1, M, E), task logits (B, K) -> (transformer output
        (B, T+1, E), decoded states (B, T+1, E))."""
        ends = self.query_proj(states)
        middle = ends.new_zeros(len(states), len(self.positions) - 2, ends.shape[-1])
        tokens = torch.cat([ends[:, :1], middle, ends[:, 1:]], 1) + self.positions
        if self.task_proj is not None:
            tokens = tokens + self.task_proj(task_logits.detach()).unsqueeze(1)
        out = run_layers(self.layers, tokens, memory)
        decoded = torch.cat([states[:, :1], self.out_proj(out[:, 1:-1]), states[:, 1:]], 1)
        return out, decoded


class ActionDecoder(nn.Module):
    """Action logits (B, T, N) of the decoded states (module docstring)."""

    def __init__(self, embed_dim, num_actions, num_tasks, horizon, num_heads, num_layers,
                 mlp_ratio, dropout):
        super().__init__()
        self.task_embedding = nn.Embedding(num_tasks, embed_dim)
        self.layers = decoder_layers(num_layers, embed_dim, num_heads, mlp_ratio, dropout)
        self.classifier = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.ReLU(),
                                        nn.Dropout(dropout), nn.Linear(embed_dim, num_actions))
        self.unused_proj = nn.Linear(embed_dim, embed_dim).requires_grad_(False)
        self.unused_logit_scale = nn.Parameter(torch.tensor(INIT_LOGIT_SCALE),
                                               requires_grad=False)
        self.register_buffer('positions', sinusoidal_table(2 * horizon + 1, embed_dim),
                             persistent=False)

    def forward(self, decoded, memory, task):
        """decoded states (B, T+1, E), memory (1, M, E), task (B,) long -> (transformer output
        (B, 2T+1, E), action logits (B, T, N))."""
        tokens = torch.stack([decoded[:, :-1], torch.zeros_like(decoded[:, 1:])], 2)
        tokens = torch.cat([tokens.flatten(1, 2), decoded[:, -1:]], 1) + self.positions
        out = run_layers(self.layers, tokens + self.task_embedding(task).unsqueeze(1), memory)
        return out, self.classifier(out[:, 1::2])


@MODELS.register_module()
class SCHEMA(BasePlanner):
    """SCHEMA's planner (module docstring).

    Args:
        num_actions, num_tasks: N, K.
        horizon: T the decoders are built for (a model plans only this horizon).
        feature_dim: D of the start/goal observations (the unified protocol: 1536).
        text_dim: Dt of the state-description features.
        embed_dim: E.
        num_heads, num_layers, mlp_ratio: of both decoders (official: 32, 2, 2).
        dropout: of the decoders and heads; input_dropout: the state encoder's (0.4).
        no_state_task: do not feed the task prediction to the state decoder (official NIV).
        text_embeddings: (N, 6, Dt) state features (``load_state_features``); SCHEMA cannot
            run without them (a model built without them can be counted and converted).
        decode: one of ``DECODE_MODES``.
        loss_weights: weights of 'action', 'state', 'task', 'state_decode' (official 1, 1, 1,
            0.1; 0 switches a term off).
        freeze_visual: freeze the state encoder's visual encoder (sample-efficiency study;
            needs ``init_visual_from``).
        init_visual_from: checkpoint of a planner whose visual encoder is loaded (the
            sample-efficiency study's pre-trained encoder, ``pretrained_encoder.py``).
        pkg: ``PKGBuilder`` config of the graph (``BasePlanner``).
    """
    default_loss_weights = DEFAULT_LOSS_WEIGHTS

    official_prefixes = SCHEMA_PREFIXES  # its official checkpoints' names (oracles.authors)
    # the task classifier (cross-entropy) conditions the action decoder
    task_source, task_score, plan_uses_task = 'classifier', 'probability', True
    text_feature_buffers = ('state_encoder.state_features',)

    @checked_arguments(prefix='SCHEMA model.')
    def __init__(self, num_actions: ActionCount, num_tasks: ActionCount, horizon: Horizon,
                 feature_dim: Annotated[int, Range(1, MAX_FEATURE_DIM)] = 1536,
                 text_dim: Annotated[int, Range(1, MAX_FEATURE_DIM)] = 768,
                 embed_dim: Annotated[int, Range(1, 4096)] = 128,
                 num_heads: Annotated[int, Range(1, 4096)] = 32,
                 num_layers: Annotated[int, Range(1, 64)] = 2,
                 mlp_ratio: Annotated[int, Range(1, 64)] = 2, dropout: DropoutRate = 0.2,
                 input_dropout: DropoutRate = 0.4, no_state_task: bool = False,
                 text_embeddings: Optional[dict] = None, decode: Literal[DECODE_MODES] = 'viterbi',
                 loss_weights: Optional[Dict[str, NonNegative]] = None,
                 freeze_visual: bool = False, init_visual_from: Optional[Text] = None,
                 pkg: Optional[dict] = None, data_preprocessor: Optional[dict] = None):
        super().__init__(num_actions, horizon, pkg, data_preprocessor)
        self.text_source = text_embeddings  # what text_features_identity records
        # each option's kind is its annotation's (checked_arguments); here what it cannot say
        check_loss_terms(loss_weights, DEFAULT_LOSS_WEIGHTS)
        if horizon < 2 or embed_dim % num_heads:
            raise ValueError(f'SCHEMA: horizon={horizon} must be >= 2 and embed_dim='
                             f'{embed_dim} a multiple of num_heads={num_heads}')
        self.loss_weights = self.loss_weights_of(loss_weights)
        self.num_tasks, self.embed_dim, self.decode = num_tasks, embed_dim, decode
        self.state_encoder = StateEncoder(num_actions, feature_dim, text_dim, embed_dim,
                                          input_dropout, text_embeddings, 'SCHEMA')
        init_visual_encoder(self.state_encoder.visual_encoder, init_visual_from,
                            freeze_visual, 'SCHEMA')
        self.task_head = nn.Sequential(nn.Linear(2 * embed_dim, embed_dim), nn.ReLU(),
                                       nn.Dropout(dropout), nn.Linear(embed_dim, num_tasks))
        sizes = (horizon, num_heads, num_layers, mlp_ratio, dropout)
        self.state_decoder = StateDecoder(embed_dim, num_tasks, *sizes, not no_state_task)
        self.action_decoder = ActionDecoder(embed_dim, num_actions, num_tasks, *sizes)
        print_log(f'SCHEMA: {num_parameters(self):,} parameters (N={num_actions}, '
                  f'K={num_tasks}, T={horizon}, E={embed_dim}, no_state_task={no_state_task})',
                  logger='current')

    # ------------------------------------------------------------------ network
    def network(self, inputs: Dict[str, torch.Tensor], task: Optional[torch.Tensor] = None):
        """Every intermediate output of a batch (observations ``start``, ``goal`` (B, D)).

        ``task`` (B,): the task the action decoder gets (training: the ground truth); None:
        the argmax of the predicted task logits. Returns a dict: ``states`` (B, 2, E),
        ``text`` (N, 6, E), ``state_logits`` (B, 2, N), ``task_logits`` (B, K),
        ``action_task`` (B,), ``state_decoder_transformer_out`` (B, T+1, E),
        ``state_decoder_out`` (B, T+1, E), ``action_decoder_transformer_out`` (B, 2T+1, E),
        ``action_logits`` (B, T, N).
        """
        encoder = self.state_encoder
        states, text = encoder.encode_ends(inputs), encoder.encode_text()
        memory = text.flatten(0, 1).unsqueeze(0)  # (1, M, E): row a*6+j
        task_logits = self.task_head(states.flatten(1))
        state_out, decoded = self.state_decoder(states, memory, task_logits)
        action_task = task_logits.argmax(-1) if task is None else task
        action_out, action_logits = self.action_decoder(decoded, memory, action_task)
        return dict(states=states, text=text, state_logits=encoder.state_logits(states, text),
                    task_logits=task_logits, action_task=action_task,
                    state_decoder_transformer_out=state_out, state_decoder_out=decoded,
                    action_decoder_transformer_out=action_out, action_logits=action_logits)

    @staticmethod
    def state_targets(text: torch.Tensor, plan: torch.Tensor) -> torch.Tensor:
        """(B, T-1, E) detached targets of the middle states: for the state between steps i
        and i+1, the mean of the 3 "before" descriptions of a_{i+1} and the 3 "after" of a_i
        (projected text (N, 6, E), plans (B, T))."""
        described = text[plan]  # (B, T, 6, E)
        pair = torch.cat([described[:, 1:, :3], described[:, :-1, 3:]], 2)
        return pair.mean(2).detach()

    def loss_terms(self, out: dict, plan: torch.Tensor, task: torch.Tensor) -> dict:
        """Unweighted official losses of ``network`` outputs for plans (B, T), tasks (B,)."""
        num_actions = self.num_actions
        return dict(
            loss_action=F.cross_entropy(out['action_logits'].reshape(-1, num_actions),
                                        plan.flatten()),
            loss_state=F.cross_entropy(out['state_logits'].reshape(-1, num_actions),
                                       plan[:, [0, -1]].flatten()),
            loss_task=F.cross_entropy(out['task_logits'], task),
            loss_state_decode=F.mse_loss(out['state_decoder_out'][:, 1:-1],
                                         self.state_targets(out['text'], plan)))

    def with_observed(self, out: dict, inputs) -> dict:
        """``network`` outputs whose action logits (B, T, N) carry the log evidence of the
        intermediate observations ``inputs['observed']`` (B, k, D), if any
        (``StateEncoder.observed_evidence``: the intermediate-observation study)."""
        observed = inputs.get('observed')
        if observed is None or observed.shape[1] == 0:
            return out
        evidence = self.state_encoder.observed_evidence(observed, self.horizon)
        return dict(out, action_logits=out['action_logits'].log_softmax(-1) + evidence)

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        """Weighted losses (``loss_weights``; terms of weight 0 left out) of a batch."""
        out = self.with_observed(self.network(inputs, data_samples['task']), inputs)
        terms = self.loss_terms(out, data_samples['plan'], data_samples['task'])
        return {name: self.loss_weights[name[len('loss_'):]] * value
                for name, value in terms.items() if self.loss_weights[name[len('loss_'):]] > 0}

    # ------------------------------------------------------------------ decoding
    @torch.no_grad()
    def decode_plan(self, probabilities: torch.Tensor, mode: Optional[str] = None):
        """Plans (B, T) long of action probabilities (B, T, N) by ``mode`` (default
        ``self.decode``) through the installed PKG."""
        mode = mode or self.decode
        check_choice('decode mode', mode, DECODE_MODES)
        if mode == 'argmax':
            return probabilities.argmax(-1)
        if mode == 'viterbi':
            return self.viterbi(probabilities)[0]
        tiny = torch.finfo(probabilities.dtype).tiny
        return core.viterbi_decode(probabilities.clamp(min=tiny).log(), self.log_transitions)[0]

    def viterbi(self, probabilities: torch.Tensor):
        """SCHEMA's Viterbi through the PKG: paths (B, T) and likelihoods (B,) of action
        probabilities (B, T, N) (``core.viterbi_decode_probs``)."""
        transitions = torch.from_numpy(self.pkg_probabilities())
        return core.viterbi_decode_probs(probabilities, transitions)

    def tensor(self, inputs, horizon: int, data_samples=None) -> torch.Tensor:
        """Action probabilities (B, T, N) (the predicted task conditions the decoder)."""
        return self.with_observed(self.network(inputs), inputs)['action_logits'].softmax(-1)

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        """Plans (B, T), action probabilities (B, T, N) and predicted tasks (B,)."""
        out = self.with_observed(self.network(inputs), inputs)
        probabilities = out['action_logits'].softmax(-1)
        return dict(pred_plan=self.decode_plan(probabilities), emissions=probabilities,
                    **task_fields(out['task_logits']))

    # ------------------------------------------------------------------ checkpoints
    def check_official_buffers(self, state: dict) -> dict:
        """``state`` (an official state dict) without its sinusoidal tables, after checking
        them against this model's (their rows say the horizon the checkpoint was built for)."""
        state = dict(state)
        for name, rows in OFFICIAL_TABLES.items():
            if name not in state:
                continue
            table = state.pop(name).float().reshape(-1, self.embed_dim)
            if len(table) != rows(self.horizon):
                raise ValueError(f'official checkpoint: {name} has {len(table)} rows, so it was '
                                 f'built for another horizon than the config\'s horizon='
                                 f'{self.horizon} ({rows(self.horizon)} rows)')
            if not torch.allclose(table, sinusoidal_table(len(table), self.embed_dim),
                                  atol=1e-5):
                raise ValueError(f'official checkpoint: {name} is not the sinusoidal table')
        return state

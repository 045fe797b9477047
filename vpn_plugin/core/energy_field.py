"""CEFITO's energy field (Afham et al., GCPR 2026; visinf/cefito): the causal predictor, the
energy of an action sequence, the auxiliary action classification and the training loss.

Shapes: B samples, T horizon, E observation dim, H hidden dim, N actions, D text dim (512),
L = 2T + 1 tokens, R rows (sample, candidate) pairs.

* tokens of a sequence: ``[state_embed(x_s), a_1, m, a_2, m, ..., a_T, m]`` (``a_t =
  action_embed(text embedding of action t)``, ``m`` the state mask token) + a fixed
  ``[sin | cos]`` position table; 4 pre-norm blocks with causal attention; the latents are the
  outputs at the mask tokens (positions 2, 4, ..., 2T); predicted goal =
  ``state_head(norm(latent_T))``; energy = mean over E of ``(predicted goal - LN(x_g))^2``.
* auxiliary pass (same blocks): ``[state_embed(x_s), m_a, s_1, ..., m_a, s_T]`` + positions,
  logits = ``action_head`` of the outputs at positions 1, 3, ..., 2T-1 (no final norm).
* loss: triplet terms ``relu(d_gt - d_neg + margin)`` averaged over the active ones, plus
  ``aux_weight`` x the mean of the ground truths' and the negatives' cross-entropies.

Because attention is causal, every sequence sharing a prefix shares that prefix's hidden
states: :meth:`EnergyField.extend` scores one more step on top of cached keys/values
(``core.energy_search.prefix_tree_energies``).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

OBSERVATION_EPS = 1e-5   # LN(x_s), LN(x_g): no affine
BLOCK_EPS = 1e-6         # the blocks' and the final norm's LayerNorms
KeyValues = List[Tuple[torch.Tensor, torch.Tensor]]  # per block: (R, heads, P, H/heads) twice


def sincos_positions(num_tokens: int, dim: int) -> torch.Tensor:
    """(num_tokens, dim) float32: ``[sin(p w_i) | cos(p w_i)]``, ``w_i = 10000^(-i/(dim/2))``,
    computed in float64 (concatenated halves, not interleaved)."""
    if dim % 2:
        raise ValueError(f'the position table needs an even hidden dim; got {dim}')
    positions = torch.arange(num_tokens, dtype=torch.float64)[:, None]
    rates = 10000.0 ** -(torch.arange(dim // 2, dtype=torch.float64) / (dim / 2))
    angles = positions * rates
    return torch.cat([angles.sin(), angles.cos()], 1).float()


def normalize_observation(x: torch.Tensor) -> torch.Tensor:
    """LN over the last axis, no affine, eps 1e-5: (..., E) -> (..., E)."""
    return F.layer_norm(x, x.shape[-1:], eps=OBSERVATION_EPS)


class Attention(nn.Module):
    """Multi-head self-attention (``qkv`` with bias, ``proj``), causal or not."""

    def __init__(self, dim: int, num_heads: int, causal: bool = True):
        super().__init__()
        if dim % num_heads:
            heads = [h for h in range(1, min(dim, 64) + 1) if dim % h == 0]
            raise ValueError(f'hidden_dim={dim} is not divisible by num_heads={num_heads} (the '
                             f'energy field\'s attention, model.hidden_dim / model.num_heads); '
                             f'expected num_heads among {heads}')
        self.num_heads, self.causal = num_heads, causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def split(self, x: torch.Tensor):
        """x (R, L, H) -> q, k, v each (R, heads, L, H/heads)."""
        rows, length, dim = x.shape
        qkv = self.qkv(x).reshape(rows, length, 3, self.num_heads, dim // self.num_heads)
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)

    def merge(self, out: torch.Tensor) -> torch.Tensor:
        rows, _, length, _ = out.shape
        return self.proj(out.transpose(1, 2).reshape(rows, length, -1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.split(x)
        return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=self.causal))

    def attend(self, q, k, v, past: Tuple[torch.Tensor, torch.Tensor], fan_out: int):
        """Causal attention of one step's two new tokens (action, state mask), q, k, v
        (P * fan_out, heads, 2, d), after the cached keys/values (P, heads, S, d) of their
        parents (parent p's children are rows p*fan_out ...): (P * fan_out, heads, 2, d)
        before ``proj``. The parents' keys are shared by their children (no copy per child);
        the 2 x 2 block among a child's own tokens is written out (token 0 sees itself,
        token 1 both)."""
        parents, heads, past_len, head_dim = past[0].shape
        scale = 1.0 / math.sqrt(head_dim)
        q_parent = q.reshape(parents, fan_out, heads, 2, head_dim).transpose(1, 2) \
            .reshape(parents, heads, fan_out * 2, head_dim)
        to_past = torch.matmul(q_parent * scale, past[0].transpose(-1, -2))  # (P,h,2F,S)
        to_past = to_past.view(parents, heads, fan_out, 2, past_len).transpose(1, 2) \
            .reshape(parents * fan_out, heads, 2, past_len)                   # (R,h,2,S)
        q0, q1 = (q[:, :, 0] * scale), (q[:, :, 1] * scale)                   # (R,h,d)
        own = torch.stack([(q0 * k[:, :, 0]).sum(-1), (q1 * k[:, :, 0]).sum(-1),
                           (q1 * k[:, :, 1]).sum(-1)], -1)                    # (R,h,3)
        top = torch.maximum(to_past.amax(-1), torch.stack(
            [own[..., 0], own[..., 1:].amax(-1)], -1))                        # (R,h,2)
        w_past = (to_past - top[..., None]).exp()
        w_own = (own - top[..., [0, 1, 1]]).exp()                             # (R,h,3)
        total = w_past.sum(-1) + torch.stack([w_own[..., 0], w_own[..., 1] + w_own[..., 2]], -1)
        w_parent = w_past.view(parents, fan_out, heads, 2, past_len).transpose(1, 2) \
            .reshape(parents, heads, fan_out * 2, past_len)
        from_past = torch.matmul(w_parent, past[1]).view(parents, heads, fan_out, 2, head_dim) \
            .transpose(1, 2).reshape(parents * fan_out, heads, 2, head_dim)
        v0, v1 = v[:, :, 0], v[:, :, 1]
        out = torch.stack([from_past[:, :, 0] + w_own[..., 0:1] * v0,
                           from_past[:, :, 1] + w_own[..., 1:2] * v0 + w_own[..., 2:3] * v1],
                          2) / total[..., None]
        return out


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate='tanh'))


class Block(nn.Module):
    """Pre-norm block, parameter-free LayerNorms (eps 1e-6): x += attn(LN x); x += mlp(LN x)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, causal: bool = True):
        super().__init__()
        self.attn = Attention(dim, num_heads, causal)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def norm(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], eps=BLOCK_EPS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm(x))
        return x + self.mlp(self.norm(x))

    def keys_values(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The (k, v) (R, heads, L, d) this block's attention computes from its input x."""
        _, k, v = self.attn.split(self.norm(x))
        return k, v

    def extend(self, x, past, fan_out: int, shared: bool = False, last: bool = False):
        """One step's two tokens x (P * fan_out, 2, H) after cached keys/values (P, heads, S,
        d) (:meth:`Attention.attend`) -> (output, their (k, v) (P * fan_out, heads, 2, d)).
        ``shared``: x is (fan_out, 2, H), the same for every parent (the first block's input),
        so q, k, v are computed once per child index. ``last``: only the state-mask token's
        output (P * fan_out, H) is returned (nothing reads the action token's)."""
        parents = past[0].shape[0]
        q, k, v = self.attn.split(self.norm(x))
        if shared:
            q, k, v, x = (t.repeat(parents, *([1] * (t.ndim - 1))) for t in (q, k, v, x))
        out = self.attn.attend(q, k, v, past, fan_out)
        if last:
            mask = x[:, 1] + self.attn.proj(out[:, :, 1].reshape(len(x), -1))
            return mask + self.mlp(self.norm(mask)), (k, v)
        x = x + self.attn.merge(out)
        return x + self.mlp(self.norm(x)), (k, v)


class Predictor(nn.Module):
    """P_theta (official parameter names). Args: observation_dim E, num_actions N,
    horizon T, text_dim D, hidden_dim H, depth, num_heads, mlp_ratio, causal."""

    def __init__(self, observation_dim: int, num_actions: int, horizon: int,
                 text_dim: int = 512, hidden_dim: int = 384, depth: int = 4,
                 num_heads: int = 6, mlp_ratio: float = 4.0, causal: bool = True):
        super().__init__()
        self.state_embed = nn.Linear(observation_dim, hidden_dim)
        self.action_embed = nn.Linear(text_dim, hidden_dim)
        self.blocks = nn.ModuleList(Block(hidden_dim, num_heads, mlp_ratio, causal)
                                    for _ in range(depth))
        self.norm = nn.LayerNorm(hidden_dim, eps=BLOCK_EPS)
        self.state_head = nn.Linear(hidden_dim, observation_dim)
        self.action_head = nn.Linear(hidden_dim, num_actions)
        self.register_buffer('pos_embed', sincos_positions(2 * horizon + 1, hidden_dim))
        self.register_buffer('action_embeddings', torch.zeros(num_actions, text_dim),
                             persistent=False)

    def run_blocks(self, tokens: torch.Tensor, trace: Optional[list] = None) -> torch.Tensor:
        x = tokens + self.pos_embed[:tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
            if trace is not None:
                trace.append(x)
        return x


class EnergyField(nn.Module):
    """The mask tokens and the predictor (official ``CEFITO`` module layout).

    ``action_embeddings`` (N, D): frozen text embeddings (a non-persistent buffer)."""

    def __init__(self, observation_dim: int, num_actions: int, horizon: int,
                 action_embeddings: torch.Tensor, hidden_dim: int = 384, depth: int = 4,
                 num_heads: int = 6, mlp_ratio: float = 4.0, causal: bool = True):
        super().__init__()
        text_dim = action_embeddings.shape[-1]
        self.horizon = horizon
        self.state_mask_token = nn.Parameter(torch.zeros(hidden_dim))
        self.action_mask_token = nn.Parameter(torch.zeros(hidden_dim))
        self.predictor = Predictor(observation_dim, num_actions, horizon, text_dim, hidden_dim,
                                   depth, num_heads, mlp_ratio, causal)
        self.predictor.action_embeddings.copy_(action_embeddings)

    # ------------------------------------------------------------------ full sequences
    def action_tokens(self, actions: torch.Tensor) -> torch.Tensor:
        """actions (R, T) -> (R, T, H) = ``action_embed(embedding of each action)``."""
        return self.predictor.action_embed(self.predictor.action_embeddings[actions])

    def sequence_tokens(self, start: torch.Tensor, action_tokens: torch.Tensor) -> torch.Tensor:
        """start (R, E) normalised, action tokens (R, T, H) -> (R, 2T+1, H) before positions."""
        rows, steps, hidden = action_tokens.shape
        mask = self.state_mask_token.expand(rows, steps, hidden)
        pairs = torch.stack([action_tokens, mask], 2).reshape(rows, 2 * steps, hidden)
        return torch.cat([self.predictor.state_embed(start)[:, None], pairs], 1)

    def predict(self, start: torch.Tensor, actions: torch.Tensor,
                trace: Optional[dict] = None) -> Dict[str, torch.Tensor]:
        """start (R, E) normalised, actions (R, T) -> ``latents`` (R, T, H), ``predicted_goal``
        (R, E); ``trace`` (a dict) receives ``action_tokens``, ``tokens_in``, ``block_out``."""
        action_tokens = self.action_tokens(actions)
        tokens = self.sequence_tokens(start, action_tokens)
        blocks = [] if trace is not None else None
        out = self.predictor.run_blocks(tokens, blocks)
        latents = out[:, 2::2]
        if trace is not None:
            trace.update(action_tokens=action_tokens, tokens_in=tokens,
                         block_out=torch.stack(blocks))
        return dict(latents=latents, predicted_goal=self.goal_head(latents[:, -1]))

    def goal_head(self, latent: torch.Tensor) -> torch.Tensor:
        """(R, H) -> (R, E)."""
        return self.predictor.state_head(self.predictor.norm(latent))

    def recon_logits(self, start: torch.Tensor, latents: torch.Tensor,
                     trace: Optional[dict] = None) -> torch.Tensor:
        """The auxiliary pass: start (R, E) normalised, latents (R, T, H) -> (R, T, N)."""
        rows, steps, hidden = latents.shape
        mask = self.action_mask_token.expand(rows, steps, hidden)
        pairs = torch.stack([mask, latents], 2).reshape(rows, 2 * steps, hidden)
        tokens = torch.cat([self.predictor.state_embed(start)[:, None], pairs], 1)
        blocks = [] if trace is not None else None
        out = self.predictor.run_blocks(tokens, blocks)
        if trace is not None:
            trace.update(recon_tokens_in=tokens, recon_block_out=torch.stack(blocks))
        return self.predictor.action_head(out[:, 1::2])

    def energies(self, start: torch.Tensor, actions: torch.Tensor,
                 goal: torch.Tensor) -> torch.Tensor:
        """Normalised start, goal (R, E), actions (R, T) -> energies (R,)."""
        return energy(self.predict(start, actions)['predicted_goal'], goal)

    # ------------------------------------------------------------------ prefix extension
    def root(self, start: torch.Tensor) -> Tuple[torch.Tensor, KeyValues]:
        """The shared first token: start (R, E) normalised -> (its block-0..depth outputs'
        keys/values per block (R, heads, 1, d), hidden (R, 1, H) after the last block)."""
        x = self.predictor.state_embed(start)[:, None] + self.predictor.pos_embed[:1]
        cache = []
        for block in self.predictor.blocks:
            cache.append(block.keys_values(x))
            x = block(x)
        return x, cache

    def extend(self, cache: KeyValues, child_tokens: torch.Tensor, step: int
               ) -> Tuple[torch.Tensor, KeyValues]:
        """Append step ``step`` (1-based) to every cached prefix, one child per action.

        cache: per block (P, heads, 2*step-1, d); child_tokens (F, H): the action tokens of the
        F children of every prefix (child c of parent p is row p * F + c). Returns the latent
        s_step (P * F, H) and the new tokens' keys/values per block (P * F, heads, 2, d)
        (``grow_cache`` makes the children's cache)."""
        fan_out, hidden = child_tokens.shape
        positions = self.predictor.pos_embed[2 * step - 1:2 * step + 1]
        x = torch.stack([child_tokens, self.state_mask_token.expand(fan_out, hidden)], 1)
        x = x + positions
        last_block = len(self.predictor.blocks) - 1
        new_cache = []
        for index, (block, past) in enumerate(zip(self.predictor.blocks, cache)):
            x, new = block.extend(x, past, fan_out, shared=index == 0,
                                  last=index == last_block)
            new_cache.append(new)
        return x, new_cache


def energy(predicted_goal: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    """mean over E of (predicted - goal)^2: (R, E), (R, E) -> (R,)."""
    return (predicted_goal - goal).pow(2).mean(-1)


def grow_cache(parent: KeyValues, new: KeyValues, fan_out: int) -> KeyValues:
    """Children's full cache: each parent's keys/values (P, heads, S, d) repeated for its
    ``fan_out`` children, then the children's own (P * fan_out, heads, 2, d)."""
    return [(torch.cat([pk.repeat_interleave(fan_out, 0), nk], 2),
             torch.cat([pv.repeat_interleave(fan_out, 0), nv], 2))
            for (pk, pv), (nk, nv) in zip(parent, new)]


# ---------------------------------------------------------------------- loss
def adaptive_margins(positives: torch.Tensor, negatives: torch.Tensor, min_margin: float,
                     max_margin: float, order_weight: float = 0.0) -> torch.Tensor:
    """Triplet margin per negative: positives (B, T), negatives (B, M, T) -> (B, M).

    severity = |set(neg) - set(gt)| / |set(neg)|; with ``order_weight`` w > 0 blended with the
    fraction of positions where neg != gt: (1 - w) severity + w * positional;
    margin = min + (max - min) * severity."""
    same = negatives[..., :, None] == negatives[..., None, :]                  # (B, M, T, T)
    earlier = torch.ones_like(same).tril(-1)
    first = ~(same & earlier).any(-1)                                           # (B, M, T)
    in_positive = (negatives[..., None] == positives[:, None, None, :]).any(-1)
    severity = (first & ~in_positive).sum(-1) / first.sum(-1).clamp(min=1)
    if order_weight:
        positional = (negatives != positives[:, None]).float().mean(-1)
        severity = (1.0 - order_weight) * severity + order_weight * positional
    return min_margin + (max_margin - min_margin) * severity


def contrastive_terms(distances: torch.Tensor, margins: torch.Tensor) -> Dict[str, torch.Tensor]:
    """distances (B, 1+M) (column 0: ground truth), margins (B, M) -> ``triplet`` (B, M),
    ``num_active`` and ``contrastive`` = sum(triplet) / max(1, #active)."""
    triplet = F.relu(distances[:, :1] - distances[:, 1:] + margins)
    active = (triplet > 0).sum()
    return dict(triplet=triplet, num_active=active,
                contrastive=triplet.sum() / active.clamp(min=1))


def auxiliary_terms(logits: torch.Tensor, candidates: torch.Tensor) -> Dict[str, torch.Tensor]:
    """logits (B, 1+M, T, N), candidates (B, 1+M, T) -> ``ce`` (B, 1+M, T) and ``auxiliary`` =
    (mean CE of the ground truths + mean CE of all negatives) / 2."""
    ce = F.cross_entropy(logits.flatten(0, 2), candidates.flatten(), reduction='none')
    ce = ce.view(candidates.shape)
    return dict(ce=ce, auxiliary=(ce[:, 0].mean() + ce[:, 1:].mean()) / 2)


def field_loss(field: EnergyField, start: torch.Tensor, goal: torch.Tensor,
               actions: torch.Tensor, negatives: torch.Tensor, min_margin: float,
               max_margin: float, order_weight: float,
               aux_weight: float) -> Dict[str, torch.Tensor]:
    """The training loss on raw observations start, goal (B, E), ground truth (B, T),
    negatives (B, M, T): every term and intermediate (official ``compute_losses``)."""
    batch, count, steps = negatives.shape
    candidates = torch.cat([actions[:, None], negatives], 1)                  # (B, 1+M, T)
    start, goal = normalize_observation(start), normalize_observation(goal)
    rows = candidates.reshape(-1, steps)
    start_rows = start.repeat_interleave(count + 1, 0)
    trace: dict = {}
    predicted = field.predict(start_rows, rows, trace)
    distances = energy(predicted['predicted_goal'], goal.repeat_interleave(count + 1, 0))
    distances = distances.view(batch, count + 1)
    margins = adaptive_margins(actions, negatives, min_margin, max_margin, order_weight)
    logits = field.recon_logits(start_rows, predicted['latents'])
    out = dict(candidates=candidates, action_tokens=trace['action_tokens'],
               predicted_goal=predicted['predicted_goal'], latents=predicted['latents'],
               recon_logits=logits, distances=distances, margins=margins)
    out.update(contrastive_terms(distances, margins))
    out.update(auxiliary_terms(logits.view(batch, count + 1, steps, -1), candidates))
    out['total'] = out['contrastive'] + aux_weight * out['auxiliary']
    return out

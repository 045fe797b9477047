"""The state encoder shared by ViterbiPlanNet and SCHEMA (one module, used by both).

SCHEMA's official ``models/state_encoder.py`` and the ViterbiPlanNet authors' are the same
network (the authors took it verbatim). Shapes: B batch, D observation dim (1536), Dt text dim
(768), E embed dim, N actions.

* visual encoder [official ``state_encoder.state_encoder``]: input dropout, then
  ``Linear(D, 2D) -> Linear(2D, E)`` with no activation between;
* text encoder [``state_encoder.desc_encoder``]: input dropout, then ``Linear(Dt, E, bias=False)``
  on the frozen state-description features (N, 6, Dt): slots 0-2 "before", 3-5 "after";
* state logits: ``exp(logit_scale)`` x cosine(state, text), start against the 3 "before"
  sentences, goal against the 3 "after" ones, averaged over the sentences.
"""
import math
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .text_embeddings import load_state_features

INIT_LOGIT_SCALE = math.log(1 / 0.07)
# official name prefix (both official codes) -> the shared module's, below a model's prefix
OFFICIAL_PREFIXES = {
    'state_encoder.logit_scale': 'state_encoder.logit_scale',
    'state_encoder.state_encoder.': 'state_encoder.visual_encoder.',
    'state_encoder.desc_encoder.': 'state_encoder.text_encoder.',
}
# this module's parameters before it was shared (flat in ViterbiPlanNet): old -> new
LEGACY_PREFIXES = {'visual_encoder.': 'state_encoder.visual_encoder.',
                   'text_encoder.': 'state_encoder.text_encoder.',
                   'logit_scale': 'state_encoder.logit_scale'}


def plugin_name(official_name: str, prefixes: Dict[str, str]) -> str:
    """This plugin's parameter name of an official one, by the first matching prefix of
    ``prefixes`` (official prefix -> ours; a model's ``official_prefixes``)."""
    for prefix, ours in prefixes.items():
        if official_name.startswith(prefix):
            return ours + official_name[len(prefix):]
    raise KeyError(f'parameter {official_name!r} is not one of the official model\'s; '
                   f'expected a name starting with one of {sorted(prefixes)}')


def check_observation_dim(owner: str, observations: torch.Tensor, feature_dim: int) -> None:
    """Refuse observations (..., D) whose D is not the model's ``feature_dim``, naming the
    option (a matrix product's shape error named neither: passT H02)."""
    if observations.shape[-1] != feature_dim:
        raise ValueError(f'{owner}: observation dim {observations.shape[-1]} does not match '
                         f'model.feature_dim={feature_dim} (the unified protocol observes 3 '
                         "concatenated 512-d frames, observation='authors': 1536; 'mean3': "
                         '512)')


class LinearPair(nn.Sequential):
    """``Linear(D, H) -> Linear(H, E)`` with no activation between (parameters ``0.weight``,
    ``0.bias``, ``1.weight``, ``1.bias``).

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


class StateEncoder(nn.Module):
    """Visual and text encoders and the state logits of both networks (module docstring).

    Args:
        num_actions: N (rows of the state-description features).
        feature_dim: D of an observation.
        text_dim: Dt of the state-description features.
        embed_dim: E.
        input_dropout: of the visual and text inputs (the official 0.4).
        text_embeddings: where the (N, 6, Dt) features come from (``load_state_features``),
            or None: built without them (``state_features`` is None; the owner decides whether
            it can run so).
        owner: the model's name, for messages.
    """

    def __init__(self, num_actions: int, feature_dim: int = 1536, text_dim: int = 768,
                 embed_dim: int = 128, input_dropout: float = 0.4,
                 text_embeddings: Optional[dict] = None, owner: str = 'model'):
        super().__init__()
        self.num_actions, self.feature_dim, self.owner = num_actions, feature_dim, owner
        self.input_dropout = nn.Dropout(input_dropout)
        self.visual_encoder = LinearPair(feature_dim, 2 * feature_dim, embed_dim)
        self.text_encoder = nn.Linear(text_dim, embed_dim, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(INIT_LOGIT_SCALE))
        self._init_text(text_embeddings, text_dim)

    def _init_text(self, text_cfg: Optional[dict], text_dim: int) -> None:
        """Frozen state-description features (N, 6, Dt) as a non-persistent buffer, or None."""
        if text_cfg is None:
            self.register_buffer('state_features', None, persistent=False)
            return
        if not isinstance(text_cfg, dict):  # 0 or 'x': a TypeError from ** otherwise
            raise ValueError(f'model.text_embeddings={text_cfg!r}; expected a dict (e.g. '
                             "dict(file='{data_root}/niv/state_features_clip.npy')) or None")
        features = load_state_features(**text_cfg)
        expected = (self.num_actions, 6, text_dim)
        if tuple(features.shape) != expected:
            raise ValueError(f'model.text_embeddings={dict(text_cfg)}: state features have '
                             f'shape {tuple(features.shape)}; expected {expected} '
                             '(num_actions, 3 before + 3 after sentences, text_dim)')
        self.register_buffer('state_features', features.float(), persistent=False)

    def set_state_features(self, features: torch.Tensor) -> None:
        """Install state-description features (N, 6, Dt) (e.g. an oracle fixture's own)."""
        expected = (self.num_actions, 6, self.text_encoder.in_features)
        if tuple(features.shape) != expected:
            raise ValueError(f'state features have shape {tuple(features.shape)}; expected '
                             f'{expected} (num_actions, 3 before + 3 after, text_dim)')
        self.register_buffer('state_features', features.float(), persistent=False)

    def encode(self, observations: torch.Tensor) -> torch.Tensor:
        """Embeddings (..., E) of observations (..., D)."""
        check_observation_dim(self.owner, observations, self.feature_dim)
        return self.visual_encoder(self.input_dropout(observations))

    def encode_ends(self, inputs: Dict[str, torch.Tensor]) -> torch.Tensor:
        """Encoded [start, goal] (B, 2, E) of ``inputs['start']``, ``inputs['goal']`` (B, D)."""
        return self.encode(torch.stack([inputs['start'], inputs['goal']], 1))

    def encode_text(self) -> torch.Tensor:
        """Projected state descriptions (N, 6, E)."""
        if self.state_features is None:
            raise ValueError(f'{self.owner} was built without state-description features '
                             '(model.text_embeddings is None) but this computation needs them: '
                             "give text_embeddings=dict(file='<(N, 6, 768) .npy>') or a "
                             'taxonomy + state_descriptions + encoder')
        return self.text_encoder(self.input_dropout(self.state_features))

    def state_logits(self, states: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """(B, 2, N) scaled cosine similarity of start / goal (B, 2, E) with the "before" /
        "after" descriptions (N, 6, E) of each action, averaged over the 3 sentences."""
        text = text.view(self.num_actions, 2, -1, text.shape[-1]).transpose(0, 1)  # (2,N,3,E)
        similarity = torch.einsum('bse,sne->bsn', F.normalize(states, dim=-1),
                                  F.normalize(text, dim=-1).flatten(1, 2))
        similarity = similarity.view(*states.shape[:2], self.num_actions, -1).mean(-1)
        return self.logit_scale.exp() * similarity

    def observed_evidence(self, observed: torch.Tensor, horizon: int) -> torch.Tensor:
        """(B, T, N) log evidence of intermediate observations ``observed`` (B, k, D), the
        end states of steps 1..k (dataset ``observed_steps=k``): step i gets the log-softmax
        over actions of its end state's state logits against the "after" descriptions (as the
        goal is scored against the last action), steps k+1..T get 0 (no evidence). Both
        planners add it to their log emissions before decoding (the intermediate-observation
        study)."""
        batch, steps = observed.shape[:2]
        if steps >= horizon:
            raise ValueError(f'{self.owner}: {steps} observed steps of a T={horizon} plan; '
                             f'expected fewer than {horizon}')
        encoded = self.encode(observed).flatten(0, 1).unsqueeze(1)  # (B*k, 1, E)
        after = self.state_logits(encoded.expand(-1, 2, -1), self.encode_text())[:, 1]
        evidence = after.view(batch, steps, -1).log_softmax(-1)
        return F.pad(evidence, (0, 0, 0, horizon - steps))


def rename_legacy_keys(state_dict: dict, prefix: str, expected: Dict[str, torch.Size]) -> None:
    """Move a checkpoint's flat ``visual_encoder.*`` / ``text_encoder.*`` / ``logit_scale``
    (ViterbiPlanNet before the encoder was shared) under ``state_encoder.``, in place; only
    names whose new place exists in ``expected`` ({name below prefix: shape}) with the same
    shape move (another model's tensors stay where the strict loader reports them)."""
    if any(key.startswith(prefix + 'state_encoder.') for key in state_dict):
        return
    for key in [k for k in state_dict if k.startswith(prefix)]:
        name = key[len(prefix):]
        for old, new in LEGACY_PREFIXES.items():
            target = new + name[len(old):]
            fits = getattr(state_dict[key], 'shape', None) == expected.get(target)
            if name.startswith(old) and fits:
                state_dict[prefix + target] = state_dict.pop(key)
                break

"""PDPP's 1-D temporal U-Net over the plan horizon (official ``model/temporal.py``), plain torch.

Input and output (B, T, C) with C = K + N + D per step; inside, channels-first (B, C', T').
Down path: levels C->dim, dim->2dim, 2dim->4dim, two residual blocks each, the output kept as
a skip, then ``Conv1d(k=2)`` (T' - 1) except at the last level; middle: two blocks at 4dim;
up path: two levels ``cat([x, skip])`` -> two blocks -> ``ConvTranspose1d(k=2)`` (T' + 1),
the first level's skip is never used (as the official code); lengths
T -> T-1 -> T-2 -> T-1 -> T, so T >= 3 (T >= len(dim_mults) in general).
Parameter names follow the official ones except ``Conv1dBlock``'s ``block.0``/``block.2``, here
``conv``/``norm`` (:func:`official_name`).
"""
import re
from typing import Dict, Mapping

import torch
from torch import nn

from ..core import diffusion
from ..core.diffusion import sinusoidal_embedding
from ..errors import check_number

GROUPS = 32  # GroupNorm groups of every Conv1dBlock (official n_groups)


class SinusoidalEmbedding(nn.Module):
    """(B,) timesteps -> (B, dim) (core.diffusion.sinusoidal_embedding)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return sinusoidal_embedding(t, self.dim)


class Conv1dBlock(nn.Module):
    """Conv1d(k=3, pad 1) -> GroupNorm(32) -> Mish on (B, C_in, L) -> (B, C_out, L); ``zero``
    zeroes the conv (official ``if_zero``: the output starts input-independent)."""

    def __init__(self, in_channels: int, out_channels: int, zero: bool = False):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, 3, padding=1)
        self.norm = nn.GroupNorm(GROUPS, out_channels)
        self.act = nn.Mish()
        if zero:
            nn.init.zeros_(self.conv.weight)
            nn.init.zeros_(self.conv.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.norm(self.conv(x)))


class ResidualTemporalBlock(nn.Module):
    """block1(x) + Linear(Mish(temb)) over time -> block2 (zero-initialised) + 1x1-conv(x)
    (identity when the widths agree). x (B, C_in, L), temb (B, E) -> (B, C_out, L)."""

    def __init__(self, in_channels: int, out_channels: int, embed_dim: int):
        super().__init__()
        self.blocks = nn.ModuleList([Conv1dBlock(in_channels, out_channels),
                                     Conv1dBlock(out_channels, out_channels, zero=True)])
        self.time_mlp = nn.Sequential(nn.Mish(), nn.Linear(embed_dim, out_channels))
        self.residual_conv = (nn.Conv1d(in_channels, out_channels, 1)
                              if in_channels != out_channels else nn.Identity())

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        out = self.blocks[0](x) + self.time_mlp(temb)[..., None]
        return self.blocks[1](out) + self.residual_conv(x)


class LengthConv(nn.Module):
    """Kernel-2 convolution, stride 1, no padding: (B, C, L) -> (B, C, L-1) (official
    ``Downsample1d``), or transposed (``grow``): (B, C, L) -> (B, C, L+1) (``Upsample1d``)."""

    def __init__(self, channels: int, grow: bool = False):
        super().__init__()
        conv = nn.ConvTranspose1d if grow else nn.Conv1d
        self.conv = conv(channels, channels, 2, 1, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


MAX_DIM = 4096  # the official width is 256; a (4 dim, 4 dim) layer of 4096 is 1 GiB
# D: 3 x 512 S3D rows here; PDPP's task head holds a (D / 3, 4 D) layer (1.4 GiB at 16,384)
MAX_FEATURE_DIM = 16_384


def check_dim_mults(dim_mults) -> tuple:
    """The U-Net's level multipliers: a non-empty list of integers >= 1 (official (1, 2, 4))."""
    if not (isinstance(dim_mults, (tuple, list)) and dim_mults):
        raise ValueError(f'TemporalUNet dim_mults={dim_mults!r}; expected a non-empty list of '
                         'integers >= 1 (official (1, 2, 4))')
    for mult in dim_mults:
        check_number(f'TemporalUNet dim_mults={tuple(dim_mults)!r}: entry', mult, integer=True,
                     low=1)
    return tuple(dim_mults)


class TemporalUNet(nn.Module):
    """x (B, T, C) and timesteps t (B,) -> predicted x0 (B, T, C).

    Args:
        transition_dim: C = K + N + D.
        dim: width of the first level (official 256; a multiple of 32 for GroupNorm).
        dim_mults: width multipliers of the levels (official (1, 2, 4)).
    """

    def __init__(self, transition_dim: int, dim: int = 256, dim_mults=(1, 2, 4)):
        super().__init__()
        self.arguments = (transition_dim, dim, tuple(dim_mults))  # to draw it anew
        check_number('TemporalUNet transition_dim (K + N + D)', transition_dim, integer=True,
                     low=1)
        check_number('TemporalUNet dim', dim, integer=True, low=GROUPS, high=MAX_DIM)
        if dim % GROUPS:
            raise ValueError(f'TemporalUNet dim={dim}; expected a multiple of {GROUPS} '
                             '(GroupNorm groups)')
        check_dim_mults(dim_mults)
        dims = [transition_dim, *(dim * m for m in dim_mults)]
        levels = list(zip(dims[:-1], dims[1:]))
        self.time_mlp = nn.Sequential(SinusoidalEmbedding(dim), nn.Linear(dim, dim * 4),
                                      nn.Mish(), nn.Linear(dim * 4, dim))
        self.downs = nn.ModuleList([
            nn.ModuleList([ResidualTemporalBlock(d_in, d_out, dim),
                           ResidualTemporalBlock(d_out, d_out, dim),
                           LengthConv(d_out) if i < len(levels) - 1 else nn.Identity()])
            for i, (d_in, d_out) in enumerate(levels)])
        self.mid_block1 = ResidualTemporalBlock(dims[-1], dims[-1], dim)
        self.mid_block2 = ResidualTemporalBlock(dims[-1], dims[-1], dim)
        self.ups = nn.ModuleList([
            nn.ModuleList([ResidualTemporalBlock(d_out * 2, d_in, dim),
                           ResidualTemporalBlock(d_in, d_in, dim), LengthConv(d_in, grow=True)])
            for d_in, d_out in reversed(levels[1:])])
        self.final_conv = nn.Sequential(Conv1dBlock(dim, dim, zero=True),
                                        nn.Conv1d(dim, transition_dim, 1))
        self.min_horizon = len(levels)  # one length-reducing convolution per level but the last

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if x.shape[1] < self.min_horizon:
            raise ValueError(f'TemporalUNet needs a horizon T >= {self.min_horizon} (one '
                             'length-reducing convolution per level but the last); got x of '
                             f'shape {tuple(x.shape)} (B, T, C)')
        x, temb = x.transpose(1, 2), self.time_mlp(t)
        skips = []
        for block1, block2, downsample in self.downs:
            x = block2(block1(x, temb), temb)
            skips.append(x)
            x = downsample(x)
        x = self.mid_block2(self.mid_block1(x, temb), temb)
        for block1, block2, upsample in self.ups:
            x = upsample(block2(block1(torch.cat((x, skips.pop()), 1), temb), temb))
        return self.final_conv(x).transpose(1, 2)


class DiffusionModel(nn.Module):
    """Base of the diffusion models on a ``TemporalUNet`` (PDPP's, KEPP's plan and step models):
    the horizons its U-Net takes, the cosine schedule's buffers and the DDIM timesteps."""

    @staticmethod
    def check_horizon(method: str, horizon: int, dim_mults) -> None:
        if horizon < len(check_dim_mults(dim_mults)):
            raise ValueError(f'{method} horizon={horizon}: its U-Net with dim_mults={dim_mults} '
                             f'needs T >= {len(dim_mults)} (the official code: T >= 3)')

    @staticmethod
    def check_inputs(method: str, feature_dim: int, sampling_seed: int) -> None:
        """D and the per-window seed, by name (a string seed would be multiplied by the seed
        stride, ``True`` read as 1, a float or NaN refused only at the first sample)."""
        check_number(f'{method} model.feature_dim', feature_dim, integer=True, low=1,
                     high=MAX_FEATURE_DIM)
        # x_T's generator is seeded with sampling_seed * 1000003 + window (KEPP: x 2 + stream),
        # which torch accepts below 2**64: the seed range of numpy, as every seed here
        check_number(f'{method} model.sampling_seed', sampling_seed, integer=True, low=0,
                     high=2 ** 32 - 1)

    def register_schedule(self, n_timesteps: int, option: str = 'model.n_timesteps') -> None:
        """``core.diffusion.SCHEDULE_BUFFERS`` of n steps as buffers, and the DDIM timesteps
        (``option``: the config key of n, named when it is fewer than the DDIM jumps)."""
        check_number(f'{option} (diffusion steps)', n_timesteps, integer=True, low=1,
                     high=diffusion.MAX_DIFFUSION_STEPS)
        if n_timesteps < diffusion.DDIM_STEPS:  # ddim_timesteps' own words named no key
            raise ValueError(f'{option}={n_timesteps}: fewer diffusion steps than the '
                             f'{diffusion.DDIM_STEPS} jumps of the official DDIM sampler; '
                             f'expected {option} >= {diffusion.DDIM_STEPS}')
        for name, value in diffusion.diffusion_schedule(n_timesteps).items():
            self.register_buffer(name, value)
        self.ddim_timestep_seq = diffusion.ddim_timesteps(n_timesteps)

    def schedule(self) -> Dict[str, torch.Tensor]:
        return {name: getattr(self, name) for name in diffusion.SCHEDULE_BUFFERS}

    @staticmethod
    def steps_shown_by(state_dict: Mapping, prefix: str) -> dict:
        """``{'n': (diffusion steps, what shows them)}`` of the schedule a state dict holds
        under ``prefix`` (its ``betas``: one per step); {} without one."""
        betas = state_dict.get(f'{prefix}betas')
        if not isinstance(betas, torch.Tensor) or betas.dim() != 1:
            return {}
        return {'n': (int(betas.shape[0]), f'{prefix}betas: a diffusion schedule of '
                                           f'{int(betas.shape[0])} steps')}


def official_name(name: str) -> str:
    """The official PDPP parameter name of one of ``TemporalUNet``'s (``*.conv.*`` of a
    ``Conv1dBlock`` is ``*.block.0.*``, ``*.norm.*`` is ``*.block.2.*``)."""
    name = re.sub(r'(blocks\.\d|final_conv\.0)\.conv\.', r'\1.block.0.', name)
    return re.sub(r'(blocks\.\d|final_conv\.0)\.norm\.', r'\1.block.2.', name)


def from_official(shapes: Mapping[str, tuple], official: Mapping, source: str,
                  ours: str = 'the U-Net built from the config') -> dict:
    """``{name: official value}`` for the ``TemporalUNet`` parameters ``shapes``
    (``{name: shape}``), from ``official`` (a ``GaussianDiffusion`` state dict: the U-Net
    under ``model.``, PDPP's names, :func:`official_name`); every name and shape checked and
    every official ``model.*`` entry used, or a ``ValueError`` naming ``source``."""
    found = {}
    for name, shape in shapes.items():
        key = 'model.' + official_name(name)
        if key not in official:
            raise ValueError(f'{source}: no {key} for the parameter {name} of {ours}')
        if tuple(official[key].shape) != tuple(shape):
            raise ValueError(f'{source}: {key} has shape {tuple(official[key].shape)}, the '
                             f'parameter {name} of {ours} {tuple(shape)}')
        found[name] = official[key]
    used = {'model.' + official_name(name) for name in shapes}
    extra = sorted(k for k in official if k.startswith('model.') and k not in used)
    if extra:
        raise ValueError(f'{source}: official parameters {extra} have no counterpart in {ours}')
    return found

"""S3D, the MIL-NCE HowTo100M text-video network the datasets' 512-d features come from.

The function of the official PyTorch model (antoine77340/S3D_HowTo100M ``s3dg.py``: ``S3D``,
``Sentence_Embedding``), under its parameter names, so that ``s3d_howto100m.pth`` loads with
strict loading (``vpn_plugin.apis.init_s3d``). Registered in ``MODELS`` as ``S3D`` (a backbone):

* video ``(B, 3, T, H, W)`` RGB in [0, 1] (uint8 / 255, no mean/std), T, H, W even ->
  ``{'video_embedding': (B, 512), 'mixed_5c': (B, 1024)}``; the datasets' rows are
  ``video_embedding`` of 16-frame chunks (``vpn_plugin.video``);
* sentences -> ``{'text_embedding': (B, 512)}`` with the official tokenisation
  (:meth:`S3D.token_ids`) over the word dictionary ``s3d_dict.npy`` (read without pickle).

Facts kept from the official port (../shared/reference/README.md, section S3D): space-to-depth
before ``conv1`` and the crop ``[:, :, 1:, 1:, 1:]`` after it; the four max pools pad with
zeros by a fixed ``k - s`` split (floor before) whatever the input size, then pool with
``ceil_mode=True`` -- this is *not* TensorFlow SAME on odd sizes; BatchNorm eps 1e-5;
self-gating ``sigmoid(fc(mean over T, H, W)) * x`` on each inception branch and after
``conv_2c``; ``mixed_5c`` is the mean over (T, H, W) of the last block.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from vpn_plugin.config_types import Count, Text
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from mmaction.registry import MODELS

EMBEDDING_DIM = 512
VOCABULARY_SIZE, WORD_DIM, MAX_WORDS, TEXT_HIDDEN = 66250, 300, 16, 2048
WORD_PATTERN = re.compile(r"[\w']+")
# the taps of ``S3D.forward(..., taps=...)``: where the oracle fixture records activations
TAPS = ('conv1', 'conv_2c_gated', 'mixed_3c', 'mixed_4f', 'mixed_5c_map')
# (input, b0 1x1, b1 1x1, b1 3x3, b2 1x1, b2 3x3, b3 1x1) of each inception block
INCEPTION_WIDTHS = {
    'mixed_3b': (192, 64, 96, 128, 16, 32, 32),
    'mixed_3c': (256, 128, 128, 192, 32, 96, 64),
    'mixed_4b': (480, 192, 96, 208, 16, 48, 64),
    'mixed_4c': (512, 160, 112, 224, 24, 64, 64),
    'mixed_4d': (512, 128, 128, 256, 24, 64, 64),
    'mixed_4e': (512, 112, 144, 288, 32, 64, 64),
    'mixed_4f': (528, 256, 160, 320, 32, 128, 128),
    'mixed_5b': (832, 256, 160, 320, 32, 128, 128),
    'mixed_5c': (832, 384, 192, 384, 48, 128, 128),
}


class STConv3D(nn.Module):
    """Conv (no bias) -> BN -> ReLU; ``separable``: a (1, k, k) spatial conv then a (k, 1, 1)
    temporal one, each with its BN and ReLU (official names ``conv1 bn1 [conv2 bn2]``)."""

    def __init__(self, in_channels: int, out_channels: int, kernel, padding=0,
                 separable: bool = False, stride: int = 1):
        super().__init__()
        kernel = tuple(kernel)
        padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * 3
        self.separable = separable
        if separable:
            self.conv1 = nn.Conv3d(in_channels, out_channels, (1,) + kernel[1:],
                                   padding=(0,) + padding[1:], bias=False)
            self.bn1 = nn.BatchNorm3d(out_channels)
            self.conv2 = nn.Conv3d(out_channels, out_channels, kernel[:1] + (1, 1),
                                   padding=padding[:1] + (0, 0), bias=False)
            self.bn2 = nn.BatchNorm3d(out_channels)
        else:
            self.conv1 = nn.Conv3d(in_channels, out_channels, kernel, stride=stride,
                                   padding=padding, bias=False)
            self.bn1 = nn.BatchNorm3d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(x))) if self.separable else x


class SelfGating(nn.Module):
    """``x * sigmoid(fc(mean of x over T, H, W))`` per channel."""

    def __init__(self, channels: int):
        super().__init__()
        self.fc = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.sigmoid(self.fc(x.mean(dim=(2, 3, 4))))
        return x * weights[:, :, None, None, None]


class PortedTFMaxPool3d(nn.Module):
    """The official port of TF's 'SAME' max pooling: zero padding of ``k - s`` per dimension
    (``(k - s) // 2`` before, the rest after), fixed whatever the input size, then
    ``MaxPool3d(ceil_mode=True)``. On an odd size with k=3, s=2 this differs from TF SAME."""

    def __init__(self, kernel: Sequence[int], stride: Sequence[int]):
        super().__init__()
        self.kernel, self.stride = tuple(kernel), tuple(stride)
        pads = [(max(k - s, 0) // 2, max(k - s, 0) - max(k - s, 0) // 2)
                for k, s in zip(self.kernel, self.stride)]
        # F.pad order: W (before, after), H, T. (The official tuple gives W the amounts of H and
        # H those of W; the same here, every pool being square in H x W.)
        self.padding = pads[2] + pads[1] + pads[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool3d(F.pad(x, self.padding, value=0.0), self.kernel, self.stride,
                            ceil_mode=True)


class InceptionBlock(nn.Module):
    """Four self-gated branches concatenated: 1x1x1; 1x1x1 -> separable 3x3x3; 1x1x1 ->
    separable 3x3x3; 3x3x3 max pool (stride 1, implicit -inf padding) -> 1x1x1."""

    def __init__(self, widths: Sequence[int]):
        super().__init__()
        cin, b0, b1a, b1b, b2a, b2b, b3 = widths
        self.conv_b0 = STConv3D(cin, b0, (1, 1, 1))
        self.conv_b1_a = STConv3D(cin, b1a, (1, 1, 1))
        self.conv_b1_b = STConv3D(b1a, b1b, (3, 3, 3), padding=1, separable=True)
        self.conv_b2_a = STConv3D(cin, b2a, (1, 1, 1))
        self.conv_b2_b = STConv3D(b2a, b2b, (3, 3, 3), padding=1, separable=True)
        self.conv_b3_b = STConv3D(cin, b3, (1, 1, 1))
        self.gating_b0, self.gating_b1 = SelfGating(b0), SelfGating(b1b)
        self.gating_b2, self.gating_b3 = SelfGating(b2b), SelfGating(b3)
        self.output_dim = b0 + b1b + b2b + b3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branches = (
            self.gating_b0(self.conv_b0(x)),
            self.gating_b1(self.conv_b1_b(self.conv_b1_a(x))),
            self.gating_b2(self.conv_b2_b(self.conv_b2_a(x))),
            self.gating_b3(self.conv_b3_b(F.max_pool3d(x, 3, stride=1, padding=1))))
        return torch.cat(branches, dim=1)


def space_to_depth(video: torch.Tensor) -> torch.Tensor:
    """(B, C, T, H, W) -> (B, 8C, T/2, H/2, W/2); channel ``((dt*2 + dh)*2 + dw)*C + c``."""
    b, c, t, h, w = video.shape
    if t % 2 or h % 2 or w % 2:
        raise ValueError(f'S3D input of shape {tuple(video.shape)}: T, H and W must be even '
                         '(space-to-depth pairs frames and pixels)')
    x = video.reshape(b, c, t // 2, 2, h // 2, 2, w // 2, 2)
    return x.permute(0, 3, 5, 7, 1, 2, 4, 6).reshape(b, 8 * c, t // 2, h // 2, w // 2)


def read_word_dictionary(path) -> Dict[str, int]:
    """``s3d_dict.npy`` -> {word: token id}; id = index + 1 (0 pads); a repeated word keeps its
    last index, as the official dict comprehension does. Read without pickle."""
    path = Path(path)
    try:
        words = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ValueError(f'cannot read the S3D word dictionary {path}: {error}; expected '
                         's3d_dict.npy, a numpy array of strings') from error
    if words.ndim != 1 or words.dtype.kind not in 'US':
        raise ValueError(f'S3D word dictionary {path} holds a {words.dtype} array of shape '
                         f'{words.shape}; expected a 1-d array of strings (s3d_dict.npy)')
    if words.dtype.kind == 'S':
        words = np.char.decode(words, 'utf-8')
    return {str(word): index + 1 for index, word in enumerate(words)}


class SentenceEmbedding(nn.Module):
    """``fc2(max over 16 word positions of relu(fc1(word_embd[ids])))`` (official names)."""

    def __init__(self, embedding_dim: int = EMBEDDING_DIM, vocabulary: Optional[dict] = None):
        super().__init__()
        self.word_embd = nn.Embedding(VOCABULARY_SIZE, WORD_DIM)
        self.fc1 = nn.Linear(WORD_DIM, TEXT_HIDDEN)
        self.fc2 = nn.Linear(TEXT_HIDDEN, embedding_dim)
        self.vocabulary = vocabulary

    def token_ids(self, sentences: Sequence[str]) -> torch.Tensor:
        """(B, 16) int64: each sentence lowered, split by ``[\\w']+``, unknown words dropped,
        the first 16 known ids kept, zero-padded."""
        if self.vocabulary is None:
            raise ValueError('S3D text embedding needs the word dictionary s3d_dict.npy: build '
                             'S3D with dict_path=... (vpn_plugin.apis.init_s3d(dict_path=...))')
        rows = []
        for sentence in sentences:
            ids = [self.vocabulary[word] for word in WORD_PATTERN.findall(str(sentence).lower())
                   if word in self.vocabulary][:MAX_WORDS]
            rows.append(ids + [0] * (MAX_WORDS - len(ids)))
        return torch.tensor(rows, dtype=torch.long).reshape(len(rows), MAX_WORDS)

    def fc1_maxpool(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, 16) ids -> (B, 2048), the input of ``fc2``."""
        return F.relu(self.fc1(self.word_embd(ids))).amax(dim=1)

    def forward(self, sentences: Sequence[str]) -> Dict[str, torch.Tensor]:
        ids = self.token_ids(sentences).to(self.word_embd.weight.device)
        return {'text_embedding': self.fc2(self.fc1_maxpool(ids))}


@MODELS.register_module()
class S3D(nn.Module):
    """S3D-G with space-to-depth and the text module (module docstring).

    Args:
        dict_path: ``s3d_dict.npy`` (only the text embedding needs it).
        num_classes: embedding size (512 for the HowTo100M weights).
        gating: accepted for the official signature and, as there, without effect: the
            official constructor builds its inception blocks with their default (gated) and
            overwrites the flag with the gate after ``conv_2c``, so every gate is always on.
        space_to_depth: the HowTo100M layout; False: a plain 3x7x7 stride-2 ``conv1``.
    """

    def __init__(self, dict_path: Optional[Text] = None, num_classes: Count = EMBEDDING_DIM,
                 gating: bool = True, space_to_depth: bool = True):
        super().__init__()
        self.space_to_depth = space_to_depth
        self.conv1 = (STConv3D(24, 64, (2, 4, 4), padding=(1, 2, 2)) if space_to_depth
                      else STConv3D(3, 64, (3, 7, 7), padding=(1, 3, 3), stride=2))
        self.conv_2b = STConv3D(64, 64, (1, 1, 1))
        self.conv_2c = STConv3D(64, 192, (3, 3, 3), padding=1, separable=True)
        self.gating = SelfGating(192)
        self.maxpool_2a = PortedTFMaxPool3d((1, 3, 3), (1, 2, 2))
        self.maxpool_3a = PortedTFMaxPool3d((1, 3, 3), (1, 2, 2))
        self.maxpool_4a = PortedTFMaxPool3d((3, 3, 3), (2, 2, 2))
        self.maxpool_5a = PortedTFMaxPool3d((2, 2, 2), (2, 2, 2))
        for name, widths in INCEPTION_WIDTHS.items():
            self.add_module(name, InceptionBlock(widths))
        self.fc = nn.Linear(self.mixed_5c.output_dim, num_classes)
        vocabulary = read_word_dictionary(dict_path) if dict_path is not None else None
        self.text_module = SentenceEmbedding(num_classes, vocabulary)

    def forward(self, video: torch.Tensor, taps: Optional[dict] = None
                ) -> Dict[str, torch.Tensor]:
        """(B, 3, T, H, W) in [0, 1] -> ``video_embedding`` (B, 512), ``mixed_5c`` (B, 1024);
        ``taps``: a dict that receives the activations named in :data:`TAPS`."""
        taps = {} if taps is None else taps
        if self.space_to_depth:  # the crop replicates TF's SAME padding of the strided conv
            x = self.conv1(space_to_depth(video))[:, :, 1:, 1:, 1:]
        else:
            x = self.conv1(video)
        taps['conv1'] = x
        x = self.gating(self.conv_2c(self.conv_2b(self.maxpool_2a(x))))
        taps['conv_2c_gated'] = x
        x = self.mixed_3c(self.mixed_3b(self.maxpool_3a(x)))
        taps['mixed_3c'] = x
        x = self.maxpool_4a(x)
        for name in ('mixed_4b', 'mixed_4c', 'mixed_4d', 'mixed_4e', 'mixed_4f'):
            x = getattr(self, name)(x)
        taps['mixed_4f'] = x
        x = self.mixed_5c(self.mixed_5b(self.maxpool_5a(x)))
        taps['mixed_5c_map'] = x
        pooled = x.mean(dim=(2, 3, 4))
        return {'video_embedding': self.fc(pooled), 'mixed_5c': pooled}

    def text_embedding(self, sentences: Sequence[str]) -> torch.Tensor:
        """(B, 512) embeddings of ``sentences`` (official tokenisation)."""
        return self.text_module(list(sentences))['text_embedding']

    def token_ids(self, sentences: Sequence[str]) -> torch.Tensor:
        return self.text_module.token_ids(list(sentences))


def tap_channels(channels: int, count: int = 8) -> List[int]:
    """``round(linspace(0, C - 1, count))``: channels spanning the 4 inception branches."""
    return [int(c) for c in np.round(np.linspace(0, channels - 1, count))]

"""Frames -> network input: P3IV's ``embed_full_video`` cut, as plain torch/numpy.

Frames ``(T, H, W, 3)`` uint8 RGB are cut into non-overlapping chunks of ``chunk`` frames
(16: one per second at 16 fps); the last partial chunk is padded with black (zero) frames, so
a video gives ``ceil(T / chunk)`` rows. Values are ``uint8 / 255`` in float32 (a float32
division, equal to P3IV's float64 division cast to float32 for every uint8), no mean/std.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np
import torch

CHUNK_FRAMES = 16


def chunk_count(num_frames: int, chunk: int = CHUNK_FRAMES) -> int:
    """Rows a video of ``num_frames`` frames gives: ``ceil(num_frames / chunk)``."""
    return math.ceil(num_frames / chunk)


def frames_to_chunks(frames: np.ndarray, chunk: int = CHUNK_FRAMES) -> torch.Tensor:
    """(T, H, W, 3) uint8 -> (N, 3, chunk, H, W) float32 in [0, 1], N = ceil(T / chunk); the
    last chunk padded with zero frames."""
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f'frames of shape {frames.shape} and dtype {frames.dtype}; expected '
                         '(T, H, W, 3) uint8 RGB')
    t, h, w, _ = frames.shape
    n = chunk_count(t, chunk)
    padded = np.zeros((n * chunk, h, w, 3), np.uint8)
    padded[:t] = frames
    video = torch.from_numpy(padded).reshape(n, chunk, h, w, 3).permute(0, 4, 1, 2, 3)
    return video.float() / 255


def embed_frames(network: Callable, frames: np.ndarray, chunk: int = CHUNK_FRAMES,
                 batch_chunks: int = 8, on_rows: Optional[Callable[[int], None]] = None
                 ) -> torch.Tensor:
    """(ceil(T / chunk), D) rows: ``network(chunks)['video_embedding']`` of each chunk, computed
    ``batch_chunks`` chunks at a time (the network works per sample: eval-mode BatchNorm);
    ``on_rows(n)`` after each call (progress)."""
    chunks = frames_to_chunks(frames, chunk)
    device = next(network.parameters()).device
    rows = []
    with torch.no_grad():
        for i in range(0, len(chunks), batch_chunks):
            batch = chunks[i:i + batch_chunks]
            rows.append(network(batch.to(device))['video_embedding'].float().cpu())
            if on_rows is not None:
                on_rows(len(batch))
    return torch.cat(rows)

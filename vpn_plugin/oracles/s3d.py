"""The ``S3D`` checker of ``oracles.compare``: a fixture of the official S3D_HowTo100M code
(``../shared/reference/s3d_small``, README "Reference outputs of S3D") recomputed with this
plugin's ``S3D`` (built from ``MODELS``, its weights loaded strictly under the official names
through ``engine.checkpoint.load_weights``) and ``vpn_plugin.video``'s chunking.

Nothing about the fixture's sizes is assumed: every ``<video>_uint8`` (B, 3, T, H, W) of
``inputs.npz`` gives ``<video>_video_embedding``, ``_mixed_5c``, ``_s2d_corner`` and, per tap
(``models.s3d.TAPS``), ``_shape``, ``_mean``, ``_channels``, ``_tl``, ``_br``; every
``<name>_frames_uint8`` (T, H, W, 3) gives ``<name>_frames_features`` (16-frame chunks, the last
one padded with black; another length when meta.json's ``chunks`` says so); the constructor
arguments (``num_classes``, ``gating``, ``space_to_depth``) come from meta.json's
``constructor``; ``sentences`` gives ``text_token_ids``, ``text_fc1_maxpool`` and
``text_embedding``. Float arrays are compared relatively (max abs diff / max abs reference,
1e-4: the README's float64-vs-float32 floor is ~1e-5 on values within about +-2, and torch's
thread count changes summation order well below that); integer arrays exactly.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict

import numpy as np
import torch

from .compare import OUTPUT_TOLERANCE, check_fixture_state_dict, compare_file, read_npz
from ..engine.checkpoint import load_weights
from ..models.s3d import TAPS, space_to_depth, tap_channels
from ..video.chunking import CHUNK_FRAMES, embed_frames

CORNER = 4  # the tl / br taps are act[:, channels, :, :4, :4] and act[..., -4:, -4:]


def constructor_args(meta: dict) -> dict:
    """``num_classes``, ``gating``, ``space_to_depth`` of meta.json's ``S3D(dict_path, 512)
    (defaults gating=True, space_to_depth=True)``."""
    text = str(meta.get('constructor', 'S3D(dict_path, 512)')).split(';')[0]
    call = re.search(r'S3D\(([^)]*)\)', text)
    args = [a.strip() for a in call.group(1).split(',')] if call else []
    kwargs = {}
    if len(args) > 1 and args[1].isdigit():
        kwargs['num_classes'] = int(args[1])
    for name in ('gating', 'space_to_depth', 'num_classes'):
        found = re.search(rf'\b{name}\s*=\s*(True|False|\d+)', text)
        if found and name not in kwargs:
            value = found.group(1)
            kwargs[name] = int(value) if value.isdigit() else value == 'True'
    return kwargs


def chunk_frames(meta: dict) -> int:
    """Frames per chunk of the fixture's chunking (``chunks.procedure``: "chunks of 16
    frames"), 16 (P3IV) when not stated."""
    chunks = meta.get('chunks', {}) or {}
    for key in ('chunk_frames', 'num_frames'):
        if isinstance(chunks.get(key), int):
            return chunks[key]
    found = re.search(r'chunks of (\d+) frames', str(chunks.get('procedure', '')))
    return int(found.group(1)) if found else CHUNK_FRAMES


def build_s3d(fixture: Path, meta: dict = None):
    """The registered ``S3D`` with the fixture's constructor arguments, dictionary and weights
    (strict, eval mode)."""
    from mmaction.registry import MODELS
    model = MODELS.build(dict(type='S3D', dict_path=str(fixture / 'dict.npy'),
                              **constructor_args(meta or {})))
    state = {k: torch.from_numpy(v.astype(np.float32) if v.dtype == np.float16 else v)
             for k, v in read_npz(fixture / 'state_dict.npz').items()}
    check_fixture_state_dict(fixture / 'state_dict.npz', state, model)
    load_weights(model, {'state_dict': state}, str(fixture / 'state_dict.npz'))
    return model.eval()


def video_outputs(model, name: str, video_uint8: np.ndarray) -> Dict[str, np.ndarray]:
    """Every recorded array of one video batch (module docstring)."""
    video = torch.from_numpy(video_uint8).float() / 255
    taps = {}
    with torch.no_grad():
        out = model(video, taps=taps)
    values = {f'{name}_video_embedding': out['video_embedding'],
              f'{name}_mixed_5c': out['mixed_5c']}
    if model.space_to_depth:
        values[f'{name}_s2d_corner'] = space_to_depth(video)[:, :, :2, :2, :2]
    for tap in TAPS:
        act = taps[tap]
        channels = tap_channels(act.shape[1])
        values.update({
            f'{name}_{tap}_shape': np.asarray(act.shape, np.int64),
            f'{name}_{tap}_mean': act.mean(dim=(2, 3, 4)),
            f'{name}_{tap}_channels': np.asarray(channels, np.int64),
            f'{name}_{tap}_tl': act[:, channels, :, :CORNER, :CORNER],
            f'{name}_{tap}_br': act[:, channels, :, -CORNER:, -CORNER:]})
    return values


def text_outputs(model, sentences) -> Dict[str, np.ndarray]:
    ids = model.token_ids([str(s) for s in sentences])
    with torch.no_grad():
        pooled = model.text_module.fc1_maxpool(ids)
        embedding = model.text_embedding([str(s) for s in sentences])
    return dict(text_token_ids=ids, text_fc1_maxpool=pooled, text_embedding=embedding)


def recompute(model, inputs: Dict[str, np.ndarray], chunk: int = CHUNK_FRAMES
              ) -> Dict[str, np.ndarray]:
    values = {}
    for key, array in inputs.items():
        frames = re.fullmatch(r'(.+)_frames_uint8', key)
        video = re.fullmatch(r'(.+)_uint8', key)
        if frames and array.ndim == 4:
            values[f'{frames.group(1)}_frames_features'] = embed_frames(model, array, chunk)
        elif video and array.ndim == 5:
            values.update(video_outputs(model, video.group(1), array))
    if 'sentences' in inputs:
        values.update(text_outputs(model, inputs['sentences']))
    return {k: v.detach().cpu().numpy() if torch.is_tensor(v) else np.asarray(v)
            for k, v in values.items()}


VIDEO_OUTPUT = re.compile(r'(.+?)_(video_embedding|mixed_5c|s2d_corner|(?:%s)_'
                          r'(?:shape|mean|channels|tl|br))' % '|'.join(TAPS))


def input_of(output: str) -> str:
    """The array of ``inputs.npz`` whose recomputation gives ``output`` ('' when none does)."""
    if output.startswith('text_'):
        return 'sentences'
    frames = re.fullmatch(r'(.+)_frames_features', output)
    if frames:
        return f'{frames.group(1)}_frames_uint8'
    video = VIDEO_OUTPUT.fullmatch(output)
    return f'{video.group(1)}_uint8' if video else ''


def why_not_computed(inputs: Dict[str, np.ndarray]):
    """name -> what the row of a recorded output that was not recomputed says: its input is
    absent from ``inputs.npz`` or of another rank."""
    def why(output: str) -> str:
        source = input_of(output)
        if not source:
            return 'no input of inputs.npz gives it'
        if source not in inputs:
            return f'inputs.npz has no {source}'
        expected = {'sentences': 1}.get(source, 4 if source.endswith('_frames_uint8') else 5)
        return f'inputs.npz:{source} has shape {inputs[source].shape}; expected {expected} dims'
    return why


def check_counts(model, meta: dict) -> bool:
    """Parameter counts of the fixture's meta (total, text module, video backbone)."""
    counts = meta.get('num_parameters', {})
    ours = {'total': sum(p.numel() for p in model.parameters()),
            'text_module': sum(p.numel() for p in model.text_module.parameters())}
    ours['video'] = ours['total'] - ours['text_module']
    ok = True
    for key, value in ours.items():
        if key in counts:
            good = counts[key] == value
            ok &= good
            print(f'parameters {key}: {value:,} (official {counts[key]:,}) '
                  f'{"ok" if good else "MISMATCH"}')
    return ok


def check_fixture(fixture, meta: dict):
    """(rows, header ok) for an S3D fixture (``oracles.compare`` checker)."""
    fixture = Path(fixture)
    print(f'fixture {fixture}: S3D ({meta.get("official_repo", "?")} '
          f'{str(meta.get("official_commit", "?"))[:7]}), torch threads '
          f'{torch.get_num_threads()}')
    model = build_s3d(fixture, meta)
    header_ok = check_counts(model, meta)
    inputs = read_npz(fixture / 'inputs.npz')
    values = recompute(model, inputs, chunk_frames(meta))
    recorded = read_npz(fixture / 'outputs.npz')
    exact = [k for k, v in recorded.items() if v.dtype.kind in 'iub']
    inexact = [k for k in set(recorded) | set(values) if k not in exact]
    why = why_not_computed(inputs)
    rows = (compare_file(fixture / 'outputs.npz', values, 0.0, names=exact,
                         why_not_computed=why)
            + compare_file(fixture / 'outputs.npz', values, OUTPUT_TOLERANCE, names=inexact,
                           why_not_computed=why))
    return sorted(rows), header_ok

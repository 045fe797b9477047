"""The process's random-number states as checkpoint-safe values (plain torch/numpy, no
mmengine: ``RNGStateHook`` puts them in checkpoints), and :func:`own_seeded_stream`: a block
run on the streams of a freshly seeded process, the caller's streams restored after it."""
from __future__ import annotations

import contextlib
import random

import numpy as np
import torch


def get_rng_states() -> dict:
    """Python, numpy, torch CPU and CUDA (one per device) states, as checkpoint-safe values."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    states = {'python': _to_lists(random.getstate()),
              'numpy': {'kind': kind, 'keys': torch.from_numpy(keys.astype(np.int64)),
                        'position': int(position), 'has_gauss': int(has_gauss),
                        'gauss': float(gauss)},
              'torch': torch.get_rng_state(), 'cuda': []}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states['cuda'] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    """Restore what :func:`get_rng_states` returned."""
    version, internal, gauss = states['python']
    random.setstate((version, tuple(internal), gauss))
    numpy = states['numpy']
    np.random.set_state((numpy['kind'], numpy['keys'].numpy().astype(np.uint32),
                         numpy['position'], numpy['has_gauss'], numpy['gauss']))
    torch.set_rng_state(states['torch'].cpu())
    if states['cuda']:
        if not torch.cuda.is_available() or torch.cuda.device_count() < len(states['cuda']):
            raise RuntimeError(f'the checkpoint holds the RNG states of {len(states["cuda"])} '
                               'CUDA device(s), which this machine does not have; a resume on '
                               'other devices cannot be bit-exact')
        torch.cuda.set_rng_state_all([s.cpu() for s in states['cuda']])


@contextlib.contextmanager
def own_seeded_stream(seed: int):
    """Run the block on python's, numpy's and torch's (CPU and every CUDA device) random
    streams seeded with ``seed``, as a separate process starting with ``random.seed(seed)``,
    ``np.random.seed(seed)``, ``torch.manual_seed(seed)``, ``torch.cuda.manual_seed_all(seed)``
    (the official ``train_mlp.py`` and KEPP's ``step/main_distributed.py``) would draw them;
    afterwards every stream is where it was before the block, whatever the block drew.

    The pre-stage hooks run in it: a run that trains its pre-stage and one that reuses the
    saved file then train the main model from the same point of the streams."""
    if torch.cuda.is_available():
        torch.cuda.init()  # its states saved now, not seeded lazily at its first use
    saved = get_rng_states()
    try:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)  # every CUDA device too
        yield
    finally:
        set_rng_states(saved)


def load_first_draw(target: torch.nn.Module, build, seed: int) -> None:
    """Give ``target`` the initial weights ``build()`` draws as the first module of a process
    seeded with ``torch.manual_seed(seed)`` (an official script building it first); the
    global torch stream is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        drawn = build()
    target.load_state_dict(drawn.state_dict())


def _to_lists(value):
    return [_to_lists(v) for v in value] if isinstance(value, tuple) else value

"""A visual encoder trained first, then loaded and frozen: the sample-efficiency study.

The paper's study trains the visual encoder on the WHOLE training set once (one pre-training
run per seed), then freezes it and shares it between the planners that train on 5..100% of
the windows. A model gets it with ``init_visual_from=<checkpoint of the pre-training run>``
(the protocol runner fills it from its pre-training stage, ``vpn_plugin/protocol/runner.py``)
and ``freeze_visual=True``. Freezing without weights would freeze a *randomly initialised*
encoder, which is not the study: it is an error.
"""
import os
from typing import Optional

from mmengine.logging import print_log
from torch import nn

from ..errors import check_bool, check_file

# where a planner checkpoint keeps the visual encoder: the shared state encoder's, then the
# flat name of ViterbiPlanNet / CompactPlanNet checkpoints
ENCODER_PREFIXES = ('state_encoder.visual_encoder.', 'visual_encoder.')


def init_visual_encoder(encoder: nn.Module, checkpoint: Optional[str] = None,
                        freeze: bool = False, owner: str = 'model') -> None:
    """Load ``encoder``'s weights from a planner ``checkpoint`` (if given), then freeze it
    (``freeze``) or leave it trainable (fine-tuning from the pre-trained weights)."""
    check_bool(f'{owner}: model.freeze_visual', freeze)  # 'x' or -1 is no True, None no False
    if checkpoint is not None and (not isinstance(checkpoint, (str, os.PathLike))
                                   or not str(checkpoint)):
        raise ValueError(f'{owner}: model.init_visual_from={checkpoint!r}; expected the path of '
                         'a planner checkpoint, or None (0 would read as None)')
    if freeze and not checkpoint:
        raise ValueError(
            f'{owner}: model.freeze_visual=True needs model.init_visual_from=<checkpoint of a '
            'planner trained on the whole training set>: freezing a randomly initialised '
            'encoder is not the sample-efficiency study (the protocol runner fills '
            'init_visual_from from its pre-training stage, configs/_base_/protocols/'
            'sample_efficiency.py)')
    if checkpoint:
        load_visual_encoder(encoder, checkpoint, owner)
    encoder.requires_grad_(not freeze)


def load_visual_encoder(encoder: nn.Module, checkpoint: str, owner: str = 'model') -> None:
    """Copy the visual encoder of a planner ``checkpoint`` (mmengine ``.pth``, read with the
    checkpoint allow-list) into ``encoder``; every parameter must be there with its shape."""
    from mmengine.runner.checkpoint import _load_checkpoint
    if '://' not in str(checkpoint):  # mmengine's own message names the value, not the option
        check_file(checkpoint, f'{owner}: model.init_visual_from',
                   f'{owner}: model.init_visual_from={str(checkpoint)!r} does not exist; '
                   'expected the path of a planner checkpoint (.pth)')
    loaded = _load_checkpoint(str(checkpoint), map_location='cpu')
    state = loaded.get('state_dict', loaded) if isinstance(loaded, dict) else {}
    wanted = encoder.state_dict()
    prefix = next((p for p in ENCODER_PREFIXES if any(k.startswith(p) for k in state)), None)
    if prefix is None:
        raise ValueError(f'{owner}: model.init_visual_from={checkpoint} holds no visual '
                         f'encoder (no parameter under {ENCODER_PREFIXES}); expected the '
                         'checkpoint of a trained planner')
    found = {name: state[prefix + name] for name in wanted if prefix + name in state}
    missing = sorted(set(wanted) - set(found))
    wrong = [f'{prefix}{n}: {tuple(found[n].shape)} there, {tuple(v.shape)} here'
             for n, v in wanted.items() if n in found and found[n].shape != v.shape]
    if missing or wrong:
        raise ValueError(f'{owner}: model.init_visual_from={checkpoint}: its visual encoder '
                         f'does not fit this model (missing {[prefix + n for n in missing]}; '
                         f'shapes {wrong}); pre-train with the same feature_dim and embed_dim')
    encoder.load_state_dict(found)
    print_log(f'{owner}: visual encoder loaded from {checkpoint}', logger='current')

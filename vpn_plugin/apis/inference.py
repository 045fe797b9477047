"""``init_planner`` / ``inference_planner``: the one way to run a planner outside a Runner
(``tools/plan.py``, the qualitative figure, the LLM baselines' step-model anchors)."""
from __future__ import annotations

import copy
from typing import Optional, Sequence

import torch

from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from mmengine.dataset import default_collate

SPLITS = ('train', 'val', 'test')


def _config(config, cfg_options: Optional[dict]):
    """An mmengine ``Config`` from a path (``data_paths.load_config``) or a ``Config`` (its
    horizon applied and data locations resolved, as ``load_config`` does)."""
    from mmengine.config import Config
    from vpn_plugin.data_paths import apply_horizon, load_config, resolve_paths
    if isinstance(config, Config):
        config = copy.deepcopy(config)
        if cfg_options:
            config.merge_from_dict(copy.deepcopy(cfg_options))
        return resolve_paths(apply_horizon(config))
    return load_config(config, cfg_options)


def build_split_dataset(cfg, split: str = 'test'):
    """The dataset of ``cfg.<split>_dataloader`` (split in 'train', 'val', 'test'); ``cfg``: a
    config path or ``Config`` (e.g. ``model.cfg`` of :func:`init_planner`), its data
    locations resolved from the repository root whatever the working directory."""
    from mmaction.registry import DATASETS
    if split not in SPLITS:
        raise ValueError(f'split {split!r} is unknown; expected one of {SPLITS}')
    cfg = _config(cfg, None)
    loader = cfg.get(f'{split}_dataloader')
    if not loader or not loader.get('dataset'):
        raise ValueError(f'{cfg.filename}: no {split}_dataloader.dataset to take samples from')
    return DATASETS.build(copy.deepcopy(loader['dataset']))


def init_planner(config, checkpoint: Optional[str] = None, device: str = 'cpu',
                 cfg_options: Optional[dict] = None):
    """A planner in eval mode from a config (path or ``Config``) and an optional checkpoint.

    The PKG comes from the checkpoint; when none carries it and the config has a
    ``train_dataloader``, it is counted on the training split (as ``PKGHook`` does). The
    config is kept as ``model.cfg``.
    """
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmengine.registry import init_default_scope
    from mmengine.runner import load_checkpoint
    from mmaction.registry import MODELS
    cfg = _config(config, cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmaction'))
    model = MODELS.build(cfg.model)
    if checkpoint is not None:
        load_checkpoint(model, str(checkpoint), map_location='cpu', strict=True,
                        logger='silent')
    if not bool(getattr(model, 'pkg_ready', True)) and cfg.get('train_dataloader'):
        model.build_pkg(build_split_dataset(cfg, 'train'))
    model.cfg = cfg
    return model.to(device).eval()


@torch.no_grad()
def inference_planner(model, dataset, indices: Sequence[int], mode: str = 'predict',
                      batch_size: int = 256):
    """The planner's outputs for ``dataset[i]``, i in ``indices``, in that order.

    ``mode='predict'``: a list of ``ActionDataSample`` (``pred_plan`` (T,), ``gt_plan``, ...);
    ``mode='tensor'``: the model's tensor output, concatenated over the batches (M, ...).
    """
    indices = [int(i) for i in indices]
    for i in indices:
        if not 0 <= i < len(dataset):
            raise IndexError(f'sample index {i} is out of range; the dataset has '
                             f'{len(dataset)} samples (0..{len(dataset) - 1})')
    model.eval()
    outputs = []
    for begin in range(0, len(indices), batch_size):
        batch = default_collate([dataset[i] for i in indices[begin:begin + batch_size]])
        batch = model.data_preprocessor(batch, False)
        outputs.append(model(batch['inputs'], batch['data_samples'], mode=mode))
    if mode == 'tensor':
        return torch.cat(outputs) if outputs else torch.empty(0)
    return [sample for chunk in outputs for sample in chunk]

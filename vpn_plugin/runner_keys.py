"""The declared kind of each key of the runner's own config entries (issue 37), which
mmengine, torch and this project read as they come: one table, :data:`RUNNER_KEYS`, checked
by :func:`vpn_plugin.config_types.check_value` in one loop (:func:`check_runner_kinds`) before
anything reads them: ``data_paths.load_config`` (before the horizon and data locations are
applied), ``runner.PlanningRunner.from_cfg`` and ``runner.check_config_entries`` (a protocol's
configs). Checks about more than one value (``save_best`` vs the metrics' keys, ``val_begin``
vs ``max_epochs``, the loops all-or-none) stay in :mod:`vpn_plugin.runner`. Plain Python."""
from __future__ import annotations

import os
from typing import Annotated, Literal, Optional, Union

from vpn_plugin.config_types import (Count, NonNegative, NonNegativeInt, Positive, Range, Seed,
                                     Text, check_value)

# {dotted key: declared kind} (vpn_plugin.config_types) of every key of the runner's own entries
# that mmengine, torch or this project reads: '*' stands for each item of a list;
# a registered entry's options (model, datasets, custom hooks, evaluators, model.pkg) are
# declared by the annotations of its class instead (_check_arguments), a 'type' by its registry.
# A parent is declared before its keys: a non-dict parent is refused before its keys are read.
LOG_LEVELS = ('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL')
MP_START_METHODS = ('fork', 'spawn', 'forkserver')
SPLITS = ('train', 'val', 'test')
_Betas = tuple[Annotated[float, Range(0, 1, high_open=True)],
               Annotated[float, Range(0, 1, high_open=True)]]
_LOADER_KEYS = {
    '': Optional[dict],  # the dataloader itself: None means no such loop
    'batch_size': Count, 'num_workers': NonNegativeInt, 'persistent_workers': bool,
    'pin_memory': bool, 'drop_last': bool, 'shuffle': bool, 'timeout': NonNegative,
    'prefetch_factor': Optional[Count], 'pin_memory_device': str,
    'num_batch_per_epoch': Optional[Count],
    'sampler': Optional[dict], 'sampler.shuffle': bool, 'sampler.seed': Optional[Seed],
    'sampler.round_up': bool,
    'batch_sampler': Optional[dict], 'batch_sampler.drop_last': bool,
    'batch_sampler.batch_size': Count, 'batch_sampler.steps_per_epoch': Count,
    'collate_fn': Optional[dict],
}
RUNNER_KEYS = {
    # top level: mmengine's Runner and this project's switches and variables
    'resume': bool, 'load_from': Optional[Union[Text, os.PathLike]],
    'work_dir': Union[Text, os.PathLike],
    'launcher': Literal['none', 'pytorch', 'slurm', 'mpi'],
    'log_level': Literal[LOG_LEVELS], 'default_scope': Literal['mmaction'],
    'experiment_name': Optional[Text], 'runner_type': Text,
    'unchecked_checkpoint': Optional[bool], 'load_partial': Optional[bool],
    'horizon': Count, 'test_horizon': Optional[Count],
    # None: refused where a path is built from it (data_paths.resolve_paths names the path)
    'data_root': Optional[Text], 'feature_dir': Optional[Text], 'cache_dir': Optional[Text],
    'selection': Optional[Text], 'observation': Text, 'window_policy': Text,
    'batch_size': Count, 'device_resident': bool, 'shortened': Optional[str],
    'find_unused_parameters': bool, 'sync_bn': Optional[Text],
    'vis_backends': Optional[list[dict]],
    'custom_imports': dict, 'custom_imports.imports': Union[Text, list[Text]],
    'custom_imports.allow_failed_imports': bool,
    'model_wrapper_cfg': Optional[dict], 'model_wrapper_cfg.broadcast_buffers': bool,
    'model_wrapper_cfg.find_unused_parameters': bool,
    'randomness': dict, 'randomness.seed': Optional[Seed], 'randomness.deterministic': bool,
    'randomness.diff_rank_seed': bool,
    'env_cfg': dict, 'env_cfg.cudnn_benchmark': bool,
    'env_cfg.mp_cfg': Optional[dict],
    'env_cfg.mp_cfg.mp_start_method': Optional[Literal[MP_START_METHODS]],
    'env_cfg.mp_cfg.opencv_num_threads': NonNegativeInt,
    'env_cfg.dist_cfg': Optional[dict], 'env_cfg.dist_cfg.backend': Text,
    'env_cfg.resource_limit': Count,
    'log_processor': dict, 'log_processor.window_size': Count, 'log_processor.by_epoch': bool,
    'log_processor.num_digits': Annotated[int, Range(0, 16)],
    'log_processor.log_with_hierarchy': bool, 'log_processor.custom_cfg': Optional[list[dict]],
    'log_processor.mean_pattern': Text,
    'visualizer': Optional[dict], 'visualizer.name': Text,
    'visualizer.save_dir': Optional[Text],
    'auto_scale_lr': Optional[dict], 'auto_scale_lr.enable': bool,
    'auto_scale_lr.base_batch_size': Count,
    # loops (train_cfg's options are also held to its loop class's annotations)
    'train_cfg': Optional[dict], 'train_cfg.by_epoch': bool, 'train_cfg.max_epochs': Count,
    'train_cfg.max_iters': Count, 'train_cfg.val_interval': Count,
    'train_cfg.val_begin': Optional[NonNegativeInt],
    **{f'{split}_cfg': Optional[dict] for split in ('val', 'test')},
    **{f'{split}_cfg.fp16': bool for split in ('val', 'test')},
    **{f'{split}_dataloader{"." if key else ""}{key}': kind
       for split in SPLITS for key, kind in _LOADER_KEYS.items()},
    # the optimiser (torch reads its options as numbers, mmengine the wrapper's)
    'model.type': Text,  # a registry name (a list from --cfg-options model.type=X, reached mmengine)
    'optim_wrapper': dict, 'optim_wrapper.optimizer': dict,
    'optim_wrapper.optimizer.lr': NonNegative, 'optim_wrapper.optimizer.weight_decay': NonNegative,
    'optim_wrapper.optimizer.momentum': NonNegative,
    'optim_wrapper.optimizer.dampening': NonNegative,
    'optim_wrapper.optimizer.betas': _Betas, 'optim_wrapper.optimizer.eps': NonNegative,
    **{f'optim_wrapper.optimizer.{switch}': bool for switch in (
        'amsgrad', 'nesterov', 'maximize', 'capturable', 'differentiable')},
    'optim_wrapper.optimizer.fused': Optional[bool],
    'optim_wrapper.optimizer.foreach': Optional[bool],
    'optim_wrapper.accumulative_counts': Annotated[int, Range(1, 10 ** 6)],
    'optim_wrapper.clip_grad': Optional[dict], 'optim_wrapper.clip_grad.max_norm': Positive,
    'optim_wrapper.clip_grad.norm_type': Annotated[float, Range(0, low_open=True, finite=False)],
    'optim_wrapper.clip_grad.clip_value': Positive,
    'optim_wrapper.clip_grad.error_if_nonfinite': bool,
    'optim_wrapper.clip_grad.type': Literal['norm', 'value'],
    'optim_wrapper.dtype': Optional[Literal['float16', 'bfloat16']],
    'optim_wrapper.loss_scale': Union[Literal['dynamic'], Positive, dict],
    # mmengine's default hooks (<= 0 is mmengine's "at the end only" / "keep all")
    'default_hooks': Optional[dict],
    'default_hooks.checkpoint.interval': int, 'default_hooks.checkpoint.max_keep_ckpts': int,
    'default_hooks.checkpoint.by_epoch': bool, 'default_hooks.checkpoint.save_optimizer': bool,
    'default_hooks.checkpoint.save_param_scheduler': bool,
    'default_hooks.checkpoint.save_last': bool,
    'default_hooks.checkpoint.save_begin': NonNegativeInt,
    'default_hooks.checkpoint.out_dir': Optional[Text],
    'default_hooks.checkpoint.filename_tmpl': Optional[Text],
    'default_hooks.checkpoint.save_best': Optional[Union[Text, list[Text]]],
    'default_hooks.checkpoint.rule': Optional[Union[Literal['greater', 'less'],
                                                    list[Literal['greater', 'less']]]],
    'default_hooks.checkpoint.greater_keys': Optional[list[Text]],
    'default_hooks.checkpoint.less_keys': Optional[list[Text]],
    'default_hooks.checkpoint.published_keys': Optional[Union[Text, list[Text]]],
    'default_hooks.checkpoint.file_client_args': Optional[dict],
    'default_hooks.checkpoint.backend_args': Optional[dict],
    'default_hooks.logger.interval': Count, 'default_hooks.logger.ignore_last': bool,
    'default_hooks.logger.interval_exp_name': Count,
    'default_hooks.logger.log_metric_by_epoch': bool,
    'default_hooks.logger.keep_local': bool, 'default_hooks.logger.out_dir': Optional[Text],
    # mmengine's parameter schedulers: factors (finite >= 0: gamma=-1 flips the learning
    # rate's sign, nan makes it NaN) and step counts
    'param_scheduler': Optional[Union[dict, list[dict]]],
    **{f'param_scheduler.*.{key}': NonNegative for key in (
        'gamma', 'start_factor', 'end_factor', 'factor', 'eta_min', 'power')},
    **{f'param_scheduler.*.{key}': Count for key in ('step_size', 'T_max', 'total_iters')},
    'param_scheduler.*.eta_min_ratio': Optional[NonNegative],
    'param_scheduler.*.milestones': list[Count],
    'param_scheduler.*.begin': NonNegativeInt, 'param_scheduler.*.end': Count,
    'param_scheduler.*.by_epoch': bool, 'param_scheduler.*.convert_to_iter_based': bool,
    'param_scheduler.*.verbose': bool,
}
# top-level helper variables of configs/_base_/ (dicts copied into the entries above, where
# their keys are checked): no key of their own is read
CONFIG_HELPERS = ('dataset', 'loader', 'paths', 'train_source', 'test_source',
                  'dataset_variant', 'union', 'union_sources', 'union_model')


def declared_values(cfg, table: dict = None):
    """``(key, value, kind)`` of each key of ``cfg`` the table (default :data:`RUNNER_KEYS`)
    declares, in its order: ``key`` as messages name it (``param_scheduler[0].gamma``). A
    ``param_scheduler`` dict counts as a list of one."""
    for pattern, kind in (RUNNER_KEYS if table is None else table).items():
        found = [('', getattr(cfg, '_cfg_dict', cfg))]  # an mmengine Config: its dict
        for part in pattern.split('.'):
            found = [(f'{name}{sep}{key}', child) for name, value in found
                     for sep, key, child in _children(value, part, name)]
        for name, value in found:
            yield name, value, kind


def _children(value, part: str, name: str):
    if part == '*':
        if isinstance(value, dict) and name.endswith('param_scheduler'):
            value = [value]
        items = enumerate(value) if isinstance(value, (list, tuple)) else ()
        return [('', f'[{index}]', item) for index, item in items]
    if isinstance(value, dict) and part in value:
        return [('.' if name else '', part, value[part])]
    return []


def check_runner_kinds(cfg, where: str, table: dict = None) -> None:
    """:func:`vpn_plugin.config_types.check_value` of every key of :data:`RUNNER_KEYS` (or of
    ``table``, some of them) in ``cfg``: ``ValueError`` ``'<where>: <key>=<value>; expected
    <kind>'``."""
    for key, value, kind in declared_values(cfg, table):
        check_value(f'{where}: {key}', value, kind)

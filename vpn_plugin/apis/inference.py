"""``init_planner`` / ``inference_planner``: the one way to run a planner outside a Runner
(``tools/plan.py``, the qualitative figure, the LLM baselines' step-model anchors:
``step_model_anchors``); ``video_observations`` / ``plan_from_features``: plans for a new
video's own features.

Features of S3D with random weights (a feature file whose ``usable`` field is false, written by
``tools/extract_features.py --random-weights`` or ``tools/plan.py --random-weights
--save-features``; ``init_s3d(random_weights=True)``) mean nothing. One rule for the API and the
tools: they are refused unless asked for (``allow_unusable=True``; the tools' ``--random-weights``),
and then every plan made from them carries ``usable=False`` and ``warning`` in its metainfo
(:class:`UnusableObservations`), which the tools print as ``*** UNUSABLE ... ***``.

The registries are filled by the config itself: its ``custom_imports`` (``vpn_plugin.mm``)
are imported when it is read, as ``mmaction.apis`` relies on; this library imports no
registration module (``tests/test_import_layering.py``)."""
from __future__ import annotations

import contextlib
import copy
import typing
from pathlib import Path
from typing import Iterable, Literal, Optional, Union

import numpy as np
import torch

from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from mmengine.dataset import default_collate

from ..config_types import Count, NonNegative, PathLike, checked_arguments
from ..errors import native_order

Split = Literal['train', 'val', 'test']
SPLITS = typing.get_args(Split)
DEFAULT_FRAME_DIM = 512


def _config(config, cfg_options: Optional[dict]):
    """An mmengine ``Config`` from a path (``data_paths.load_config``) or a ``Config`` (its
    horizon applied and data locations resolved, as ``load_config`` does)."""
    from mmengine.config import Config
    from vpn_plugin.data_paths import apply_horizon, load_config, resolve_paths
    if not isinstance(config, (Config, str, Path)):
        raise TypeError(f'config is a {type(config).__name__}; expected a config file path or an '
                        'mmengine Config (e.g. model.cfg of init_planner; Config(a_dict) for a '
                        'dict)')
    if isinstance(config, Config):
        config = copy.deepcopy(config)
        if cfg_options:
            config.merge_from_dict(copy.deepcopy(cfg_options))
        return resolve_paths(apply_horizon(config))
    return load_config(config, cfg_options)


def _import_custom_modules(cfg) -> None:
    """Import the config's ``custom_imports`` (its registration module, ``vpn_plugin.mm``), as
    ``Config.fromfile`` does: also for a ``Config`` built in memory."""
    from mmengine.utils import import_modules_from_strings
    if cfg.get('custom_imports'):
        import_modules_from_strings(**cfg['custom_imports'])


@checked_arguments
def build_split_dataset(cfg, split: Split = 'test'):
    """The dataset of ``cfg.<split>_dataloader`` (split in 'train', 'val', 'test'); ``cfg``: a
    config path or ``Config`` (e.g. ``model.cfg`` of :func:`init_planner`), its data
    locations resolved from the repository root whatever the working directory."""
    from mmaction.registry import DATASETS
    cfg = _config(cfg, None)
    loader = cfg.get(f'{split}_dataloader')
    if not loader or not loader.get('dataset'):
        raise ValueError(f'{cfg.filename}: no {split}_dataloader.dataset to take samples from')
    return DATASETS.build(copy.deepcopy(loader['dataset']))


@checked_arguments
def init_planner(config, checkpoint: Optional[PathLike] = None,
                 device: Union[str, torch.device] = 'cpu', cfg_options: Optional[dict] = None,
                 partial: bool = False, unchecked: bool = False):
    """A planner in eval mode from a config (path or ``Config``) and an optional checkpoint.

    The checkpoint must fit the model exactly and record what it was trained for, which must
    be the config's (``engine.checkpoint.load_weights``: its dataset meta against the config's
    test split, its text features; ``partial``: load only the tensors that fit; ``unchecked``
    or the config's ``unchecked_checkpoint=True``: score a checkpoint that records nothing,
    ``model.unchecked_checkpoint`` then lists what was not checked). The PKG comes from the
    checkpoint; when none carries it and the config has a ``train_dataloader``, it is counted
    on the training split (as ``PKGHook`` does); a config whose ``model.pkg`` asks for another
    graph than the one the checkpoint carries is refused (``check_loaded_pkg``, as for a test).
    The options of the config that differ from those the checkpoint was trained with (its
    model's, and what the test split observes: ``observation``, ``observed_steps``, ...) are
    listed in ``model.option_differences`` and said in a ``UserWarning`` (the plans use the
    config's). The statistics of the checkpoint's training features are kept as
    ``model.training_feature_statistics``: :func:`inference_planner` and
    :func:`plan_from_features` name features of another scale or extractor
    (:func:`feature_scale_note`). The config is kept as ``model.cfg``.
    """
    from mmengine.registry import init_default_scope
    from mmaction.registry import MODELS
    from vpn_plugin.datasets.planning_dataset import config_metainfo
    from vpn_plugin.engine.checkpoint import (FEATURE_STATS_KEY, FEATURES_FOLDER_KEY,
                                              UNCHECKED_KEY, check_loaded_pkg, load_weights,
                                              read_checkpoint)
    from vpn_plugin.engine.pre_stage import check_not_pre_stage
    from vpn_plugin.errors import checked_device
    checked_device(device, 'init_planner() argument device')  # before the model is built
    cfg = _config(config, cfg_options)
    _import_custom_modules(cfg)
    init_default_scope(cfg.get('default_scope', 'mmaction'))
    model = MODELS.build(cfg.model)
    model.unchecked_checkpoint, model.option_differences, model.not_compared = [], [], []
    if checkpoint is not None:
        data_meta = config_metainfo((cfg.get('test_dataloader') or {}).get('dataset'))
        loaded = read_checkpoint(checkpoint, logger='silent')
        check_not_pre_stage(loaded, checkpoint)  # a task_classifier.pth: named, not a key list
        model.unchecked_checkpoint = load_weights(
            model, loaded, str(checkpoint),
            partial=partial, data_meta=data_meta, require_meta=True,
            unchecked=unchecked or bool(cfg.get(UNCHECKED_KEY, False)))
        if not partial:
            check_loaded_pkg(loaded, str(checkpoint), cfg.get('model'))
        model.option_differences = _option_differences(loaded, checkpoint, cfg)
        model.training_feature_statistics = (loaded.get('meta') or {}).get(FEATURE_STATS_KEY)
        model.training_features_folder = (loaded.get('meta') or {}).get(FEATURES_FOLDER_KEY)
        model.checkpoint_name = str(checkpoint)
        model.not_compared = _not_compared(loaded, checkpoint, data_meta is None)
    if not bool(getattr(model, 'pkg_ready', True)) and cfg.get('train_dataloader'):
        model.build_pkg(build_split_dataset(cfg, 'train'))
    model.cfg = cfg
    return model.to(device).eval()


CALLER_SKIPS = ('vpn_plugin', 'torch', 'functools', 'contextlib')  # the library, its decorators


def warn_caller(message: str) -> None:
    """A ``UserWarning`` pointing at the first caller outside the library (and the decorators
    around its functions: ``config_types.checked_arguments``, ``torch.no_grad``), whichever of
    the API's functions says it: a fixed ``stacklevel`` pointed into the decorator."""
    import sys
    import warnings
    frame, level = sys._getframe(1), 1
    while frame is not None and \
            frame.f_globals.get('__name__', '').split('.')[0] in CALLER_SKIPS:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level + 1)


def feature_scale_note(model, statistics: Optional[dict], what: str, dataset=None) -> str:
    """'' when the features planned from (``statistics``: ``observation_statistics``) are like
    the training features of the checkpoint ``model`` was loaded from (as a test compares them:
    ``engine.checkpoint.feature_statistics_note``) or either is unknown, and ``dataset``'s
    feature folder is the training one (:func:`features_folder_note`); else those lines, also
    said in a ``UserWarning``."""
    from vpn_plugin.engine.checkpoint import FEATURE_STATS_KEY, feature_statistics_note
    trained = getattr(model, 'training_feature_statistics', None)
    note = feature_statistics_note({'meta': {FEATURE_STATS_KEY: trained}},
                                   getattr(model, 'checkpoint_name', 'the checkpoint'),
                                   statistics, what) if trained else ''
    folder = features_folder_note(model, dataset) if dataset is not None else ''
    note = '; '.join(line for line in (note, folder) if line)
    if note:
        warn_caller(note)
    return note


NO_TEST_SPLIT = ('the dataset it was trained for (the config has no test_dataloader.dataset '
                 'to compare its action and task names and counts and feature size with)')


def _not_compared(loaded: dict, checkpoint, no_test_split: bool = False) -> list:
    """What ``loaded`` records too little to compare with the plans' config and features
    (``engine.checkpoint.not_compared``: its training config, feature statistics, feature
    folder), and, with ``no_test_split``, the dataset meta a config without a test split
    cannot be compared with, said in one ``UserWarning``."""
    from vpn_plugin.engine.checkpoint import not_compared, not_compared_line
    missing = list(not_compared(loaded)) + ([NO_TEST_SPLIT] if no_test_split else [])
    if missing:
        warn_caller(not_compared_line(str(checkpoint), missing, 'these plans'))
    return missing


def features_folder_note(model, dataset) -> str:
    """'' when the feature files ``dataset`` reads are training files of the checkpoint
    ``model`` was loaded from (``engine.checkpoint.features_folder_note``, as a test compares
    them), it has no folder, or the checkpoint records none (init_planner said so:
    ``model.not_compared``); else that line."""
    from vpn_plugin.engine.checkpoint import FEATURES_FOLDER_KEY, features_folder_note as note
    name = getattr(model, 'checkpoint_name', None)
    if name is None:  # no checkpoint loaded
        return ''
    meta = {FEATURES_FOLDER_KEY: getattr(model, 'training_features_folder', None)}
    folder = getattr(dataset, 'feature_dirs', None) or getattr(dataset, 'feature_dir', None)
    return note({'meta': meta}, name, folder, 'features planned from', dataset)


def feature_file_note(model, path) -> str:
    """'' unless the features file ``path`` (one video's, ``tools/plan.py --features``) has
    the name or stem of a training feature file of the checkpoint ``model`` was loaded from
    and another content (``engine.checkpoint.files_unlike_training``); else the line naming
    it. A file of no training video's name (a video of your own) has nothing to be compared
    with; a checkpoint without the per-file record compares nothing (``model.not_compared``
    says so)."""
    from vpn_plugin.engine.checkpoint import (files_unlike_training, half_text, rounded_text,
                                              unknown_text)
    trained = getattr(model, 'training_features_folder', None)
    name = getattr(model, 'checkpoint_name', 'the checkpoint')
    records = list(trained['sources'].values()) if isinstance(trained, dict) and isinstance(
        trained.get('sources'), dict) else [trained]
    notes = []
    for record in records:
        if not isinstance(record, dict) or not isinstance(record.get('digests'), dict):
            continue
        other, absent, half, unknown, rounded = files_unlike_training(record, [path])
        if not other and not absent and not half and not unknown and not rounded:
            return ''  # a training file, byte for byte or in another format
        if unknown:
            notes.append(f'the features planned from, {path}, {unknown_text([Path(path).name])} '
                         f'(training folder {record.get("folder")})')
        elif other or half or rounded:
            text = half_text if half else rounded_text
            notes.append(f'the features planned from, {path}, ' + (
                f'{text([Path(path).name])} (training folder {record.get("folder")})'
                if half or rounded else
                f'differ from the training file of the same video in {record.get("folder")} '
                f'({name} was trained on it): other features (another seed or extractor?)'))
    return notes[0] if notes else ''


def _option_differences(loaded: dict, checkpoint, cfg) -> list:
    """'key: X in training, Y here' for each option of ``cfg`` that differs from the
    checkpoint's training config as ``engine.checkpoint.TRAINING_OPTIONS`` rules for a test
    (the runner's one table, :func:`~vpn_plugin.engine.checkpoint.check_test_options`):
    refused, or warned and returned (init_planner)."""
    from vpn_plugin.engine.checkpoint import check_test_options
    named = check_test_options((loaded.get('meta') or {}).get('cfg'), cfg, checkpoint, 'plan',
                               loaded.get('state_dict'))
    if named:
        warn_caller(f'{checkpoint} was trained with other options than this config: '
                    f'{"; ".join(named)}; the plans use the config\'s')
    return named


@contextlib.contextmanager
def evaluating(model):
    """``model`` in eval mode inside, back in the mode it had after: a planner asked for plans
    in the middle of training (a hook of your own) trains on with its dropout."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@checked_arguments
@torch.no_grad()
def inference_planner(model, dataset, indices: Iterable[int],
                      mode: Literal['predict', 'tensor', 'loss'] = 'predict',
                      batch_size: Count = 256):
    """The planner's outputs for ``dataset[i]``, i in ``indices``, in that order.

    ``mode='predict'``: a list of ``ActionDataSample`` (``pred_plan`` (T,), ``gt_plan``, ...);
    a stochastic planner's noise (PDPP, KEPP) is seeded by the sample index, as in the test
    runner: the plans the test scored (:func:`plan_from_features` needs ``index=`` for them).
    ``mode='tensor'``: the model's tensor output, concatenated over the batches (M, ...).
    A dataset whose features are unlike the checkpoint's training features is named
    (:func:`feature_scale_note`; each predicted sample's metainfo ``features_note``).
    """
    if isinstance(indices, (int, np.integer)) or not isinstance(indices, Iterable) or (
            torch.is_tensor(indices) and indices.dim() == 0):
        raise TypeError(f'indices={indices!r}; expected a sequence of sample indices (e.g. '
                        f'[{indices!r}] for one sample)')
    indices = list(indices)  # a generator would be used up by the checks below
    for i in indices:  # 1.7 would silently be sample 1; torch.tensor([3, 4]) holds integers
        if not _integer_tensor_scalar(i) and (isinstance(i, bool)
                                              or not isinstance(i, (int, np.integer))):
            raise TypeError(f'sample index {i!r} is a {type(i).__name__}; expected an integer')
    indices = [int(i) for i in indices]
    for i in indices:
        if not 0 <= i < len(dataset):
            raise IndexError(f'sample index {i} is out of range; the dataset has '
                             f'{len(dataset)} samples (0..{len(dataset) - 1})')
    statistics = getattr(dataset, 'feature_statistics', None)
    note = feature_scale_note(model, statistics() if callable(statistics) else None,
                              'features planned from', dataset) if indices else ''
    outputs = []
    with evaluating(model):
        for begin in range(0, len(indices), batch_size):
            batch = default_collate([dataset[i] for i in indices[begin:begin + batch_size]])
            batch = model.data_preprocessor(batch, False)
            outputs.append(model(batch['inputs'], batch['data_samples'], mode=mode))
    if mode == 'tensor':
        return torch.cat(outputs) if outputs else torch.empty(0)
    samples = [sample for chunk in outputs for sample in chunk]
    for sample in samples if note else ():
        sample.set_metainfo(dict(features_note=note))
    return samples


def _integer_tensor_scalar(value) -> bool:
    """Whether ``value`` is a 0-d tensor of an integer dtype (an element of
    ``torch.tensor([3, 4])``): a sample index, as an ``int``."""
    return torch.is_tensor(value) and value.dim() == 0 and not (
        value.is_floating_point() or value.is_complex() or value.dtype == torch.bool)


def step_model_anchors(config, checkpoint, dataset,
                       data_paths: Optional[dict] = None) -> tuple:
    """First and last actions (M,) int64 each of a step model (a planner whose ``tensor``
    output is first/last action logits (B, 2, N), e.g. ``PKGBeamSearchPlanner``) on every
    window of ``dataset``: the anchors of the LLM baselines (``tools/llm_eval.py
    --step-config``); ``config`` (path or Config) and ``checkpoint`` as :func:`init_planner`
    takes them, ``data_paths``: ``data_root`` / ``feature_dir`` for a config path."""
    from vpn_plugin.data_paths import load_config
    cfg = load_config(config, **(data_paths or {})) if isinstance(config, (str, Path)) else config
    model = init_planner(cfg, checkpoint)
    if not hasattr(model, 'step_logits'):
        raise TypeError(f'step model {cfg.model.get("type")!r} has no first/last action logits '
                        '(step_logits); use PKGBeamSearchPlanner')
    predicted = inference_planner(model, dataset, range(len(dataset)), mode='tensor').argmax(-1)
    return predicted[:, 0].numpy().astype(np.int64), predicted[:, 1].numpy().astype(np.int64)


GOAL_OVERSHOOT_S = 10  # seconds a goal may lie past a video's last frame (video_observations)
RANDOM_WEIGHTS_WARNING = ('UNUSABLE: S3D with RANDOM weights (--random-weights), for pipeline '
                          'checks only; these features and plans mean nothing')


class UnusableObservations(torch.Tensor):
    """Observations of features that mean nothing (S3D with random weights; module docstring),
    as ``video_observations(..., allow_unusable=True)`` returns them. Torch operations keep the
    class (``torch.stack`` of marked and plain observations is marked), so
    :func:`plan_from_features` marks every plan made from them; a conversion to numpy drops it."""

    def __deepcopy__(self, memo):
        return self.as_subclass(torch.Tensor).clone().as_subclass(UnusableObservations)


def mark_unusable(observations: torch.Tensor) -> torch.Tensor:
    """``observations`` marked as features of random S3D weights (:class:`UnusableObservations`)."""
    return observations.as_subclass(UnusableObservations)


class UnusableFeaturesError(ValueError):
    """Features of S3D with random weights given without ``allow_unusable=True``."""


def features_usable(record: dict, source, allow_unusable: bool = False) -> bool:
    """Whether a feature record (``datasets.features.read_feature_record``) holds usable
    features: its ``usable`` field (absent: True). Unusable ones raise
    :class:`UnusableFeaturesError` unless ``allow_unusable``."""
    from vpn_plugin.datasets.features import usable_flag
    value = usable_flag(record, source)
    if not value and not allow_unusable:
        warning = str(np.asarray(record.get('warning', RANDOM_WEIGHTS_WARNING)))
        raise UnusableFeaturesError(
            f'{source}: field "usable" is false ({warning}); plan from features extracted '
            'with the S3D weights (tools/extract_features.py --weights s3d_howto100m.pth), or '
            'pass allow_unusable=True (tools/plan.py: --random-weights) to run the pipeline '
            'on them anyway, every plan then marked UNUSABLE')
    return value


@checked_arguments
def video_observations(cfg, feature_file, start_time: NonNegative, goal_time: NonNegative,
                       split: Split = 'test', allow_unusable: bool = False):
    """The start and goal observations ``(D',)``, ``(D',)`` (float32 tensors) of a video's
    feature file, observed as the datasets of ``cfg`` observe them (their ``observation``
    recipe and ``frame_dim``).

    ``cfg``: a config path or ``Config`` (``model.cfg`` of :func:`init_planner`);
    ``feature_file``: one video's features in any layout ``PlanningDataset`` reads, (L, frame_dim)
    frames, one per second, or that array itself (e.g. ``apis.video_features`` of a video);
    ``start_time``: the second the first step starts (start state),
    ``goal_time``: the second the last step ends (goal state); rounded to whole seconds as the
    annotations are. A goal past the last frame, by up to ``GOAL_OVERSHOOT_S`` (annotations end
    a few seconds after the features), is read at the last frame (window policy 'keep'); a start
    outside the video, or a goal further past its end (another video's times?), is an error.
    A file of features of S3D with random weights (``usable`` false) is refused unless
    ``allow_unusable``; its observations are then :class:`UnusableObservations`, and the
    plans :func:`plan_from_features` makes from them are marked (module docstring).
    """
    from vpn_plugin.datasets.annotations import round_time
    from vpn_plugin.datasets.features import (checked_frames, read_feature_record,
                                              require_feature_file)
    from vpn_plugin.datasets.observations import frame_indices, observe
    cfg = _config(cfg, None)
    dataset = (cfg.get(f'{split}_dataloader') or {}).get('dataset')
    if not dataset:  # its recipe and frame_dim would be assumed
        raise ValueError(f'{cfg.filename}: no {split}_dataloader.dataset, whose observation '
                         'recipe and frame_dim the observations must follow; expected a '
                         "planner's config (model.cfg of init_planner)")
    recipe = dataset.get('observation', 'authors')
    frame_dim = dataset.get('frame_dim', DEFAULT_FRAME_DIM)
    if isinstance(feature_file, torch.Tensor):
        feature_file = feature_file.detach().cpu().numpy()
    if isinstance(feature_file, np.ndarray):
        record = {'frames_features': feature_file}
        feature_file = 'the video\'s features'
    elif not isinstance(feature_file, (str, Path)):
        raise TypeError(f'feature_file is a {type(feature_file).__name__}; expected a feature '
                        'file path or the (L, frame_dim) frames as a numpy array or tensor')
    else:
        record = read_feature_record(require_feature_file(feature_file))
    frames = checked_frames(record, feature_file, frame_dim)
    usable = features_usable(record, feature_file, allow_unusable)
    start, goal = round_time(start_time), round_time(goal_time)
    latest = len(frames) + GOAL_OVERSHOOT_S
    if not 0 <= start <= goal <= latest or start >= len(frames) or start_time > goal_time:
        raise ValueError(f'{feature_file}: start_time={start_time}, goal_time={goal_time} s, '
                         f'read at seconds {start:g} and {goal:g} (times are rounded to whole '
                         f'seconds, one feature row each); expected 0 <= start_time <= '
                         f'goal_time <= {latest} s and a start second before the video\'s '
                         f'{len(frames)} seconds of features (0..{len(frames) - 1})')
    first, last = frame_indices(recipe, start, goal, len(frames))
    observations = (torch.from_numpy(observe(frames, first, recipe)).float(),
                    torch.from_numpy(observe(frames, last, recipe)).float())
    return observations if usable else tuple(map(mark_unusable, observations))


@torch.no_grad()
def plan_from_features(model, start, goal, task=None, index=None):
    """Plans of ``model`` for start/goal observations of your own: ``start``, ``goal`` (B, D) or
    (D,) arrays or tensors (e.g. from :func:`video_observations`), D = the model's input size.

    ``task``: the task the video shows, when you know it (an index of the model's taxonomy, or B
    of them): kept as ``given_task``; a planner that plans within the true task
    (``model.task_source == 'ground_truth'``, CEFITO's oracle-task setting) plans within it.

    Returns B ``ActionDataSample`` with ``pred_plan`` (T,) (T = the model's horizon) and the
    model's other outputs (``pred_task`` and ``pred_task_score`` with ``task_source`` in the
    metainfo, ``soft_plan`` (T, N), ...); no ground truth. Every sample's metainfo has
    ``usable``: False (and ``warning``) for observations of random S3D weights
    (:class:`UnusableObservations`), and ``features_note`` when the observations are unlike the
    checkpoint's training features (:func:`feature_scale_note`).

    ``index``: a stochastic planner's noise (PDPP's x_T, KEPP's draws) is seeded by a window's
    sample index in the test runner and :func:`inference_planner`; give the dataset index of
    these observations (or B of them) for the plan the test scored. None: these observations
    are no dataset's window, and the noise is drawn from torch's global stream (another plan
    than the test's for the same window; ``torch.manual_seed`` makes it repeatable).
    """
    usable = not any(isinstance(v, UnusableObservations) for v in (start, goal))
    start, goal = _observation_batch(model, start, 'start'), _observation_batch(model, goal, 'goal')
    if start.shape != goal.shape:
        raise ValueError(f'start {tuple(start.shape)} and goal {tuple(goal.shape)} observations '
                         'must have the same shape (B, D)')
    from vpn_plugin.datasets.planning_dataset import observation_statistics
    note = feature_scale_note(model, observation_statistics(start, goal), 'features planned from')
    given = None if task is None else _given_tasks(model, task, len(start))
    if given is None and getattr(model, 'task_source', None) == 'ground_truth':
        raise ValueError(f'{type(model).__name__} plans within the true task '
                         "(model.task_source='ground_truth'): give the task the video shows, "
                         'plan_from_features(..., task=K) (tools/plan.py: --task NAME)')
    samples = {} if given is None else {'task': given}
    if index is not None:
        samples['index'] = _sample_indices(index, len(start))
    with evaluating(model):
        batch = model.data_preprocessor({'inputs': {'start': start, 'goal': goal},
                                         'data_samples': samples or None}, False)
        samples = model(batch['inputs'], batch['data_samples'], mode='predict')
    for index, sample in enumerate(samples):
        if given is not None:
            if 'gt_task' in sample:  # the given task, not a ground truth
                del sample.gt_task
            sample.given_task = given[index].clone()
            if getattr(model, 'task_source', None) == 'ground_truth':
                sample.set_metainfo(dict(task_source='given'))
        sample.set_metainfo(dict(usable=usable) if usable else
                            dict(usable=False, warning=RANDOM_WEIGHTS_WARNING))
        if note:
            sample.set_metainfo(dict(features_note=note))
    return samples


def draws_noise(model) -> bool:
    """Whether ``model`` samples its plans from random noise (a diffusion planner, PDPP or
    KEPP: a module of it seeds its draws with ``sampling_seed``), so that observations of no
    dataset window (``plan_from_features`` without ``index``) get one draw of it."""
    return any(hasattr(module, 'sampling_seed') for module in model.modules())


def window_index(cfg, split: Split, feature_file, start, goal) -> Optional[int]:
    """The index in ``cfg``'s ``split`` dataset of the window whose observations are exactly
    ``start``, ``goal`` (D,) (:func:`video_observations` of ``feature_file``), when
    ``feature_file`` is one of that dataset's files (in its ``feature_dir``): what
    :func:`plan_from_features` takes as ``index`` for the plan the test scored (a stochastic
    planner's noise is seeded by it). None for a file of no such folder (the dataset is not
    built) or observations of no window of it (the lowest index when several windows hold
    the same ones)."""
    cfg = _config(cfg, None)
    folder = ((cfg.get(f'{split}_dataloader') or {}).get('dataset') or {}).get('feature_dir')
    path = Path(feature_file)
    if not folder or not path.parent.resolve() == Path(folder).resolve():
        return None
    dataset = build_split_dataset(cfg, split)
    start, goal = (torch.as_tensor(v).float().numpy() for v in (start, goal))
    for i, window in enumerate(dataset.windows):
        if window.feature == path.stem and np.array_equal(dataset.start[i], start) \
                and np.array_equal(dataset.goal[i], goal):
            return i
    return None


def _sample_indices(index, batch_size: int) -> torch.Tensor:
    """(B,) int64 sample indices from one index or B of them (``plan_from_features``)."""
    try:  # 2**70: torch's bare 'Overflow when unpacking long long'
        values = _integer_tensor(index) if not isinstance(index, str) else None
    except (TypeError, ValueError, RuntimeError, OverflowError):
        values = None
    if values is None or values.is_floating_point() or values.dtype == torch.bool or \
            values.dim() > 1 or values.numel() not in (1, batch_size) or \
            (values.numel() and int(values.min()) < 0):
        raise ValueError(f'index={index!r}; expected the dataset index of the observations '
                         f'(an integer >= 0 and < 2**63, int64) or {batch_size} of them')
    return values.long().reshape(-1).expand(batch_size).clone()


def _integer_tensor(value) -> torch.Tensor:
    """``torch.as_tensor(value)``, with numpy's and torch's unsigned integers (np.uint64(5),
    a uint32 array: torch refused or could not compare them, a valid index refused) read as
    int64, also in a list or tuple ([np.uint64(3), np.uint64(4)]: torch's "an integer is
    required"); ``OverflowError`` for one beyond int64."""
    if isinstance(value, (list, tuple)):  # numpy integer scalars as Python ints (bools stay)
        value = [int(v) if isinstance(v, np.integer) else v for v in value]
    if torch.is_tensor(value) and value.dtype in (torch.uint16, torch.uint32, torch.uint64):
        value = np.asarray(value.tolist(), dtype=np.uint64)
    if isinstance(value, np.ndarray):  # big-endian: torch's own refusal, a valid index
        value = native_order(value)
    if isinstance(value, (np.integer, np.ndarray)) and np.asarray(value).dtype.kind == 'u':
        value = np.asarray(value)
        if value.size and int(value.max()) > np.iinfo(np.int64).max:
            raise OverflowError(f'{int(value.max())} is beyond int64')
        value = value.astype(np.int64)
    return torch.as_tensor(value)


def _given_tasks(model, task, batch_size: int) -> torch.Tensor:
    """(B,) int64 task indices from one index or B of them, checked against the model."""
    if isinstance(task, str):
        raise TypeError(f'task={task!r} is a name; expected its index in the taxonomy '
                        '(load_taxonomy(...).task_index(name) gives it)')
    try:
        values = _integer_tensor(task)
    except (TypeError, ValueError, RuntimeError, OverflowError) as error:  # [None], ragged
        raise TypeError(f'task={task!r}; expected a task index or {batch_size} of them '
                        f'(integers; torch reads: {error})') from None
    if values.is_floating_point() or values.dtype == torch.bool or values.dim() > 1:
        raise TypeError(f'task={task!r}; expected a task index or {batch_size} of them')
    values = values.long().expand(batch_size) if values.dim() == 0 else values.long()
    num_tasks = getattr(model, 'num_tasks', None)
    if num_tasks is None:  # a planner without a task head (KEPP): its config's taxonomy
        num_tasks = _config_num_tasks(model)
    if len(values) != batch_size or (num_tasks is not None and not bool(
            ((values >= 0) & (values < num_tasks)).all())):
        raise ValueError(f'task={task!r}; expected {batch_size} task index(es) in 0..'
                         f'{"K-1" if num_tasks is None else num_tasks - 1}')
    return values.clone()



def _config_num_tasks(model) -> Optional[int]:
    """The task count of the taxonomy of ``model.cfg``'s test split (``init_planner`` keeps the
    config), None without one: a task index of a planner that has no task head is still an
    index of its dataset's taxonomy."""
    from vpn_plugin.datasets.planning_dataset import config_metainfo
    cfg = getattr(model, 'cfg', None)
    dataset = ((cfg.get('test_dataloader') or {}).get('dataset')) if cfg is not None else None
    meta = config_metainfo(dataset) if dataset else None
    return None if meta is None else meta['num_tasks']


def _observation_batch(model, values, name: str) -> torch.Tensor:
    """(B, D) float32 from (D,) or (B, D), checked against ``model.feature_dim``."""
    try:  # an object array, ragged lists, text: torch's words named neither start nor goal
        values = torch.as_tensor(native_order(values) if isinstance(values, np.ndarray)
                                 else values)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f'{name} observations of type {type(values).__name__}'
                        f'{f" and dtype {values.dtype}" if hasattr(values, "dtype") else ""} '
                        f'cannot be read as numbers (torch reads: {error}); expected '
                        'floating-point features, an array or tensor (B, D) or (D,)') from None
    if isinstance(values, UnusableObservations):  # the mark is read; the model gets tensors
        values = values.as_subclass(torch.Tensor)
    if values.device.type == 'meta':
        raise ValueError(f'{name} observations are on the meta device, which holds no values; '
                         'expected features with data (a cpu or cuda tensor, or an array)')
    if not values.is_floating_point():  # integer features are no observations
        raise TypeError(f'{name} observations have dtype {values.dtype}; expected floating-point '
                        'features')
    if not bool(torch.isfinite(values).all()):
        where = tuple((~torch.isfinite(values)).nonzero()[0].tolist())  # (sample, dim) or (dim,)
        raise ValueError(f'{name} observations hold {int((~torch.isfinite(values)).sum())} '
                         f'NaN/inf value(s) (first at index {where}: {float(values[where])}); '
                         'expected finite features (a damaged feature file?)')
    if not bool(torch.isfinite(values.float()).all()):  # float64 beyond float32's range
        raise ValueError(f'{name} observations hold values up to '
                         f'{float(values.abs().max()):.3g}, beyond float32 (the model\'s '
                         'precision); expected features of the training data\'s scale')
    values = values.float()
    values = values.unsqueeze(0) if values.dim() == 1 else values
    expected = getattr(model, 'feature_dim', None)
    if values.dim() != 2 or not len(values) or (expected is not None
                                                and values.shape[1] != expected):
        raise ValueError(f'{name} observations of shape {tuple(values.shape)}; expected (B, '
                         f'{expected or "D"}) or ({expected or "D"},) with B >= 1, as the model '
                         'was built for (the config\'s observation recipe: video_observations)')
    return values

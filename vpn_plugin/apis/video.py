"""From a video file to a plan: ``init_s3d`` (the S3D backbone with the HowTo100M weights,
loaded strictly), ``video_features`` (the datasets' per-second 512-d rows of one video, as P3IV
made them) and ``plan_from_video`` (a planner's plan between two moments of the video)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from ..core.metrics import NO_PLAN
from ..datasets.features import row_seconds_problem
from ..config_types import Count, NonNegative, PathLike, Seed, checked_arguments
from ..errors import check_file, plain_text
from ..video import FrameRecipe, embed_frames, iter_frame_blocks
from .inference import (RANDOM_WEIGHTS_WARNING, Split, mark_unusable, plan_from_features,
                        video_observations)

WEIGHTS_URL = 'https://www.rocq.inria.fr/cluster-willow/amiech/howto100m/s3d_howto100m.pth'
DICT_URL = 'https://www.rocq.inria.fr/cluster-willow/amiech/howto100m/s3d_dict.npy'
WEIGHTS_HELP = (
    'The S3D weights (MIL-NCE on HowTo100M) come from the S3D_HowTo100M README '
    '(github.com/antoine77340/S3D_HowTo100M): download s3d_howto100m.pth from '
    f'{WEIGHTS_URL} (and, for text embeddings, s3d_dict.npy from {DICT_URL}), then pass '
    '--s3d-weights /path/to/s3d_howto100m.pth (extract_features.py: --weights)')


@checked_arguments
def init_s3d(weights: Optional[PathLike] = None, dict_path: Optional[PathLike] = None, device: Union[str, torch.device] = 'cpu',
             random_weights: bool = False, seed: Seed = 0):
    """``models.S3D`` in eval mode with ``weights`` (``s3d_howto100m.pth``) loaded under
    the official names with strict loading (``engine.checkpoint``: torch's weights_only
    loader). ``random_weights``: seeded random weights instead, for pipeline checks only
    (``model.usable`` is then False). A missing file raises one message saying where the
    weights come from."""
    from ..engine.checkpoint import read_checkpoint
    from ..models.s3d import S3D
    if dict_path is not None:
        check_file(dict_path, 'S3D word dictionary',
                   missing=f'S3D word dictionary {dict_path} does not exist. {WEIGHTS_HELP}')
    if not random_weights:
        if weights is None:
            raise FileNotFoundError(f'no S3D weights were given. {WEIGHTS_HELP}')
        check_file(weights, 'S3D weights',
                   missing=f'S3D weights {weights} do not exist. {WEIGHTS_HELP}')
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = S3D(dict_path=None if dict_path is None else str(dict_path))
    if not random_weights:
        try:
            checkpoint = read_checkpoint(weights, logger='silent')
        except ValueError as error:  # a planner checkpoint's wording: say what S3D needs
            raise ValueError(f'{error} [read as S3D weights: expected the S3D_HowTo100M state '
                             f'dict. {WEIGHTS_HELP}]') from None
        load_s3d_weights(model, checkpoint, weights)
    model.usable = not random_weights
    return model.to(device).eval()


def load_s3d_weights(model, checkpoint: dict, weights) -> None:
    """``checkpoint`` into the S3D ``model`` strictly; tensors that do not fit are named with
    where S3D weights come from (not a planner checkpoint's hint about its config)."""
    from ..engine.checkpoint import CheckpointMismatchError, load_weights
    try:
        load_weights(model, checkpoint, str(weights))
    except CheckpointMismatchError as error:
        raise CheckpointMismatchError(
            f'S3D weights {weights} do not fit S3D: {error.problems}; expected the '
            'S3D_HowTo100M state dict (a planner checkpoint is no S3D weights file). '
            f'{WEIGHTS_HELP}') from None


@checked_arguments
def video_features(s3d, video: PathLike, recipe: FrameRecipe = FrameRecipe(), batch_chunks: Count = 8,
                   block_chunks: Count = 64, damage: Optional[list] = None) -> np.ndarray:
    """(ceil(frames / chunk), 512) float32: one ``video_embedding`` row per chunk of
    ``recipe.chunk`` frames (one per second at 16 fps) of the video file ``video``.
    ``damage``: a list that gets ffmpeg's note when it decoded the file from damaged data
    (``decode.damage_note``; without it, a ``UserWarning``)."""
    blocks = iter_frame_blocks(video, recipe, block_chunks * recipe.chunk, damage=damage)
    return np.concatenate([embed_frames(s3d, frames, recipe.chunk, batch_chunks).numpy()
                           for frames in blocks]).astype(np.float32)


@checked_arguments
def plan_from_video(model, s3d, video: PathLike, start_time: NonNegative, goal_time: NonNegative,
                    recipe: FrameRecipe = FrameRecipe(), split: Split = 'test',
                    return_features: bool = False, task=None):
    """The plan of ``model`` (``init_planner``) from the state at ``start_time`` to the state at
    ``goal_time`` (seconds) of the video file ``video``: its features (``video_features`` with
    ``s3d`` from :func:`init_s3d`), observed as ``model.cfg``'s datasets observe them
    (``video_observations``); ``task``: the task the video shows, if known
    (``plan_from_features``). Returns one ``ActionDataSample`` (``pred_plan`` (T,), ...) whose
    metainfo has ``usable`` False when ``s3d`` has random weights (``init_s3d(random_weights=
    True)`` is the request for them) (``return_features``: and the features)."""
    problem = row_seconds_problem(recipe.as_dict())
    if problem:  # before minutes of extraction
        raise ValueError(f'{video}: {problem}')
    damage = []
    features = video_features(s3d, video, recipe, damage=damage)
    try:
        start, goal = video_observations(model.cfg, features, start_time, goal_time, split)
    except ValueError as error:  # name the video, not its in-memory features
        raise ValueError(f'{video}: {error}') from None
    if not getattr(s3d, 'usable', True):
        start, goal = mark_unusable(start), mark_unusable(goal)
    sample = plan_from_features(model, start, goal, task)[0]
    sample.set_field(int(len(features)), 'num_seconds', field_type='metainfo')
    sample.set_field(goal_note(goal_time, len(features)), 'goal_note', field_type='metainfo')
    sample.set_field(' '.join(damage), 'damage', field_type='metainfo')  # '' when clean
    return (sample, features) if return_features else sample


def load_s3d_for_tool(weights: Optional[str], random_weights: bool, device: str = 'cpu',
                      dict_path=None):
    """``init_s3d`` for a tool: ``--random-weights`` prints the UNUSABLE warning."""
    import sys
    if random_weights:
        print(f'WARNING: {RANDOM_WEIGHTS_WARNING}', file=sys.stderr, flush=True)
    return init_s3d(weights, dict_path, device, random_weights)


def config_taxonomy(cfg, split: str = 'test'):
    """The action taxonomy of ``cfg``'s ``<split>`` dataset (its names), read from the
    taxonomy file alone (no feature file is needed)."""
    from ..datasets.sources import source_path
    from ..datasets.taxonomy import load_taxonomy
    dataset = (cfg.get(f'{split}_dataloader') or {}).get('dataset') or {}
    if not dataset.get('taxonomy') or not dataset.get('data_root'):
        raise ValueError(f'{cfg.filename}: {split}_dataloader.dataset has no taxonomy / '
                         'data_root to name the actions')
    return load_taxonomy(source_path(dataset['data_root'], dataset['taxonomy'],
                                     dataset.get('horizon', '')))


def config_from_checkpoint(checkpoint, cfg_options=None, **paths):
    """The config a checkpoint of ``tools/train.py`` was trained with (mmengine stores it in
    ``meta['cfg']``), loaded as ``data_paths.load_config`` loads a file."""
    import tempfile
    from ..data_paths import load_config
    from ..engine.checkpoint import read_checkpoint
    text = (read_checkpoint(checkpoint, logger='silent').get('meta') or {}).get('cfg')
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f'checkpoint {checkpoint} holds no config (meta.cfg, which the '
                         'checkpoints of the training tool carry): give the config file too, '
                         'e.g. tools/plan.py CONFIG --checkpoint CKPT --video ...')
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / 'checkpoint_config.py'
        path.write_text(text)
        return load_config(path, cfg_options, **paths)


def goal_note(goal_time: float, num_seconds: int) -> str:
    """'' or the note that the goal state was read at the video's last second: a goal time
    at or past the end of its features (``video_observations`` allows a few seconds)."""
    from ..datasets.annotations import round_time
    if round_time(goal_time) < num_seconds:
        return ''
    return (f'note: the goal time {goal_time:g} s is at or past the end of the video\'s '
            f'{num_seconds} s of features: the goal state is read at its last second '
            f'({num_seconds - 1} s)')


def same_moment_note(start_time: float, goal_time: float) -> list:
    """[the note that start and goal are one second] ([] when they are not): times are read
    at whole seconds, so the start and goal states are one moment of the video and the plan's
    steps are not planned from a change between them."""
    from ..datasets.annotations import round_time
    if round_time(start_time) != round_time(goal_time):
        return []
    return [f'note: the start time {start_time:g} s and the goal time {goal_time:g} s are the '
            f'same second ({round_time(start_time)} s; times are read at whole seconds): the '
            'start and goal states are one moment of the video, so these steps are a guess of '
            'the planner, not planned from a change between them (give the second where the '
            'goal state is reached)']


def format_video_plan(sample, taxonomy, video, start_time, goal_time,
                      source: str = 'video') -> list:
    """Lines: the UNUSABLE mark (random S3D weights), the video (``source`` 'features': its
    features file) and times, a goal read at the last second (:func:`goal_note`), start and
    goal at one second (:func:`same_moment_note`), the task and
    where it comes from (``plan_display.task_lines``), one line per step with the action name,
    and a warning when the plan's actions leave the task."""
    from ..models.plan_display import outside_task_lines, plan_task, task_lines
    unusable = not sample.metainfo.get('usable', True)
    mark = [f'*** {sample.metainfo.get("warning", RANDOM_WEIGHTS_WARNING)} ***'] if unusable \
        else []
    lines = mark + [f'{source} {plain_text(video)}: {sample.metainfo.get("num_seconds", "?")} s '
                    f'of S3D features; plan from the state at {start_time:g} s to the state '
                    f'at {goal_time:g} s']
    if sample.metainfo.get('goal_note'):
        lines.append(sample.metainfo['goal_note'])
    lines += same_moment_note(start_time, goal_time)
    lines += task_lines(sample, taxonomy)
    for step, action in enumerate(sample.pred_plan.tolist(), 1):
        name = '(no plan)' if action == NO_PLAN else taxonomy.action_names[int(action)]
        lines.append(f'  {step:<5}{name}')
    return lines + outside_task_lines(sample.pred_plan, taxonomy, plan_task(sample)) + mark

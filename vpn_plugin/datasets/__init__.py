"""Data layer: taxonomies, annotation readers, windows, features, PlanningDataset, synthetic
features (docs/design.md, Data)."""
from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from .annotations import (BadVideoError, VideoAnnotation, Window, build_windows,
                          crosstask_videos, read_coin_annotations, read_crosstask_csv,
                          read_crosstask_tasks, read_json_annotations, read_video_list,
                          read_window_file)
from .concat_dataset import ConcatPlanningDataset, join_taxonomies
from .features import find_feature_file, load_features, read_feature_record
from .observations import RECIPES, WINDOW_POLICIES, frame_indices, observation_dim, step_map
from .planning_dataset import PlanningDataset
from .taxonomy import Taxonomy, load_taxonomy

__all__ = ['Taxonomy', 'load_taxonomy', 'PlanningDataset', 'ConcatPlanningDataset',
           'join_taxonomies', 'BadVideoError', 'VideoAnnotation',
           'Window', 'build_windows', 'crosstask_videos', 'read_coin_annotations',
           'read_crosstask_csv',
           'read_crosstask_tasks', 'read_json_annotations', 'read_video_list', 'read_window_file',
           'RECIPES', 'WINDOW_POLICIES', 'find_feature_file', 'frame_indices', 'load_features',
           'observation_dim', 'read_feature_record', 'step_map']

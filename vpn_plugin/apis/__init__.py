"""Running a planner from a config and a checkpoint, as ``mmaction.apis`` does for
recognisers: ``init_planner`` builds it, ``inference_planner`` runs it on dataset samples
(``build_split_dataset``), ``plan_from_features`` on a new video's start/goal observations
(``video_observations``)."""
from .inference import (build_split_dataset, inference_planner, init_planner,
                        plan_from_features, step_model_anchors, video_observations)

__all__ = ['init_planner', 'inference_planner', 'build_split_dataset', 'plan_from_features',
           'step_model_anchors', 'video_observations']

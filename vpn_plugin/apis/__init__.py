"""Running a planner from a config and a checkpoint, as ``mmaction.apis`` does for
recognisers: ``init_planner`` builds it, ``inference_planner`` runs it on dataset samples
(``build_split_dataset``), ``plan_from_features`` on a new video's start/goal observations
(``video_observations``), ``plan_from_video`` on a video file (its S3D features from
``video_features`` with ``init_s3d``'s backbone)."""
from .inference import (build_split_dataset, inference_planner, init_planner,
                        plan_from_features, step_model_anchors, video_observations)
from .video import init_s3d, plan_from_video, video_features

__all__ = ['init_planner', 'inference_planner', 'build_split_dataset', 'plan_from_features',
           'step_model_anchors', 'video_observations', 'init_s3d', 'video_features',
           'plan_from_video']

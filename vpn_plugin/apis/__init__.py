"""Running a planner from a config and a checkpoint, as ``mmaction.apis`` does for
recognisers: ``init_planner`` builds it, ``inference_planner`` runs it on dataset samples."""
from .inference import build_split_dataset, inference_planner, init_planner

__all__ = ['init_planner', 'inference_planner', 'build_split_dataset']

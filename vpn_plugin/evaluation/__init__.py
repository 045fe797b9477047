"""Evaluation metrics registered in ``mmaction.registry.METRICS``; see docs/design.md."""
from .planning_metric import PlanningMetric

__all__ = ['PlanningMetric']

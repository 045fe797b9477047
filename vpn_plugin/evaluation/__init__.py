"""Evaluation metrics registered in ``mmaction.registry.METRICS``; see docs/design.md."""
from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from .dump_results import AtomicDumpResults
from .planning_metric import PlanningMetric

__all__ = ['AtomicDumpResults', 'PlanningMetric']

"""Planning windows from the annotations alone, for the prompting baselines.

A text-only LLM planner reads the taxonomy, the windows' plans and tasks, and the training
sequences (examples, PKG); the VLM planner adds frames of the clips. Neither reads the
video feature files, so ``tools/llm_eval.py`` builds its datasets with
:func:`annotation_windows`, which needs no feature file.
"""
from __future__ import annotations

import numpy as np

from vpn_plugin.datasets.planning_dataset import PlanningDataset


class AnnotationWindows(PlanningDataset):
    """A ``PlanningDataset`` (same sources, splits and subsets) without observations.

    Every window of the annotations is kept: the feature-dependent checks (unreadable files,
    steps past a video's end) do not apply. ``plans`` (M, T), ``tasks`` (M,), ``windows``,
    ``taxonomy`` and ``pkg_sequences`` are as in ``PlanningDataset``; items are not.
    """

    def _extract(self, windows) -> None:
        self.windows = self._pkg_windows = list(windows)
        self.plans = np.array([w.steps for w in self.windows], np.int64).reshape(-1, self.horizon)
        self.tasks = np.array([w.task for w in self.windows], np.int64)
        self.start = self.goal = self.observed = None
        self._damage = {}  # no feature file is read: none records a damaged video

    def __getitem__(self, i: int) -> dict:
        raise TypeError('AnnotationWindows has no observations (built without feature files); '
                        'use PlanningDataset to feed a model')


def annotation_windows(dataset_cfg: dict) -> AnnotationWindows:
    """``AnnotationWindows`` from a ``PlanningDataset`` config dict (``type`` dropped)."""
    options = dict(dataset_cfg)
    kind = options.pop('type', 'PlanningDataset')
    if kind != 'PlanningDataset':
        raise ValueError(f'dataset type {kind!r}: the prompting baselines read the windows of '
                         "a 'PlanningDataset' config")
    return AnnotationWindows(**options)

"""Prompt context (taxonomy, example windows, PKG) from a training PlanningDataset."""
from __future__ import annotations

import numpy as np

from .prompting import PromptBuilder


def pkg_from_dataset(train_dataset, count_mode: str = 'window',
                     smoothing: float = 0.0) -> np.ndarray:
    """(N, N) PKG counted on the training sequences, exactly as ViterbiPlanNet's PKGHook."""
    from vpn_plugin.core import build_pkg
    return build_pkg(train_dataset.pkg_sequences(count_mode), train_dataset.taxonomy.num_actions,
                     smoothing=smoothing, count_mode=count_mode)


def prompt_builder_from_dataset(train_dataset, *, with_pkg: bool = False,
                                pkg_count_mode: str = 'window', **builder_kwargs) -> PromptBuilder:
    """A PromptBuilder whose examples are the training windows (``dataset.plans``/``tasks``)."""
    pkg = pkg_from_dataset(train_dataset, pkg_count_mode) if with_pkg else None
    return PromptBuilder(train_dataset.taxonomy, train_dataset.plans, train_dataset.tasks,
                         pkg=pkg, with_pkg=with_pkg, **builder_kwargs)

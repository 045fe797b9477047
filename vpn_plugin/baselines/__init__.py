"""Baselines next to ViterbiPlanNet: PKG beam search and uniform-emission PKG decoding.

The Base Model is ``ViterbiPlanNet(use_dvl=False)``; LLM/VLM planners live in ``llm/``.
"""
from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from .planners import EndpointMLP, PKGBeamSearchPlanner, UniformEmissionPlanner
from . import llm  # noqa: F401  (registers LLMPlanner)

__all__ = ['EndpointMLP', 'PKGBeamSearchPlanner', 'UniformEmissionPlanner']

"""Planners: the ``BasePlanner`` they share (PKG, forward dispatch, horizon checks, result
packing), ViterbiPlanNet (the paper's network, exactly; Base Model via ``use_dvl=False``),
SCHEMA (its official network, sharing ViterbiPlanNet's ``StateEncoder``), CompactPlanNet (this
plugin's smaller alternative), PDPP (the diffusion baseline, its official code's function), KEPP
(PDPP conditioned on PKG paths, its official code's function), the PKG builder and its hook, the
state-text features, and S3D (the video backbone the datasets' 512-d features come from, its
official function).

Importing this package registers ``ViterbiPlanNet``, ``SCHEMA``, ``CompactPlanNet``, ``PDPP``,
``PDPPDiffusion``, ``KEPP``, ``KEPPDiffusion`` and ``S3D`` in
``mmaction.registry.MODELS``, ``PKGBuilder`` and the PKG perturbations in ``TASK_UTILS`` and
``PKGHook`` in ``HOOKS``.
"""
from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from .base_planner import BasePlanner, pack_samples
from .compact_plan_net import CompactPlanNet, horizon_queries
from .pkg_builder import (DataFraction, EdgeDropout, LabelNoise, PKGBuilder, UniformGraph,
                          WeightNoise)
from .pdpp import PDPP, PDPPDiffusion, TaskHead
from .kepp import KEPP, KEPPDiffusion
from .pkg_hook import PKGHook
from .s3d import S3D
from .schema import SCHEMA
from .state_encoder import StateEncoder
from .text_embeddings import (encode_texts, load_state_features, state_embeddings,
                              state_texts)
from .viterbi_plan_net import DECODE_MODES, ViterbiPlanNet

__all__ = ['BasePlanner', 'pack_samples', 'ViterbiPlanNet', 'SCHEMA', 'StateEncoder',
           'CompactPlanNet', 'PKGBuilder',
           'DataFraction', 'LabelNoise', 'EdgeDropout', 'WeightNoise', 'UniformGraph', 'PKGHook',
           'DECODE_MODES', 'horizon_queries', 'encode_texts', 'load_state_features',
           'state_embeddings', 'state_texts', 'PDPP', 'PDPPDiffusion', 'TaskHead', 'S3D',
           'KEPP', 'KEPPDiffusion']

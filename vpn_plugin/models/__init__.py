"""ViterbiPlanNet (the paper's network, exactly; Base Model via ``use_dvl=False``),
CompactPlanNet (this plugin's smaller alternative), state-text features and PKGHook.

Importing this package registers ``ViterbiPlanNet`` and ``CompactPlanNet`` in
``mmaction.registry.MODELS`` and ``PKGHook`` in ``mmaction.registry.HOOKS``.
"""
from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from .compact_plan_net import CompactPlanNet, horizon_queries
from .pkg_hook import PKGHook
from .text_embeddings import (encode_texts, load_state_features, state_embeddings,
                              state_texts)
from .viterbi_plan_net import DECODE_MODES, ViterbiPlanNet

__all__ = ['ViterbiPlanNet', 'CompactPlanNet', 'PKGHook', 'DECODE_MODES', 'horizon_queries',
           'encode_texts', 'load_state_features', 'state_embeddings', 'state_texts']

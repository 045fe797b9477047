"""ViterbiPlanNet (+ Base Model via ``use_dvl=False``), state-text embeddings and PKGHook.

Importing this package registers ``ViterbiPlanNet`` in ``mmaction.registry.MODELS`` and
``PKGHook`` in ``mmaction.registry.HOOKS``.
"""
from .. import compat_applied  # noqa: F401  (compat fixes before any OpenMMLab import)
from .pkg_hook import PKGHook
from .text_embeddings import encode_texts, state_embeddings, state_texts
from .viterbi_plan_net import DECODE_MODES, ViterbiPlanNet, horizon_queries

__all__ = ['ViterbiPlanNet', 'PKGHook', 'DECODE_MODES', 'horizon_queries', 'encode_texts',
           'state_embeddings', 'state_texts']

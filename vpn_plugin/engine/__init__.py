"""Runner hooks that are not part of a model: bit-exact resume (``RNGStateHook``), losses
read back only when logged (``DeferredRuntimeInfoHook``)."""
from .. import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
from .deferred_runtime_info_hook import DeferredRuntimeInfoHook
from .random_states import get_rng_states, set_rng_states
from .rng_state_hook import RNGStateHook

__all__ = ['DeferredRuntimeInfoHook', 'RNGStateHook', 'get_rng_states', 'set_rng_states']

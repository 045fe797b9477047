"""Runner hooks that are not part of a model: bit-exact resume (``RNGStateHook``)."""
from .rng_state import RNGStateHook, get_rng_states, set_rng_states

__all__ = ['RNGStateHook', 'get_rng_states', 'set_rng_states']

"""Runner pieces that are not part of a model: kill-safe checkpoints (``CheckpointHook``:
``KillSafeCheckpointHook``), bit-exact resume (``RNGStateHook``), losses
read back only when logged (``DeferredRuntimeInfoHook``) and PDPP's training recipe
(``pdpp_training``: steps-per-epoch batch sampler, warm-up/step LR, EMA, the task-classifier
stage) and KEPP's first stage (``kepp_training``: the step model)."""
from .. import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
from .cefito_training import CEFITOEMAHook
from .checkpoint_hook import KillSafeCheckpointHook
from .deferred_runtime_info_hook import DeferredRuntimeInfoHook
from .pdpp_training import (PDPPEMAHook, PDPPWarmupStepLR, StepsPerEpochBatchSampler,
                            TaskClassifierHook)
from .kepp_training import KEPPStepModelHook
from .random_states import get_rng_states, set_rng_states
from .rng_state_hook import RNGStateHook

__all__ = ['DeferredRuntimeInfoHook', 'KillSafeCheckpointHook', 'RNGStateHook', 'get_rng_states', 'set_rng_states',
           'PDPPEMAHook', 'PDPPWarmupStepLR', 'StepsPerEpochBatchSampler', 'TaskClassifierHook',
           'KEPPStepModelHook']

# Runtime defaults shared by every vpn_plugin config (mmengine Runner keys).
default_scope = 'mmaction'
custom_imports = dict(imports=['vpn_plugin.mm'], allow_failed_imports=False)
# mmengine Runner that logs the distributed backend it uses and writes (not logs) the config
runner_type = 'PlanningRunner'

default_hooks = dict(
    # mmengine's RuntimeInfoHook, but the losses are read back from the device only when the
    # logger logs (vpn_plugin/engine/deferred_runtime_info_hook.py): no host sync per step
    runtime_info=dict(type='DeferredRuntimeInfoHook'),
    timer=dict(type='IterTimerHook'),
    # LoggerHook prints progress lines such as "Epoch(train) [3][20/50] eta: ...".
    logger=dict(type='LoggerHook', interval=10, ignore_last=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # Model configs may add save_best='<metric key>', rule='greater'.
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    # RNG states in every checkpoint, restored on --resume: bit-exact resume (vpn_plugin.engine)
    rng_state=dict(type='RNGStateHook'))

# Fills the planner's PKG (model.pkg) from the training split before train, val or test,
# unless a loaded checkpoint carried it.
custom_hooks = [dict(type='PKGHook')]

# 'nccl' is the GPU default; PlanningRunner switches to 'gloo' when CUDA is absent
# (and logs it), so the same config trains multi-process on CPU.
env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))

# Used only in distributed runs: DDP that omits device_ids for CPU modules.
model_wrapper_cfg = dict(
    type='CPUCompatibleDDP',
    broadcast_buffers=False,
    find_unused_parameters=False)

log_processor = dict(type='LogProcessor', window_size=10, by_epoch=True)

# TensorBoard: `tools/train.py --tensorboard` appends TensorboardVisBackend; in a config, set
#   visualizer = dict(vis_backends=[dict(type='LocalVisBackend'), dict(type='TensorboardVisBackend')])
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends)

randomness = dict(seed=0, diff_rank_seed=False, deterministic=False)
# torch.compile of train_step is mmengine's `compile` key, left unset here (= off until measured on
# a GPU; README, Speed): a config sets `compile = True` or a dict of torch.compile options, e.g.
# dict(mode='max-autotune') (a bool here would make a child's dict need _delete_). The DVL's
# device path (impl='dense', the default off the CPU) compiles without graph breaks.

log_level = 'INFO'
load_from = None
resume = False
# A checkpoint must fit the model exactly (every tensor, the PKG included); True loads only the
# tensors that fit (fine-tuning from another model's checkpoint; never when resuming).
load_partial = False
# A planner's checkpoint must record what it was trained for (meta.dataset_meta, the text
# features): True scores one that records nothing (a bare state dict), warned and marked.
unchecked_checkpoint = False

# Inherits the runtime so that it can set the checkpoint hook (bases must not share keys).
_base_ = ['../default_runtime.py']

# The paper's schedule: 500 epochs at batch 256 (the batch size is in the dataset config).
# Optimiser choice: the authors' released scripts (AdamW lr 9e-4, StepLR(40, 0.65)) rather
# than the paper text's Adam lr 9e-3: the scripts are what produced the published numbers,
# and the decay keeps 500 epochs from drifting at a fixed, 10x larger learning rate.
optim_wrapper = dict(
    type='OptimWrapper',
    # fused=True: the same AdamW update in one kernel (~5x faster step on CPU for 5.5M params)
    optimizer=dict(type='AdamW', lr=9e-4, weight_decay=0.01, fused=True))
param_scheduler = [dict(type='StepLR', step_size=40, gamma=0.65, by_epoch=True)]

# Validation runs on held-out TRAINING videos (dataset config); the official test windows
# are seen only by the test loop, never for model selection.
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=500, val_interval=10)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
auto_scale_lr = dict(enable=False, base_batch_size=256)
# Model selection: best validation success rate (held-out training videos), kept as
# best_plan_success_rate_epoch_*.pth next to the last checkpoints.
default_hooks = dict(
    checkpoint=dict(interval=10, max_keep_ckpts=2, save_best='plan/success_rate', rule='greater'))

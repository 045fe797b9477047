# PDPP's training recipe (official main_distributed.py / utils/training.py, train_mlp.py;
# vpn_plugin/engine/pdpp_training.py) over the paper schedule's loops and checkpointing.
_base_ = ['./paper_500e.py']

# AdamW, weight decay 0; the dataset planner sets lr (CrossTask 5e-4, NIV 3e-4, COIN 1e-5).
optim_wrapper = dict(optimizer=dict(lr=5e-4, weight_decay=0.0))
# Official get_lr_schedule_with_warmup over all training steps: linear warm-up over the first
# 1/6, then halved every 1/4 (end = the train loop's iterations, shortened runs included).
param_scheduler = [dict(type='PDPPWarmupStepLR', by_epoch=True, convert_to_iter_based=True)]
# An epoch = steps_per_epoch batches (the official n_train_steps; the dataset planner sets the
# train_dataloader's StepsPerEpochBatchSampler), so max_epochs x steps_per_epoch = the official
# epochs x n_train_steps. Validation (held-out training videos, DDIM sampling with the EMA
# weights) every 5 epochs, as the official evaluation; the best validation SR is kept.
train_cfg = dict(max_epochs=120, val_interval=5)
default_hooks = dict(checkpoint=dict(interval=5))
custom_hooks = [
    dict(type='PKGHook'),
    # stage 1: the task classifier, trained alone first (AdamW lr 1e-4, wd 0, the same
    # warm-up/step schedule, as many steps as the diffusion), saved as
    # <work_dir>/task_classifier.pth and in every checkpoint, reused, never retrained silently
    dict(type='TaskClassifierHook', lr=1e-4, weight_decay=0.0),
    # EMA of the weights used for validation, test and checkpoints: reset to the model every
    # 10 steps before step 400, then ema = 0.995 ema + 0.005 model every 10 steps
    dict(type='PDPPEMAHook', decay=0.995, start_step=400, interval=10),
]

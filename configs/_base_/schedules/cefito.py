# CEFITO's training recipe (official scripts/train.py, engine/trainer.py): AdamW over all
# parameters at a constant lr, 200 epochs, an EMA of the weights used for validation, test and
# checkpoints; the task classifier first (scripts/train_task_classifier.py). The dataset planner
# sets lr, weight decay, the batch size and the EMA constants.
_base_ = ['./paper_500e.py']

optim_wrapper = dict(optimizer=dict(lr=5e-4, weight_decay=1e-3))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=True)]
# Official: the EMA is evaluated every 3 epochs with the full search on the TEST split and the
# best success rate is kept; here validation runs on held-out training videos (dataset config).
train_cfg = dict(max_epochs=200, val_interval=3)
default_hooks = dict(checkpoint=dict(interval=3))
custom_hooks = [
    dict(type='PKGHook'),
    # stage 1: PDPP's task classifier trained alone first (AdamW lr 3e-4, wd 0.01, constant
    # lr, 150 epochs of batch 256), best validation accuracy kept (official: on the test
    # split), saved as <work_dir>/task_classifier.pth and in every checkpoint, never retrained
    dict(type='TaskClassifierHook', lr=3e-4, weight_decay=0.01, schedule='constant',
         max_epochs=150, batch_size=256),
    # the official EMA (dataset planners and crosstask_t3 restate it with their constants)
    dict(type='CEFITOEMAHook', decay=0.995, start_step=400, update_every=10),
]

# ViterbiPlanNet on CrossTask with the authors' selection (../selection/authors_crosstask.py): all
# training videos, best test-window SR checked every epoch; everything but the horizon
# (configs/selection/vpn_crosstask_t{T}_authors.py).
_base_ = [
    '../selection/authors_crosstask.py', '../models/vpn_crosstask.py',
    '../schedules/paper_500e.py'
]
train_cfg = dict(val_interval=1)
# the authors' order of checkpoints: best SR, ties broken by (mAcc + mIoU) / 2
val_evaluator = dict(authors_selection=True)
default_hooks = dict(checkpoint=dict(save_best='plan/authors_selection'))

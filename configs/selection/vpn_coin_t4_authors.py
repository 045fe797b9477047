# ViterbiPlanNet on coin T=4 with the authors' selection (configs/_base_/selection/authors_coin.py):
# all training videos, best test-window SR checked every epoch.
_base_ = [
    '../_base_/selection/authors_coin.py', '../_base_/models/vpn_coin.py',
    '../_base_/schedules/paper_500e.py'
]
horizon = 4
model = dict(horizon=horizon)
train_dataloader = dict(dataset=dict(horizon=horizon))
val_dataloader = dict(dataset=dict(horizon=horizon))
test_dataloader = dict(dataset=dict(horizon=horizon))
train_cfg = dict(val_interval=1)

# ViterbiPlanNet on COIN at horizon T=6 with the paper's 500-epoch schedule.
_base_ = [
    '_base_/datasets/coin.py', '_base_/models/vpn_coin.py',
    '_base_/schedules/paper_500e.py'
]
horizon = 6
model = dict(horizon=horizon)
train_dataloader = dict(dataset=dict(horizon=horizon))
val_dataloader = dict(dataset=dict(horizon=horizon))
test_dataloader = dict(dataset=dict(horizon=horizon))

# CompactPlanNet (this plugin's smaller alternative to the paper's ViterbiPlanNet) on niv
# at horizon T=5 with the paper's 500-epoch schedule.
_base_ = [
    '../_base_/datasets/niv.py', '../_base_/models/compact_niv.py',
    '../_base_/schedules/paper_500e.py'
]
horizon = 5
model = dict(horizon=horizon)
train_dataloader = dict(dataset=dict(horizon=horizon))
val_dataloader = dict(dataset=dict(horizon=horizon))
test_dataloader = dict(dataset=dict(horizon=horizon))

# The main job (tools/quickstart.py): CrossTask T=3 on synthetic features, short schedule,
# model = last epoch (validation on held-out training videos is only logged).
_base_ = [
    '../_base_/datasets/crosstask.py',
    '../_base_/models/vpn_crosstask.py', '../_base_/schedules/short_30e.py'
]
horizon = 3
train_cfg = dict(max_epochs=30, val_interval=10)
default_hooks = dict(checkpoint=dict(interval=10), logger=dict(interval=20))

# uniform emissions baseline on CrossTask at horizon T=4 (see uniform_emissions_crosstask.py).
_base_ = ['./uniform_emissions_crosstask.py']
horizon = 4
model = dict(horizon=horizon)
train_dataloader = dict(dataset=dict(horizon=horizon))
val_dataloader = dict(dataset=dict(horizon=horizon))
test_dataloader = dict(dataset=dict(horizon=horizon))

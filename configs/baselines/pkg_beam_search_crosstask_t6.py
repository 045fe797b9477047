# pkg beam search baseline on CrossTask at horizon T=6 (see pkg_beam_search_crosstask.py).
_base_ = ['./pkg_beam_search_crosstask.py']
horizon = 6
model = dict(horizon=horizon)
train_dataloader = dict(dataset=dict(horizon=horizon))
val_dataloader = dict(dataset=dict(horizon=horizon))
test_dataloader = dict(dataset=dict(horizon=horizon))

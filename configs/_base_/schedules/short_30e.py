# Short schedule for synthetic-data runs and the quickstart: same optimiser, scaled StepLR.
_base_ = ['./paper_500e.py']
param_scheduler = [dict(type='StepLR', step_size=10, gamma=0.65, by_epoch=True)]
train_cfg = dict(max_epochs=30, val_interval=5)

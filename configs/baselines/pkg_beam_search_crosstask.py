# Baseline: PKG beam search on CrossTask (T=3 by default; see *_t{4,5,6}.py).
# A step model (MLP on the concatenated start/goal observations) predicts the first and the
# last action; a beam search over the PKG (counted by PKGHook on the training split) finds the
# most probable path of length T between them.
_base_ = ['../_base_/datasets/crosstask.py', '../_base_/schedules/paper_500e.py']
horizon = 3
model = dict(type='PKGBeamSearchPlanner', feature_dim=1536, num_actions=133, horizon=horizon,
             hidden_dim=256, dropout=0.2, beam_width=10,
             pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
                      extra_datasets=[], perturbations=[], seed=0))
train_dataloader = dict(dataset=dict(horizon=horizon))
val_dataloader = dict(dataset=dict(horizon=horizon))
test_dataloader = dict(dataset=dict(horizon=horizon))

# Baseline: Viterbi decoding through the PKG with uniform emissions (CrossTask, T=3 by
# default; see *_t{4,5,6}.py). No parameters and no training: evaluate it with
# tools/run_protocol.py (run entry train=False), which counts the PKG on the training split.
_base_ = ['../_base_/datasets/crosstask.py', '../_base_/schedules/paper_500e.py']
horizon = 3
model = dict(type='UniformEmissionPlanner', num_actions=133, horizon=horizon)
custom_hooks = [dict(type='PKGHook', count_mode='window', smoothing=0.0, seed=0)]
train_dataloader = dict(dataset=dict(horizon=horizon))
val_dataloader = dict(dataset=dict(horizon=horizon))
test_dataloader = dict(dataset=dict(horizon=horizon))

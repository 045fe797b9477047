# Baseline: Viterbi decoding through the PKG with uniform emissions (CrossTask, T=3 by
# default; see *_t{4,5,6}.py). No parameters and no training: evaluate it with
# tools/test.py without a checkpoint or tools/run_protocol.py (train=False); PKGHook counts
# the PKG (model.pkg) on the training split first.
_base_ = ['../_base_/datasets/crosstask.py', '../_base_/schedules/paper_500e.py']
horizon = 3
model = dict(type='UniformEmissionPlanner', num_actions=133, horizon=horizon,
             pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
                      extra_datasets=[], perturbations=[], seed=0))
train_dataloader = dict(dataset=dict(horizon=horizon))
val_dataloader = dict(dataset=dict(horizon=horizon))
test_dataloader = dict(dataset=dict(horizon=horizon))

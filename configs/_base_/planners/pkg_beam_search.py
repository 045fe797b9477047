# Baseline: PKG beam search, dataset-independent part (pkg_beam_search_<dataset>.py add the
# dataset). A step model (MLP on the concatenated start/goal observations) predicts the first
# and the last action; a beam search over the PKG (counted on the training split) finds the
# most probable path of length T between them.
model = dict(type='PKGBeamSearchPlanner', feature_dim=1536, hidden_dim=256, dropout=0.2,
             beam_width=10,
             pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

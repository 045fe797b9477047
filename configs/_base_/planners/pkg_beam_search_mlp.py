# Baseline: PKG beam search with this plugin's small step model (an MLP on the concatenated
# start/goal observations, cross-entropy on the first and the last action; 0.86M parameters at
# CrossTask), the named alternative to the paper's PDPP step model (./pkg_beam_search.py).
# pkg_beam_search_mlp_<dataset>.py add the dataset and the schedule.
model = dict(type='PKGBeamSearchPlanner', feature_dim=1536, beam_width=10,
             step_model=dict(type='EndpointMLP', hidden_dim=256, dropout=0.2),
             pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

# Baseline: PKG beam search, dataset-independent part (pkg_beam_search_<dataset>.py add the
# dataset and the step model's training). A step model predicts the first and the last action
# from the start/goal observations; a beam search over the PKG (counted on the training split)
# finds the most probable path of length T between them.
# The step model is the paper's: PDPP's U-Net with task conditioning trained on the first and
# last actions only (the ViterbiPlanNet authors' step_models/Diffusion_based_with_task: middle
# action dims zero in x0 and weighted 0), 41.87M parameters at CrossTask (its task classifier,
# trained first, is counted apart). This plugin's 0.86M MLP is the named alternative
# pkg_beam_search_mlp_<dataset>.py.
model = dict(type='PKGBeamSearchPlanner', feature_dim=1536, beam_width=10,
             step_model=dict(type='PDPPDiffusion', dim=256, dim_mults=(1, 2, 4), n_timesteps=200,
                             endpoint_weight=10.0, middle_actions=False, sampling_seed=0),
             pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

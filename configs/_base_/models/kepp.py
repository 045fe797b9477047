# KEPP (Nagasinghe et al., CVPR 2024) computing what its official code computes
# (Ravindu-Yasas-Nagasinghe/KEPP, vpn_plugin/models/kepp.py, docs/kepp.md): PDPP's temporal U-Net
# and schedule twice, no task anywhere. The step model (x = [actions | obs], middle steps zero,
# loss x10 first/last, x0 middle) is trained first (KEPPStepModelHook) and predicts the first
# and last actions; two paths of KEPP's graph between them (walks of exactly T nodes, top 2)
# become the PKG block (2/3, 1/3, written over) and its copy the "LLM" block of the plan model
# (x = [PKG | LLM | actions | obs], loss x5 first/last), sampled with 10-step DDIM.
# Dataset planner bases (../planners/kepp_<dataset>.py) add num_actions and n_timesteps.
# 42,184,335 plan U-Net parameters at CrossTask (N=133); the step U-Net (41,843,589) is counted
# apart and logged beside it.
model = dict(
    type='KEPP',
    feature_dim=1536,  # start/goal observation (3 x 512 S3D frames)
    dim=256,
    dim_mults=(1, 2, 4),
    n_timesteps=200,
    step_n_timesteps=None,  # None: the plan model's
    plan_endpoint_weight=5.0,  # Weighted_MSE x5 on the first/last steps' action dims
    step_endpoint_weight=10.0,  # the step model's x10 (and x0 on the middle steps)
    sampling_seed=0,  # per-window x_T (and DDPM draws) of both models
    sampler='ddim',  # 'ddim' (official inference) | 'ddpm' (official validation)
    train_paths='step',  # 'step' (official: paths of the step model's predictions) | 'truth'
    # a released KEPP graph file instead of the graph of the training videos: the run is then
    # marked "test-set PKG" (the released NIV graph holds the test videos) and refused by the
    # main table
    released_graph=None,
    step_checkpoint=None,  # a kepp_step_model.pth to reuse (checked: dataset, T, N, D)
    # KEPP's graph is counted per training video (count_mode='video'); only sequence
    # perturbations (DataFraction, LabelNoise) apply
    pkg=dict(type='PKGBuilder', count_mode='video', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

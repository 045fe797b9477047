# PDPP (Wang et al., CVPR 2023) computing what its official code computes (MCG-NJU/PDPP,
# vpn_plugin/models/pdpp.py): a temporal U-Net (dim 256, dim_mults (1, 2, 4)) predicting the
# plan x0 = [task one-hot | action one-hot | observation] per step from a noised one, cosine
# schedule, start/goal/task projected back in after every step, Weighted_MSE (sum, x10 on the
# first/last steps' actions), 10-step DDIM (eta 0) at test time conditioned on the task
# classifier's prediction. Dataset planner bases (../planners/pdpp_<dataset>.py) add
# num_actions, num_tasks and n_timesteps. 41,866,647 U-Net parameters at CrossTask (N=133,
# K=18); the task classifier (7,094,290) is counted apart, as in the paper.
model = dict(
    type='PDPP',
    feature_dim=1536,  # start/goal observation (3 x 512 S3D frames)
    dim=256,
    dim_mults=(1, 2, 4),
    n_timesteps=200,
    endpoint_weight=10.0,  # Weighted_MSE's x10 on the first/last steps' action dims
    sampling_seed=0,  # x_T of window i: torch.Generator().manual_seed(seed * 1000003 + i)
    # 'argmax' (official) | 'viterbi' (hard Viterbi through the PKG of the log-softmax of the
    # sampled action dims; not PDPP's)
    decode='argmax',
    pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

# CompactPlanNet (this plugin's smaller alternative, NOT the paper's network; see
# vpn_plugin/models/compact_plan_net.py), dataset-independent part. Dataset model bases
# (compact_crosstask.py, ...) add num_actions, num_tasks and the text files.
model = dict(
    type='CompactPlanNet',
    feature_dim=1536,  # 3 concatenated S3D frames (PDPP / ViterbiPlanNet recipe)
    embed_dim=128,
    num_layers=2,
    num_heads=4,
    dropout=0.2,
    use_dvl=True,  # False = Base Model (plan loss on the emissions)
    # 'emission_argmax' | 'emission_viterbi' | 'dvl_argmax' | 'dvl_viterbi' (paper default)
    decode='dvl_viterbi',
    dvl_temperature=1.0,
    dvl_layers=1,  # stacked DVL layers; 2 for COIN T=6 as in the paper
    loss_weights=dict(plan=1.0, align=1.0, task=1.0),  # 0 switches a term off
    align_temperature=0.1,
    freeze_visual=False,
    # None: a test horizon different from `horizon` is an error; 'ends' / 'spread' pick the
    # step queries of a longer-horizon model (see vpn_plugin.models.horizon_queries).
    cross_horizon=None,
    # the PKG, counted on the training split by PKGHook (default_runtime.py) before train, val
    # or test and stored in the checkpoint; perturbations: DataFraction, LabelNoise,
    # EdgeDropout, WeightNoise, UniformGraph (the "no PKG" ablation), applied in order
    pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

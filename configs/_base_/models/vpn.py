# ViterbiPlanNet exactly as the authors' code (vpn_plugin/models/viterbi_plan_net.py):
# E=128, mlp_ratio 2, dropout 0.2, input dropout 0.4 (their scripts and StateEncoder).
# Dataset model bases (vpn_crosstask.py, ...) add num_actions, num_tasks and the text features.
model = dict(
    type='ViterbiPlanNet',
    feature_dim=1536,  # 3 concatenated 512-d S3D frames per observation
    text_dim=768,  # CLIP ViT-L/14 text features of the state descriptions
    embed_dim=128,
    mlp_ratio=2,
    dropout=0.2,
    input_dropout=0.4,
    use_dvl=True,  # False = Base Model (plan loss on the emission probabilities)
    # 'emission_argmax' | 'emission_viterbi' | 'dvl_argmax' (authors' "viterbi-DVL") |
    # 'dvl_viterbi' (authors' "viterbi-DVL+VD", the paper's numbers)
    decode='dvl_viterbi',
    loss_weights=dict(state=1.0, plan=1.0, task=1.0),  # 0 switches a term off
    freeze_visual=False,
    # None: a test horizon different from `horizon` is an error; 'repeat_last': the authors'
    # rule for testing a longer-horizon model on shorter windows (configs *_eval_t*.py).
    cross_horizon=None,
    # the PKG, counted on the training split by PKGHook (default_runtime.py) before train, val
    # or test and stored in the checkpoint; perturbations: DataFraction, LabelNoise,
    # EdgeDropout, WeightNoise, UniformGraph (the "no PKG" ablation), applied in order
    pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

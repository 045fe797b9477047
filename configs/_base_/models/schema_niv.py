_base_ = ['./schema.py']
model = dict(
    num_actions=48,
    num_tasks=5,
    no_state_task=True,  # the official NIV script (scripts/run_niv.sh: --no_state_task)
    # the authors' CLIP features (N, 6, 768), as ViterbiPlanNet's (models/vpn_niv.py)
    text_embeddings=dict(file='{data_root}/niv/state_features_clip.npy'))

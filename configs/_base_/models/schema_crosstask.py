_base_ = ['./schema.py']
model = dict(
    num_actions=133,
    num_tasks=18,
    # the authors' CLIP features (N, 6, 768), as ViterbiPlanNet's (models/vpn_crosstask.py)
    text_embeddings=dict(file='{data_root}/crosstask/state_features_clip_133.npy'))

_base_ = ['./vpn.py']
model = dict(
    num_actions=133,
    num_tasks=18,
    # the authors' CLIP features (N, 6, 768); 105-action taxonomy: state_features_clip_105.npy
    text_embeddings=dict(file='{data_root}/crosstask/state_features_clip_133.npy'))

_base_ = ['./vpn.py']
model = dict(
    num_actions=48,
    num_tasks=5,
    text_embeddings=dict(file='{data_root}/niv/state_features_clip.npy'))

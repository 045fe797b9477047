_base_ = ['./vpn.py']
model = dict(
    num_actions=105,
    num_tasks=18,
    # the authors' CLIP features of the 105 merged actions (105, 6, 768)
    text_embeddings=dict(file='{data_root}/crosstask/state_features_clip_105.npy'))

# ViterbiPlanNet over the joined action space of CrossTask + NIV + COIN (../datasets/union.py):
# 133 + 48 + 778 actions, 18 + 5 + 180 tasks, the sources' state-description features
# concatenated in source order, each as in its own model base (./vpn_{crosstask,niv,coin}.py;
# tests/test_studies.py checks that they agree).
_base_ = ['./vpn.py']
model = dict(
    num_actions=133 + 48 + 778,
    num_tasks=18 + 5 + 180,
    text_embeddings=dict(sources=[
        dict(file='{data_root}/crosstask/state_features_clip_133.npy'),
        dict(file='{data_root}/niv/state_features_clip.npy'),
        # COIN's MiniLM stand-in (./vpn_coin.py says how to use the paper's CLIP features)
        dict(taxonomy='{data_root}/coin/taxonomy.json',
             state_descriptions='{data_root}/coin/state_descriptions.json',
             encoder=None, pooling='mean', pad_to=768, cache_dir='{cache_dir}')]))

# ViterbiPlanNet on CrossTask + NIV + COIN together (../datasets/union.py): one network over the
# joined action space (133 + 48 + 778 actions, 18 + 5 + 180 tasks), one PKG counted on the
# union's training sequences (block-diagonal: no transition joins two datasets), the sources'
# state-description features concatenated in source order (each as in its own model base,
# ../models/vpn_{crosstask,niv,coin}.py; tests/test_union.py checks they agree).
# configs/union/vpn_union_t{T}.py set `horizon = T`.
_base_ = ['../datasets/union.py', '../models/vpn.py', '../schedules/paper_500e.py']
model = dict(
    num_actions=133 + 48 + 778,
    num_tasks=18 + 5 + 180,
    text_embeddings=dict(sources=[
        dict(file='../shared/data/crosstask/state_features_clip_133.npy'),
        dict(file='../shared/data/niv/state_features_clip.npy'),
        dict(taxonomy='../shared/data/coin/taxonomy.json',
             state_descriptions='../shared/data/coin/state_descriptions.json',
             encoder='data/clip-vit-large-patch14', pooling='clip',
             cache_dir='data/text_cache')]))

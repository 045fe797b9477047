# SCHEMA over the joined action space of CrossTask + NIV + COIN (../datasets/union.py), with
# the same state-description features as ./vpn_union.py (tests/test_studies.py checks it);
# the state decoder gets the task prediction (no_state_task=False, as for CrossTask and COIN).
_base_ = ['./schema.py']
model = dict(
    num_actions=133 + 48 + 778,
    num_tasks=18 + 5 + 180,
    text_embeddings=dict(sources=[
        dict(file='{data_root}/crosstask/state_features_clip_133.npy'),
        dict(file='{data_root}/niv/state_features_clip.npy'),
        dict(taxonomy='{data_root}/coin/taxonomy.json',
             state_descriptions='{data_root}/coin/state_descriptions.json',
             encoder=None, pooling='mean', pad_to=768, cache_dir='{cache_dir}')]))

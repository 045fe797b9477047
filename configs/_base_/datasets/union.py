# CrossTask + NIV + COIN in ONE action space (ConcatPlanningDataset, the dataset-independent
# PKG study): each source's windows come from its own dataset config below (same split, same
# features, observations and window policy as when it is used alone), action ids offset by the
# sources before it (CrossTask 0-132, NIV 133-180, COIN 181-958), task ids likewise. A test
# dataset keeps one source's windows in the joined space with `select=['niv']` (the protocol
# does). --data-root reaches every source; each source keeps its own feature_dir (change one
# with sources[i].cfg_options=dict(feature_dir=...)).
_base_ = ['./planning_dataset.py']
data_root = '../shared/data'
cache_dir = 'data/cache/union'  # the union model's computed text features (COIN's stand-in)
union_sources = [dict(name='crosstask', config='configs/_base_/datasets/crosstask.py'),
                 dict(name='niv', config='configs/_base_/datasets/niv.py'),
                 dict(name='coin', config='configs/_base_/datasets/coin.py')]
union = dict(type='ConcatPlanningDataset', horizon=3, sources=union_sources,
             data_root='{data_root}')
train_dataloader = dict(dataset=dict(union, split='train', _delete_=True))
val_dataloader = dict(dataset=dict(union, split='val', _delete_=True))
test_dataloader = dict(dataset=dict(union, split='test', _delete_=True))
# What a model over the union needs (../planners/{vpn,schema}_union.py): the joined action and
# task counts and the sources' state-description features concatenated in source order, each
# as in its own model base (../models/vpn_{crosstask,niv,coin}.py; tests/test_studies.py checks
# that they agree; COIN's MiniLM stand-in: ../models/vpn_coin.py says how to use CLIP).
union_model = dict(
    num_actions=133 + 48 + 778,
    num_tasks=18 + 5 + 180,
    text_embeddings=dict(sources=[
        dict(file='{data_root}/crosstask/state_features_clip_133.npy'),
        dict(file='{data_root}/niv/state_features_clip.npy'),
        dict(taxonomy='{data_root}/coin/taxonomy.json',
             state_descriptions='{data_root}/coin/state_descriptions.json',
             encoder=None, pooling='mean', pad_to=768, cache_dir='{cache_dir}')]))

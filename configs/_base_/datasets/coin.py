# COIN (180 tasks, 778 actions). Only the taxonomy is in ../shared/data/coin: the COIN
# train/test windows are NOT available here. Put the unified-protocol window files at
# <data_root>/splits/{train,test}_T{horizon}.json and the S3D features in feature_dir
# (public pickled .npy: allow_pickle=True, or convert with tools/convert_features.py).
# Building a dataset without them fails with an error naming the missing file.
dataset_type = 'PlanningDataset'
data_root = '../shared/data/coin'
feature_dir = 'data/coin/features'
cache_dir = 'data/cache/coin'
horizon = 3
observation = 'concat3'
allow_pickle = False
batch_size = 256

dataset_common = dict(
    type=dataset_type, data_root=data_root, horizon=horizon, taxonomy='taxonomy.json',
    feature_dir=feature_dir, observation=observation, allow_pickle=allow_pickle,
    cache_dir=cache_dir, frame_dim=512)
train_source = dict(window_file='splits/train_T{horizon}.json', val_fraction=0.1, split_seed=0)

train_dataloader = dict(
    batch_size=batch_size, num_workers=0, persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(**dataset_common, **train_source, split='train'))
val_dataloader = dict(
    batch_size=batch_size, num_workers=0, persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(**dataset_common, **train_source, split='val'))
test_dataloader = dict(
    batch_size=batch_size, num_workers=0, persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(**dataset_common, split='test', window_file='splits/test_T{horizon}.json'))

val_evaluator = dict(type='PlanningMetric')
test_evaluator = dict(type='PlanningMetric')

# NIV (5 tasks, 48 actions): the window files are the only annotations.
# train/val: splits/train_T{horizon}.json (val = a seeded 10% of its videos);
# test: splits/test_T{horizon}.json. Features: synthetic by default
# (tools/make_synthetic_features.py --dataset niv --data-root ../shared/data
# --out data/synthetic/niv). A child config changing the horizon must also set it in the
# three datasets.
dataset_type = 'PlanningDataset'
data_root = '../shared/data/niv'
feature_dir = 'data/synthetic/niv/features'
cache_dir = 'data/cache/niv'
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

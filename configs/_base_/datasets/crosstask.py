# CrossTask (18 primary tasks, 133 actions), unified protocol.
# train/val: windows slid over the CSV annotations of splits/train_videos.json; val = a seeded
# 10% of the TRAIN videos. test: the official windows splits/test_T{horizon}_133.json.
# Features: synthetic by default (tools/make_synthetic_features.py --dataset crosstask
# --data-root ../shared/data --out data/synthetic/crosstask); for the real S3D features set
# feature_dir to their folder and allow_pickle=True (public .npy), or convert them once with
# tools/convert_features.py and keep allow_pickle=False.
# A child config changing the horizon must also set it in the three datasets, e.g.
#   train_dataloader = dict(dataset=dict(horizon=4)) (and val/test).
dataset_type = 'PlanningDataset'
data_root = '../shared/data/crosstask'
feature_dir = 'data/synthetic/crosstask/features'
cache_dir = 'data/cache/crosstask'
horizon = 3
observation = 'concat3'  # 'concat3' (1536-d, PDPP/ViterbiPlanNet) or 'mean3' (512-d, SCHEMA)
allow_pickle = False
batch_size = 256

dataset_common = dict(
    type=dataset_type, data_root=data_root, horizon=horizon, taxonomy='taxonomy_133.json',
    feature_dir=feature_dir, observation=observation, allow_pickle=allow_pickle,
    cache_dir=cache_dir, frame_dim=512)
train_source = dict(
    video_list='splits/train_videos.json', annotation_dir='crosstask_release/annotations',
    tasks_primary='crosstask_release/tasks_primary.txt', val_fraction=0.1, split_seed=0)

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
    dataset=dict(**dataset_common, split='test', window_file='splits/test_T{horizon}_133.json'))

val_evaluator = dict(type='PlanningMetric')
test_evaluator = dict(type='PlanningMetric')

# Template for a dataset of your own (e.g. EgoPER): copy it, set the paths, inherit from it.
# <data_root>/taxonomy.json: {"<idx>_<task>": {"<global action id>": "<action name>", ...}, ...}
#   (task indices 0..K-1 in order, action ids exactly 0..N-1).
# <data_root>/{train,test}.json (our per-video JSON):
#   [{"vid": "...", "task": "<task key or index>", "steps": [[start_s, end_s, action_id], ...],
#     "feature": "<feature file stem>" (optional, default "<task>_<vid>")}, ...]
#   steps in temporal order; windows of `horizon` steps are slid over each video.
# <feature_dir>/<stem>.npz with array frames_features (seconds, frame_dim), one vector per
# second (or the public pickled .npy with allow_pickle=True).
dataset_type = 'PlanningDataset'
data_root = 'data/my_dataset'
feature_dir = 'data/my_dataset/features'
cache_dir = 'data/cache/my_dataset'
horizon = 3
observation = 'concat3'  # or 'mean3'
allow_pickle = False
batch_size = 256

dataset_common = dict(
    type=dataset_type, data_root=data_root, horizon=horizon, taxonomy='taxonomy.json',
    feature_dir=feature_dir, observation=observation, allow_pickle=allow_pickle,
    cache_dir=cache_dir, frame_dim=512)
train_source = dict(annotation_file='train.json', val_fraction=0.1, split_seed=0)

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
    dataset=dict(**dataset_common, split='test', annotation_file='test.json'))

val_evaluator = dict(type='PlanningMetric')
test_evaluator = dict(type='PlanningMetric')

# Template for a dataset of your own (e.g. EgoPER): copy it, set the paths, inherit from it.
# <data_root>/my_dataset/taxonomy.json: {"<idx>_<task>": {"<global action id>": "<action name>", ...}, ...}
#   (task indices 0..K-1 in order, action ids exactly 0..N-1).
# <data_root>/my_dataset/{train,test}.json (our per-video JSON):
#   [{"vid": "...", "task": "<task key or index>", "steps": [[start_s, end_s, action_id], ...],
#     "feature": "<feature file stem>" (optional, default "<task>_<vid>")}, ...]
#   steps in temporal order; windows of `horizon` steps are slid over each video.
# <feature_dir>/<stem>.npz with array frames_features (seconds, frame_dim), one vector per
# second (or any public layout, e.g. a pickled dict named .npy; they load as they are).
_base_ = ['./planning_dataset.py']
# Locations (relative paths: from the repository root; tools: --data-root, --feature-dir,
# --cfg-options data_root=...): data_root holds <dataset>/... laid out as ../shared/data.
data_root = 'data'
feature_dir = 'data/my_dataset/features'
cache_dir = 'data/cache/my_dataset'
paths = dict(data_root=data_root + '/my_dataset', taxonomy='taxonomy.json',
             feature_dir=feature_dir, cache_dir=cache_dir)

train_dataloader = dict(dataset=dict(**paths, annotation_file='train.json'))
val_dataloader = dict(dataset=dict(**paths, annotation_file='train.json'))
test_dataloader = dict(dataset=dict(**paths, annotation_file='test.json'))

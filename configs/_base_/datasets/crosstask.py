# CrossTask (18 primary tasks, 133 actions), unified protocol.
# train/val: windows slid over the CSV annotations of splits/train_videos.json; val = a seeded
# 10% of the TRAIN videos. test: the official windows splits/test_T{horizon}_133.json.
# Features: synthetic by default (tools/make_synthetic_features.py --dataset crosstask
# --data-root ../shared/data --out data/synthetic/crosstask); for the real S3D features set
# feature_dir to their folder (the public files load as they are, no code runs), or convert
# them once with tools/convert_features.py.
# A child config sets only `horizon = T` (vpn_plugin.data_paths.apply_horizon writes it into
# the model and the datasets; `test_horizon` for the test windows, default `horizon`).
_base_ = ['./planning_dataset.py']
# Locations (relative paths: from the repository root; tools: --data-root, --feature-dir,
# --cfg-options data_root=...): data_root holds <dataset>/... laid out as ../shared/data.
data_root = '../shared/data'
feature_dir = 'data/synthetic/crosstask/features'
cache_dir = 'data/cache/crosstask'
paths = dict(data_root='{data_root}/crosstask', taxonomy='taxonomy_133.json',
             feature_dir='{feature_dir}', cache_dir='{cache_dir}')
train_source = dict(
    video_list='splits/train_videos.json', annotation_dir='crosstask_release/annotations',
    tasks_primary='crosstask_release/tasks_primary.txt')

train_dataloader = dict(dataset=dict(**paths, **train_source))
val_dataloader = dict(dataset=dict(**paths, **train_source))
test_dataloader = dict(dataset=dict(**paths, window_file='splits/test_T{horizon}_133.json'))

# NIV (5 tasks, 48 actions): the window files are the only annotations.
# train/val: splits/train_T{horizon}.json (val = a seeded 10% of its videos);
# test: splits/test_T{horizon}.json. Features: synthetic by default
# (tools/make_synthetic_features.py --dataset niv --data-root ../shared/data
# --out data/synthetic/niv). A child config sets only `horizon = T` (crosstask.py).
_base_ = ['./planning_dataset.py']
# Locations (relative paths: from the repository root; tools: --data-root, --feature-dir,
# --cfg-options data_root=...): data_root holds <dataset>/... laid out as ../shared/data.
data_root = '../shared/data'
feature_dir = 'data/synthetic/niv/features'
cache_dir = 'data/cache/niv'
paths = dict(data_root='{data_root}/niv', taxonomy='taxonomy.json',
             feature_dir='{feature_dir}', cache_dir='{cache_dir}')

train_dataloader = dict(dataset=dict(**paths, window_file='splits/train_T{horizon}.json'))
val_dataloader = dict(dataset=dict(**paths, window_file='splits/train_T{horizon}.json'))
test_dataloader = dict(dataset=dict(**paths, window_file='splits/test_T{horizon}.json'))

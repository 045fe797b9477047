# COIN (180 tasks, 778 actions). Only the taxonomy is in ../shared/data/coin: the COIN
# train/test windows are NOT available here. Put the unified-protocol window files at
# <data_root>/coin/splits/{train,test}_T{horizon}.json and the S3D features in feature_dir
# (public pickled .npy: allow_pickle=True, or convert with tools/convert_features.py).
# Building a dataset without them fails with an error naming the missing file.
_base_ = ['./planning_dataset.py']
# Locations (relative paths: from the repository root; tools: --data-root, --feature-dir,
# --cfg-options data_root=...): data_root holds <dataset>/... laid out as ../shared/data.
data_root = '../shared/data'
feature_dir = 'data/coin/features'
cache_dir = 'data/cache/coin'
paths = dict(data_root=data_root + '/coin', taxonomy='taxonomy.json',
             feature_dir=feature_dir, cache_dir=cache_dir)

train_dataloader = dict(dataset=dict(**paths, window_file='splits/train_T{horizon}.json'))
val_dataloader = dict(dataset=dict(**paths, window_file='splits/train_T{horizon}.json'))
test_dataloader = dict(dataset=dict(**paths, window_file='splits/test_T{horizon}.json'))

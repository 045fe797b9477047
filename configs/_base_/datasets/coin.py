# COIN (180 tasks, 778 actions). NOTE: only the taxonomy is in ../shared/data/coin; COIN's
# train/test windows are NOT there. Needed layout:
#   <data_root>/coin/splits/{train,test}_T{horizon}.json: unified-protocol window files, a JSON
#     list [{"id": {"feature": "<task>_<vid>.npy", "task_id": <task index>, "legal_range":
#       [[start_s, end_s, action_id], ...horizon rows]}, "instruction_len": <steps in video>}]
#   <feature_dir>/<task>_<vid>.npy (public S3D files, load as they are) or .npz (converted
#     with tools/convert_features.py): frames_features (seconds, 512).
# Building a dataset without them fails with one error naming the missing file and its layout.
_base_ = ['./planning_dataset.py']
# Locations (relative paths: from the repository root; tools: --data-root, --feature-dir,
# --cfg-options data_root=...): data_root holds <dataset>/... laid out as ../shared/data.
data_root = '../shared/data'
feature_dir = 'data/coin/features'
cache_dir = 'data/cache/coin'
paths = dict(data_root='{data_root}/coin', taxonomy='taxonomy.json',
             feature_dir='{feature_dir}', cache_dir='{cache_dir}')

train_dataloader = dict(dataset=dict(**paths, window_file='splits/train_T{horizon}.json'))
val_dataloader = dict(dataset=dict(**paths, window_file='splits/train_T{horizon}.json'))
test_dataloader = dict(dataset=dict(**paths, window_file='splits/test_T{horizon}.json'))

# COIN (180 tasks, 778 actions; 178 occur), unified protocol: the 70/30 video split in COIN's
# own per-video format (<data_root>/coin/annotations/coin_{train_70,test_30}.json, as PDPP,
# KEPP and the ViterbiPlanNet authors distribute it; vpn_plugin/datasets/annotations.py,
# read_coin_annotations). Windows: one per run of T consecutive steps of each video, the
# authors' recipe, so the test windows ARE the official ones (T=4: splits/test_T4.json, checked
# by tests/test_coin.py). train/val: coin_train_70.json (val = a seeded 10% of its videos);
# test: coin_test_30.json. A video listed in both files is a bad video (other_split).
# Features: synthetic by default (tools/make_synthetic_features.py --dataset coin --data-root
# ../shared/data --out data/synthetic/coin); real ones: <feature_dir>/<class>_<recipe_type>_<vid>.npy
# (the public files load as they are) or .npz (tools/convert_features.py).
_base_ = ['./planning_dataset.py']
# Locations (relative paths: from the repository root; tools: --data-root, --feature-dir,
# --cfg-options data_root=...): data_root holds <dataset>/... laid out as ../shared/data.
data_root = '../shared/data'
feature_dir = 'data/synthetic/coin/features'
cache_dir = 'data/cache/coin'
paths = dict(data_root='{data_root}/coin', taxonomy='taxonomy.json',
             feature_dir='{feature_dir}', cache_dir='{cache_dir}', annotation_format='coin')
train_source = dict(annotation_file='annotations/coin_train_70.json',
                    other_split='annotations/coin_test_30.json')
test_source = dict(annotation_file='annotations/coin_test_30.json',
                   other_split='annotations/coin_train_70.json')

train_dataloader = dict(dataset=dict(**paths, **train_source))
val_dataloader = dict(dataset=dict(**paths, **train_source))
test_dataloader = dict(dataset=dict(**paths, **test_source))

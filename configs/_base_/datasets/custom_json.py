# A dataset of your own (e.g. EgoPER), in our per-video JSON format; a complete, runnable
# example: examples/custom_dataset/ (README there). Inherit this file and set data_root.
# <data_root>/ is the dataset's folder:
#   taxonomy.json: {"<idx>_<task>": {"<global action id>": "<action name>", ...}, ...}
#     (task indices 0..K-1, each once, in any order the file lists them; action ids exactly
#     0..N-1, each action in one task)
#   train.json, test.json: [{"vid": "...", "task": <task>, "steps": [[start_s, end_s, action_id],
#     ...], "feature": "<feature file stem>" (optional, default "<task as written>_<vid>")}, ...]
#     <task>: the task's name ("make_tea"), its taxonomy key ("0_make_tea") or index (0);
#     steps in temporal order, seconds; windows of `horizon` steps are slid over each video
#   features/<stem>.npz with the array frames_features (seconds, frame_dim), one vector per
#     second (or any public layout, e.g. a pickled dict named .npy; they load as they are);
#     synthetic ones: python tools/make_synthetic_features.py --config <your config>
#   cache/: extracted observations (made on first use), under the dataset's own root
# Relative data_root: from the repository root; tools: --data-root DIR, --feature-dir DIR.
_base_ = ['./planning_dataset.py']
data_root = 'data/my_dataset'
feature_dir = '{data_root}/features'
cache_dir = '{data_root}/cache'
paths = dict(data_root='{data_root}', taxonomy='taxonomy.json',
             feature_dir='{feature_dir}', cache_dir='{cache_dir}')

train_dataloader = dict(dataset=dict(**paths, annotation_file='train.json'))
val_dataloader = dict(dataset=dict(**paths, annotation_file='train.json'))
test_dataloader = dict(dataset=dict(**paths, annotation_file='test.json'))

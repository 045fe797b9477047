# ViterbiPlanNet on a dataset of your own: "kitchen" (2 tasks, 9 actions, 22 training and 7 test
# videos, examples/custom_dataset/kitchen/), walkthrough in examples/custom_dataset/README.md:
#   python tools/make_synthetic_features.py --config examples/custom_dataset/vpn_kitchen_t3.py
#   python tools/train.py examples/custom_dataset/vpn_kitchen_t3.py
# For yours: copy this file, point data_root at your dataset's folder (absolute, or relative to
# the repository root) and set num_actions / num_tasks; outside the repository, give _base_ the
# absolute paths of this repository's configs.
_base_ = ['../../configs/_base_/datasets/custom_json.py', '../../configs/_base_/models/vpn.py',
          '../../configs/_base_/schedules/short_30e.py']
data_root = 'examples/custom_dataset/kitchen'
horizon = 3
# few videos: hold out a quarter of the training videos for validation (train and val must agree)
train_dataloader = dict(batch_size=32, dataset=dict(val_fraction=0.25))
val_dataloader = dict(batch_size=32, dataset=dict(val_fraction=0.25))
test_dataloader = dict(batch_size=32)
model = dict(
    num_actions=9,
    num_tasks=2,
    # the state descriptions encoded once by the installed MiniLM (384-d, offline) and cached
    # under cache_dir; or a local CLIP: encoder='<dir>', pooling='clip', text_dim=768; or a
    # ready (N, 6, Dt) array: text_embeddings=dict(file='{data_root}/state_features.npy')
    # (tools/make_text_features.py writes one)
    text_dim=384,
    text_embeddings=dict(taxonomy='{data_root}/taxonomy.json',
                         state_descriptions='{data_root}/state_descriptions.json',
                         encoder=None, pooling='mean', cache_dir='{cache_dir}'))

# Loaders and evaluators shared by every dataset base: a dataset base inherits this file and
# sets only its paths and annotation sources (crosstask.py, niv.py, coin.py, custom_json.py).
# train/val: the same training source; val = a seeded 10% of its videos (never the test split).
# The planning horizon T; children set `horizon = T` (and `test_horizon` for cross-horizon
# tests): vpn_plugin.data_paths.apply_horizon writes them into the model and the datasets.
horizon = 3
# 'authors' (the paper's: frames t-1..t+1, 1536-d), 'concat3' (PDPP, 1536-d), 'mean3' (SCHEMA,
# 512-d); vpn_plugin/datasets/observations.py
observation = 'authors'
# 'authors' (the paper's): relabel/drop windows with a step at or past the video's end, as the
# authors' loader; 'keep': every window scored with its annotated labels (README, Data)
window_policy = 'authors'
batch_size = 256
# True: a split's observations and labels live on the model's device, one tensor per field, and
# a batch is one index gather (no per-window items, no copy per batch); False: items stacked
# by default_collate. Same batches, bit-identical training (tests/test_device_data.py).
device_resident = True

dataset = dict(type='PlanningDataset', horizon=horizon, observation=observation,
               window_policy=window_policy, frame_dim=512, device_resident=device_resident)
loader = dict(batch_size=batch_size, num_workers=0, persistent_workers=False,
              collate_fn=dict(type='planning_collate'))
train_dataloader = dict(**loader, sampler=dict(type='DefaultSampler', shuffle=True),
                        dataset=dict(**dataset, split='train', val_fraction=0.1, split_seed=0))
val_dataloader = dict(**loader, sampler=dict(type='DefaultSampler', shuffle=False),
                      dataset=dict(**dataset, split='val', val_fraction=0.1, split_seed=0))
test_dataloader = dict(**loader, sampler=dict(type='DefaultSampler', shuffle=False),
                       dataset=dict(**dataset, split='test'))

val_evaluator = dict(type='PlanningMetric')
test_evaluator = dict(type='PlanningMetric')

# Loaders and evaluators shared by every dataset base: a dataset base inherits this file and
# sets only its paths and annotation sources (crosstask.py, niv.py, coin.py, custom_json.py).
# train/val: the same training source; val = a seeded 10% of its videos (never the test split).
horizon = 3
observation = 'concat3'  # 'concat3' (1536-d, PDPP/ViterbiPlanNet) or 'mean3' (512-d, SCHEMA)
allow_pickle = False  # True reads the public pickled .npy features (runs code: trusted files only)
batch_size = 256

dataset = dict(type='PlanningDataset', horizon=horizon, observation=observation,
               allow_pickle=allow_pickle, frame_dim=512)
loader = dict(batch_size=batch_size, num_workers=0, persistent_workers=False,
              collate_fn=dict(type='default_collate'))
train_dataloader = dict(**loader, sampler=dict(type='DefaultSampler', shuffle=True),
                        dataset=dict(**dataset, split='train', val_fraction=0.1, split_seed=0))
val_dataloader = dict(**loader, sampler=dict(type='DefaultSampler', shuffle=False),
                      dataset=dict(**dataset, split='val', val_fraction=0.1, split_seed=0))
test_dataloader = dict(**loader, sampler=dict(type='DefaultSampler', shuffle=False),
                       dataset=dict(**dataset, split='test'))

val_evaluator = dict(type='PlanningMetric')
test_evaluator = dict(type='PlanningMetric')

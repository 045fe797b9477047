# CEFITO on CrossTask with the official crosstask_t3 recipe (margins 0.05/0.15, order weight
# 0.7, permutation negatives 0.08, observation noise 0.30, aux weight 1, lr 5e-4, wd 0.075,
# batch 128, EMA 0.99738562 from step 1275 every 20) over ./cefito_crosstask.py (T >= 4).
_base_ = ['./cefito_crosstask.py']
model = dict(min_margin=0.05, max_margin=0.15, margin_order_weight=0.7,
             permutation_negative_ratio=0.08, observation_noise=0.30, aux_weight=1.0)
optim_wrapper = dict(optimizer=dict(lr=5e-4, weight_decay=0.075))
train_dataloader = dict(batch_size=128)
custom_hooks = [
    dict(type='PKGHook'),
    dict(type='TaskClassifierHook', lr=3e-4, weight_decay=0.01, schedule='constant',
         max_epochs=150, batch_size=256),
    dict(type='CEFITOEMAHook', decay=0.99738562, start_step=1275, update_every=20),
]

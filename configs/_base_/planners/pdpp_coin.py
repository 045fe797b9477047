# PDPP on COIN (778 actions, 180 tasks): the official settings: 200 diffusion steps, lr 1e-5,
# 800 epochs x 200 steps (160,000 steps of batch 256).
# Everything but the horizon (configs/baselines/pdpp_coin_t{T}.py set `horizon = T`).
_base_ = ['../datasets/coin.py', '../models/pdpp.py', '../schedules/pdpp.py']
model = dict(num_actions=778, num_tasks=180, n_timesteps=200)
optim_wrapper = dict(optimizer=dict(lr=1e-5))
train_cfg = dict(max_epochs=800)
train_dataloader = dict(
    batch_sampler=dict(type='StepsPerEpochBatchSampler', steps_per_epoch=200, drop_last=True))

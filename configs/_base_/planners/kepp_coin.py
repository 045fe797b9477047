# KEPP on COIN (778 actions): PDPP's official settings (KEPP's code keeps PDPP's recipe): 200
# diffusion steps, lr 1e-5, 800 epochs x 200 steps (160,000 steps of batch 256).
# Everything but the horizon (configs/baselines/kepp_coin_t{T}.py set `horizon = T`).
_base_ = ['../datasets/coin.py', '../models/kepp.py', '../schedules/kepp.py']
model = dict(num_actions=778, n_timesteps=200)
optim_wrapper = dict(optimizer=dict(lr=1e-5))
train_cfg = dict(max_epochs=800)
train_dataloader = dict(
    batch_sampler=dict(type='StepsPerEpochBatchSampler', steps_per_epoch=200, drop_last=True))

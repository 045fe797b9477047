# KEPP on NIV (48 actions): PDPP's official settings (KEPP's code keeps PDPP's recipe): 50
# diffusion steps, lr 3e-4, 130 epochs x 50 steps (6,500 steps of batch 256).
# Everything but the horizon (configs/baselines/kepp_niv_t{T}.py set `horizon = T`).
_base_ = ['../datasets/niv.py', '../models/kepp.py', '../schedules/kepp.py']
model = dict(num_actions=48, n_timesteps=50)
optim_wrapper = dict(optimizer=dict(lr=3e-4))
train_cfg = dict(max_epochs=130)
train_dataloader = dict(
    batch_sampler=dict(type='StepsPerEpochBatchSampler', steps_per_epoch=50, drop_last=True))

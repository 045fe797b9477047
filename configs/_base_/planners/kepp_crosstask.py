# KEPP on CrossTask (133 actions): PDPP's official CrossTask_How settings, which are KEPP's
# defaults: 200 diffusion steps, lr 5e-4, 120 epochs x 200 steps (24,000 steps of batch 256).
# Everything but the horizon (configs/baselines/kepp_crosstask_t{T}.py set `horizon = T`).
_base_ = ['../datasets/crosstask.py', '../models/kepp.py', '../schedules/kepp.py']
model = dict(num_actions=133, n_timesteps=200)
optim_wrapper = dict(optimizer=dict(lr=5e-4))
train_cfg = dict(max_epochs=120)
train_dataloader = dict(
    batch_sampler=dict(type='StepsPerEpochBatchSampler', steps_per_epoch=200, drop_last=True))

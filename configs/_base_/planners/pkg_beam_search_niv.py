# PKG beam search baseline on NIV with the paper's PDPP step model (./pkg_beam_search.py):
# everything but the horizon (configs/baselines/pkg_beam_search_niv_t{T}.py). Step-model
# training as the ViterbiPlanNet authors' scripts (step_models/Diffusion_based_with_task/
# scripts/run_niv.sh with utils/args.py defaults): 200 diffusion steps, AdamW lr 5e-4,
# 200 epochs x 200 steps of batch 256, EMA, the task classifier trained first.
_base_ = ['../datasets/niv.py', './pkg_beam_search.py', '../schedules/pdpp.py']
model = dict(num_actions=48, step_model=dict(num_tasks=5))
optim_wrapper = dict(optimizer=dict(lr=5e-4))
train_cfg = dict(max_epochs=200)
train_dataloader = dict(
    batch_sampler=dict(type='StepsPerEpochBatchSampler', steps_per_epoch=200, drop_last=True))

# PKG beam search baseline on COIN with the paper's PDPP step model (./pkg_beam_search.py),
# trained as the ViterbiPlanNet authors did (../schedules/pdpp_step_model.py): everything but the
# horizon (configs/baselines/pkg_beam_search_coin_t{T}.py).
_base_ = ['../datasets/coin.py', './pkg_beam_search.py', '../schedules/pdpp_step_model.py']
model = dict(num_actions=778, step_model=dict(num_tasks=180))
train_dataloader = dict(
    batch_sampler=dict(type='StepsPerEpochBatchSampler', steps_per_epoch=200, drop_last=True))

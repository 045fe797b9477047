# PKG beam search baseline on CrossTask (./pkg_beam_search.py): everything but the horizon
# (configs/baselines/pkg_beam_search_crosstask_t{T}.py).
_base_ = ['../datasets/crosstask.py', './pkg_beam_search.py', '../schedules/paper_500e.py']
model = dict(num_actions=133)

# PKG beam search baseline on CrossTask with the MLP step model (./pkg_beam_search_mlp.py):
# everything but the horizon (configs/baselines/pkg_beam_search_mlp_crosstask_t{T}.py).
_base_ = ['../datasets/crosstask.py', './pkg_beam_search_mlp.py', '../schedules/paper_500e.py']
model = dict(num_actions=133)

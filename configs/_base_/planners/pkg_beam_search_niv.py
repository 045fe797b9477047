# PKG beam search baseline on NIV (./pkg_beam_search.py): everything but the horizon
# (configs/baselines/pkg_beam_search_niv_t{T}.py).
_base_ = ['../datasets/niv.py', './pkg_beam_search.py', '../schedules/paper_500e.py']
model = dict(num_actions=48)

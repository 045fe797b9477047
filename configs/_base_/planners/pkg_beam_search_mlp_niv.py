# PKG beam search baseline on NIV with the MLP step model (./pkg_beam_search_mlp.py):
# everything but the horizon (configs/baselines/pkg_beam_search_mlp_niv_t{T}.py).
_base_ = ['../datasets/niv.py', './pkg_beam_search_mlp.py', '../schedules/paper_500e.py']
model = dict(num_actions=48)

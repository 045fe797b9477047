# PKG beam search baseline on COIN (./pkg_beam_search.py): everything but the horizon
# (configs/baselines/pkg_beam_search_coin_t{T}.py).
_base_ = ['../datasets/coin.py', './pkg_beam_search.py', '../schedules/paper_500e.py']
model = dict(num_actions=778)

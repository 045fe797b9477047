# PKG + uniform emissions baseline on COIN (./uniform_emissions.py): everything but the horizon
# (configs/baselines/uniform_emissions_coin_t{T}.py).
_base_ = ['../datasets/coin.py', './uniform_emissions.py', '../schedules/paper_500e.py']
model = dict(num_actions=778)

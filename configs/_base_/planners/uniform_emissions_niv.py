# PKG + uniform emissions baseline on NIV (./uniform_emissions.py): everything but the horizon
# (configs/baselines/uniform_emissions_niv_t{T}.py).
_base_ = ['../datasets/niv.py', './uniform_emissions.py', '../schedules/paper_500e.py']
model = dict(num_actions=48)

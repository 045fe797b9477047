# PKG + uniform emissions baseline on CrossTask (./uniform_emissions.py): everything but the horizon
# (configs/baselines/uniform_emissions_crosstask_t{T}.py).
_base_ = ['../datasets/crosstask.py', './uniform_emissions.py', '../schedules/paper_500e.py']
model = dict(num_actions=133)

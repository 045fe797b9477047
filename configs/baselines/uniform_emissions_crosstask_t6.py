# PKG + uniform emissions baseline on CrossTask at horizon T=6 (../_base_/planners/uniform_emissions_crosstask.py).
_base_ = ['../_base_/planners/uniform_emissions_crosstask.py']
horizon = 6

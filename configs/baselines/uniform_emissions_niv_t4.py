# PKG + uniform emissions baseline on NIV at horizon T=4 (../_base_/planners/uniform_emissions_niv.py).
_base_ = ['../_base_/planners/uniform_emissions_niv.py']
horizon = 4

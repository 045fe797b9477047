# PKG + uniform emissions baseline on NIV at horizon T=3 (../_base_/planners/uniform_emissions_niv.py).
_base_ = ['../_base_/planners/uniform_emissions_niv.py']
horizon = 3

# PKG + uniform emissions baseline on COIN at horizon T=3 (../_base_/planners/uniform_emissions_coin.py).
_base_ = ['../_base_/planners/uniform_emissions_coin.py']
horizon = 3

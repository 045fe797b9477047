# ViterbiPlanNet on COIN T=6 with the authors' selection (../_base_/planners/vpn_coin_authors.py).
_base_ = ['../_base_/planners/vpn_coin_authors.py']
horizon = 6
model = dict(dvl_layers=2)  # two stacked DVL layers, as the paper (configs/vpn_coin_t6.py)

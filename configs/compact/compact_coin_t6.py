# CompactPlanNet on COIN at horizon T=6 (see ../_base_/planners/compact_coin.py).
_base_ = ['../_base_/planners/compact_coin.py']
horizon = 6
model = dict(dvl_layers=2)  # two stacked DVL layers here, as in the paper

# CompactPlanNet on COIN at horizon T=4 (see ../_base_/planners/compact_coin.py).
_base_ = ['../_base_/planners/compact_coin.py']
horizon = 4

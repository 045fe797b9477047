# ViterbiPlanNet on COIN at horizon T=5 with the paper's 500-epoch schedule.
_base_ = ['_base_/planners/vpn_coin.py']
horizon = 5

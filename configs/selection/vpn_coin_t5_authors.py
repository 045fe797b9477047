# ViterbiPlanNet on COIN T=5 with the authors' selection (../_base_/planners/vpn_coin_authors.py).
_base_ = ['../_base_/planners/vpn_coin_authors.py']
horizon = 5

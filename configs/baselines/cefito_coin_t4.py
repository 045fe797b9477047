# CEFITO on coin at horizon T=4 (../_base_/planners/cefito_coin.py).
_base_ = ['../_base_/planners/cefito_coin.py']
horizon = 4

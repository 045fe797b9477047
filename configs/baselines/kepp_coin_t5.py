# KEPP on COIN at horizon T=5 (../_base_/planners/kepp_coin.py).
_base_ = ['../_base_/planners/kepp_coin.py']
horizon = 5

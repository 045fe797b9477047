# PDPP on COIN at horizon T=5 (../_base_/planners/pdpp_coin.py).
_base_ = ['../_base_/planners/pdpp_coin.py']
horizon = 5

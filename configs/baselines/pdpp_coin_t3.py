# PDPP on COIN at horizon T=3 (../_base_/planners/pdpp_coin.py).
_base_ = ['../_base_/planners/pdpp_coin.py']
horizon = 3

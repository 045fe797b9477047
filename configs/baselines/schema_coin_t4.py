# SCHEMA on COIN at horizon T=4 (../_base_/planners/schema_coin.py).
_base_ = ['../_base_/planners/schema_coin.py']
horizon = 4

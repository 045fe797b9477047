# SCHEMA on COIN at horizon T=3 (../_base_/planners/schema_coin.py).
_base_ = ['../_base_/planners/schema_coin.py']
horizon = 3

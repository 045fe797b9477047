# SCHEMA on COIN at horizon T=5 (../_base_/planners/schema_coin.py).
_base_ = ['../_base_/planners/schema_coin.py']
horizon = 5

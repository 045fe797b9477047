# SCHEMA on CrossTask + NIV + COIN together (one action space, one PKG), T=6.
_base_ = ['../_base_/planners/schema_union.py']
horizon = 6

# KEPP on CrossTask at horizon T=3 (../_base_/planners/kepp_crosstask.py).
_base_ = ['../_base_/planners/kepp_crosstask.py']
horizon = 3

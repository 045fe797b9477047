# KEPP on CrossTask at horizon T=6 (../_base_/planners/kepp_crosstask.py).
_base_ = ['../_base_/planners/kepp_crosstask.py']
horizon = 6

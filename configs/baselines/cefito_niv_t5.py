# CEFITO on niv at horizon T=5 (../_base_/planners/cefito_niv.py).
_base_ = ['../_base_/planners/cefito_niv.py']
horizon = 5

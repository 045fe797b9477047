# CEFITO on crosstask at horizon T=6 (../_base_/planners/cefito_crosstask.py).
_base_ = ['../_base_/planners/cefito_crosstask.py']
horizon = 6

# CEFITO on crosstask at horizon T=5 (../_base_/planners/cefito_crosstask.py).
_base_ = ['../_base_/planners/cefito_crosstask.py']
horizon = 5

# CEFITO on crosstask at horizon T=3 (../_base_/planners/cefito_crosstask_t3.py: the
# official crosstask_t3 recipe).
_base_ = ['../_base_/planners/cefito_crosstask_t3.py']
horizon = 3

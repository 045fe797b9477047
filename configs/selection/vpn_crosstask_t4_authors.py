# ViterbiPlanNet on CrossTask T=4 with the authors' selection (../_base_/planners/vpn_crosstask_authors.py).
_base_ = ['../_base_/planners/vpn_crosstask_authors.py']
horizon = 4

# ViterbiPlanNet on CrossTask at horizon T=4 with the paper's 500-epoch schedule.
_base_ = ['_base_/planners/vpn_crosstask.py']
horizon = 4

# ViterbiPlanNet on NIV at horizon T=3 with the paper's 500-epoch schedule.
_base_ = ['_base_/planners/vpn_niv.py']
horizon = 3

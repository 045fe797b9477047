# ViterbiPlanNet on NIV T=6 with the authors' selection (../_base_/planners/vpn_niv_authors.py).
_base_ = ['../_base_/planners/vpn_niv_authors.py']
horizon = 6

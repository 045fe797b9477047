# ViterbiPlanNet on NIV T=5 with the authors' selection (../_base_/planners/vpn_niv_authors.py).
_base_ = ['../_base_/planners/vpn_niv_authors.py']
horizon = 5

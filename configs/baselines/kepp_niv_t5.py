# KEPP on NIV at horizon T=5 (../_base_/planners/kepp_niv.py).
_base_ = ['../_base_/planners/kepp_niv.py']
horizon = 5

# KEPP on NIV at horizon T=4 (../_base_/planners/kepp_niv.py).
_base_ = ['../_base_/planners/kepp_niv.py']
horizon = 4

# PDPP on NIV at horizon T=6 (../_base_/planners/pdpp_niv.py).
_base_ = ['../_base_/planners/pdpp_niv.py']
horizon = 6

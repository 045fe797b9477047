# PDPP on NIV at horizon T=4 (../_base_/planners/pdpp_niv.py).
_base_ = ['../_base_/planners/pdpp_niv.py']
horizon = 4

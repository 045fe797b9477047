# CompactPlanNet on NIV at horizon T=4 (see ../_base_/planners/compact_niv.py).
_base_ = ['../_base_/planners/compact_niv.py']
horizon = 4

# CompactPlanNet on CrossTask at horizon T=4 (see ../_base_/planners/compact_crosstask.py).
_base_ = ['../_base_/planners/compact_crosstask.py']
horizon = 4

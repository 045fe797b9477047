# SCHEMA on CrossTask at horizon T=5 (../_base_/planners/schema_crosstask.py).
_base_ = ['../_base_/planners/schema_crosstask.py']
horizon = 5

# CompactPlanNet counterpart of vpn_crosstask_t3_synthetic.py (same data, seeds, schedule).
_base_ = [
    '../_base_/datasets/crosstask.py',
    '../_base_/models/compact_crosstask.py', '../_base_/schedules/short_30e.py'
]
horizon = 3

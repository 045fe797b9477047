# ViterbiPlanNet vs Base Model study on synthetic CrossTask T=3 (short schedule, 30 epochs).
_base_ = [
    '../_base_/datasets/crosstask.py',
    '../_base_/models/vpn_crosstask.py', '../_base_/schedules/short_30e.py'
]
horizon = 3

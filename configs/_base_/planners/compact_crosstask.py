# CompactPlanNet (this plugin's smaller alternative to the paper's ViterbiPlanNet) on CrossTask
# with the paper's 500-epoch schedule: everything but the horizon
# (configs/compact/compact_crosstask_t{T}.py set it).
_base_ = [
    '../datasets/crosstask.py', '../models/compact_crosstask.py',
    '../schedules/paper_500e.py'
]

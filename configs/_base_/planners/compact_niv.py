# CompactPlanNet (this plugin's smaller alternative to the paper's ViterbiPlanNet) on NIV
# with the paper's 500-epoch schedule: everything but the horizon
# (configs/compact/compact_niv_t{T}.py set it).
_base_ = [
    '../datasets/niv.py', '../models/compact_niv.py',
    '../schedules/paper_500e.py'
]

# ViterbiPlanNet on NIV with the paper's 500-epoch schedule: everything but the horizon.
# configs/vpn_niv_t{T}.py set `horizon = T` (tools: --horizon T; data_paths.apply_horizon).
_base_ = [
    '../datasets/niv.py', '../models/vpn_niv.py',
    '../schedules/paper_500e.py'
]

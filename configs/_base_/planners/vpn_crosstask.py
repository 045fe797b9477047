# ViterbiPlanNet on CrossTask with the paper's 500-epoch schedule: everything but the horizon.
# configs/vpn_crosstask_t{T}.py set `horizon = T` (tools: --horizon T; data_paths.apply_horizon).
_base_ = [
    '../datasets/crosstask.py', '../models/vpn_crosstask.py',
    '../schedules/paper_500e.py'
]

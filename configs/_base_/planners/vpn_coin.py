# ViterbiPlanNet on COIN with the paper's 500-epoch schedule: everything but the horizon.
# configs/vpn_coin_t{T}.py set `horizon = T` (tools: --horizon T; data_paths.apply_horizon).
_base_ = [
    '../datasets/coin.py', '../models/vpn_coin.py',
    '../schedules/paper_500e.py'
]

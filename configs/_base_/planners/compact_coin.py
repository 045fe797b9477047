# CompactPlanNet (this plugin's smaller alternative to the paper's ViterbiPlanNet) on COIN
# with the paper's 500-epoch schedule: everything but the horizon
# (configs/compact/compact_coin_t{T}.py set it).
_base_ = [
    '../datasets/coin.py', '../models/compact_coin.py',
    '../schedules/paper_500e.py'
]

# ViterbiPlanNet on COIN with the authors' selection (../selection/authors_coin.py): all
# training videos, best test-window SR checked every epoch; everything but the horizon
# (configs/selection/vpn_coin_t{T}_authors.py).
_base_ = [
    '../selection/authors_coin.py', '../models/vpn_coin.py',
    '../schedules/paper_500e.py'
]
train_cfg = dict(val_interval=1)

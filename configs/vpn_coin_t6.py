# ViterbiPlanNet on COIN at horizon T=6 with the paper's 500-epoch schedule.
_base_ = ['_base_/planners/vpn_coin.py']
horizon = 6
# two stacked DVL layers in training, as the paper (supplementary, "Hyperparameter
# Configuration"; the released code has no such switch): the plan loss is on the last one
model = dict(dvl_layers=2)

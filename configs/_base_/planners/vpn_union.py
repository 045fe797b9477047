# ViterbiPlanNet on CrossTask + NIV + COIN together (the dataset-independent PKG): one network
# over the joined action space, one PKG counted on the union's training sequences
# (block-diagonal: no transition joins two datasets), the paper's 500-epoch schedule.
# configs/union/vpn_union_t{T}.py set `horizon = T`.
_base_ = ['../datasets/union.py', '../models/vpn_union.py', '../schedules/paper_500e.py']

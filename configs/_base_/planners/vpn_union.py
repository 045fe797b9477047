# ViterbiPlanNet on CrossTask + NIV + COIN together (the dataset-independent PKG): one network
# over the joined action space (../datasets/union.py), one PKG counted on the union's training
# sequences (block-diagonal: no transition joins two datasets), the paper's 500-epoch schedule.
# configs/union/vpn_union_t{T}.py set `horizon = T`.
_base_ = ['../datasets/union.py', '../models/vpn.py', '../schedules/paper_500e.py']
model = {{_base_.union_model}}

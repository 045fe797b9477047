# Cross-horizon: test a model trained with vpn_crosstask_t6.py on the T=4 test windows.
#   tools/test.py configs/vpn_crosstask_t6_eval_t4.py work_dirs/vpn_crosstask_t6/<ckpt>.pth
# The authors' rule: the emissions of the first T'-1 steps are kept and the last (goal) one
# is repeated up to T=6, the DVL and Viterbi run over 6 steps, the first T' are evaluated.
_base_ = ['./vpn_crosstask_t6.py']
model = dict(cross_horizon='repeat_last')
test_dataloader = dict(dataset=dict(horizon=4))

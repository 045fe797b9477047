# Cross-horizon: a model trained with configs/vpn_crosstask_t6.py tested on shorter windows
# (configs/vpn_crosstask_t6_eval_t{3,4,5}.py set test_horizon). The authors' rule: the
# emissions of the first T'-1 steps are kept and the last (goal) one is repeated up to T=6,
# the DVL and Viterbi run over 6 steps, the first T' are evaluated.
_base_ = ['../../vpn_crosstask_t6.py']
model = dict(cross_horizon='repeat_last')

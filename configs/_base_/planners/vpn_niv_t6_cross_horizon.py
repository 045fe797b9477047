# Cross-horizon on NIV: a model trained with configs/vpn_niv_t6.py tested on shorter windows
# (configs/vpn_niv_t6_eval_t{3,4,5}.py set test_horizon), with the authors' rule
# (vpn_crosstask_t6_cross_horizon.py).
_base_ = ['../../vpn_niv_t6.py']
model = dict(cross_horizon='repeat_last')

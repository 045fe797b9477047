# Cross-horizon: test a model trained with vpn_niv_t6.py on the T=3 NIV test windows.
#   tools/test.py configs/vpn_niv_t6_eval_t3.py work_dirs/vpn_niv_t6/<ckpt>.pth
_base_ = ['_base_/planners/vpn_niv_t6_cross_horizon.py']
test_horizon = 3

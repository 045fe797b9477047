# Cross-horizon: test a model trained with vpn_crosstask_t6.py on the T=3 test windows.
#   tools/test.py configs/vpn_crosstask_t6_eval_t3.py work_dirs/vpn_crosstask_t6/<ckpt>.pth
# 'ends' keeps the first T-1 step queries and the last one (start observation -> first step,
# goal observation -> last step); 'spread' would pick evenly spaced queries instead.
_base_ = ['./vpn_crosstask_t6.py']
model = dict(cross_horizon='ends')
test_dataloader = dict(dataset=dict(horizon=3))

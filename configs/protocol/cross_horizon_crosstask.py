# Cross-horizon protocol: one model trained at T=6 tested at T=3, 4, 5 (configs
# vpn_crosstask_t6_eval_t{T}.py pick its step queries), next to models trained at each T.
protocol = 'cross_horizon'
dataset = 'crosstask'
seeds = [0, 1, 2, 3, 4]
runs = [
    dict(method='ViterbiPlanNet (train T=6)', config='configs/vpn_crosstask_t6.py',
         tests=[dict(horizon=t, config='configs/vpn_crosstask_t6_eval_t{T}.py')
                for t in (3, 4, 5)]),
    dict(method='ViterbiPlanNet (train T=test T)', config='configs/vpn_crosstask_t{T}.py',
         horizons=[3, 4, 5]),
]

# Cross-horizon protocol: one model trained at T=6 tested at T=3, 4, 5 (test_horizon=T with
# the authors' rule model.cross_horizon='repeat_last', as configs/vpn_crosstask_t6_eval_t{T}.py),
# next to models trained at each T.
protocol = 'cross_horizon'
seeds = [0, 1, 2, 3, 4]
runs = [
    dict(method='ViterbiPlanNet (train T=6)', config='configs/vpn_{dataset}_t6.py',
         tests=[dict(horizon=t, cfg_options={'model.cross_horizon': 'repeat_last'})
                for t in (3, 4, 5)]),
    dict(method='ViterbiPlanNet (train T=test T)', config='configs/vpn_{dataset}_t{T}.py',
         horizons=[3, 4, 5]),
]

# With / without the PKG: the same network with the counted PKG or a uniform graph
# (PKGHook no_pkg=True: every transition 1/N), and with / without task supervision.
protocol = 'pkg_and_task'
dataset = 'crosstask'
seeds = [0, 1, 2, 3, 4]
runs = [
    dict(method='ViterbiPlanNet', config='configs/vpn_crosstask_t3.py'),
    dict(method='w/o PKG (uniform graph)', config='configs/vpn_crosstask_t3.py',
         cfg_options={'custom_hooks.0.no_pkg': True}),
    dict(method='w/o task supervision', config='configs/vpn_crosstask_t3.py',
         cfg_options={'model.loss_weights.task': 0.0}),
]

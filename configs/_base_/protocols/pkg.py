# With / without the PKG: the same network with the counted PKG or a uniform graph
# (perturbation UniformGraph: every transition 1/N), and with / without task supervision. T=3.
protocol = 'pkg_and_task'
seeds = [0, 1, 2, 3, 4]
runs = [
    dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t3.py'),
    dict(method='w/o PKG (uniform graph)', config='configs/vpn_{dataset}_t3.py',
         cfg_options={'model.pkg.perturbations': [dict(type='UniformGraph')]}),
    dict(method='w/o task supervision', config='configs/vpn_{dataset}_t3.py',
         cfg_options={'model.loss_weights.task': 0.0}),
]

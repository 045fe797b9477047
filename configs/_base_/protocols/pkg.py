# With / without the PKG: the same network with the counted PKG or a uniform graph
# (perturbation UniformGraph: every transition 1/N), and with / without task supervision. T=3.
# SCHEMA (Table 2): one training, tested with its Viterbi through the PKG ('SCHEMA') and with
# the argmax of its action probabilities ('SCHEMA w/o PKG').
protocol = 'pkg_and_task'
seeds = [0, 1, 2, 3, 4]
runs = [
    dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t3.py'),
    dict(method='w/o PKG (uniform graph)', config='configs/vpn_{dataset}_t3.py',
         cfg_options={'model.pkg.perturbations': [dict(type='UniformGraph')]}),
    dict(method='w/o task supervision', config='configs/vpn_{dataset}_t3.py',
         cfg_options={'model.loss_weights.task': 0.0}),
    dict(method='SCHEMA', config='configs/baselines/schema_{dataset}_t3.py',
         tests=[dict(method='SCHEMA'),
                dict(method='SCHEMA w/o PKG', cfg_options={'model.decode': 'argmax'})]),
]

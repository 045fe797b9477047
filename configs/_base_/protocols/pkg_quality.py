# PKG quality: ViterbiPlanNet trained and tested with a perturbed PKG (model.pkg.perturbations,
# seeded by the run seed): edge dropout, weight noise, PKG from part of the data, label noise. T=3.
# Plot (three panels) with tools/plots.py pkg-quality RESULTS --out docs/figures/pkg_quality
protocol = 'pkg_quality'
seeds = [0, 1, 2, 3, 4]
# variant name: (perturbation type, its argument), levels
perturbations = dict(edge_dropout=('EdgeDropout', 'fraction'),
                     weight_noise=('WeightNoise', 'sigma'),
                     data_fraction=('DataFraction', 'fraction'),
                     label_noise=('LabelNoise', 'fraction'))
levels = dict(edge_dropout=[0.1, 0.25, 0.5], weight_noise=[0.1, 0.5, 1.0],
              data_fraction=[0.5, 0.25, 0.1], label_noise=[0.1, 0.25, 0.5])
runs = [dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t3.py',
             variant=dict(perturbation='none', level=0.0))] + [
    dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t3.py',
         variant=dict(perturbation=kind, level=level),
         cfg_options={'model.pkg.perturbations': [
             {'type': perturbations[kind][0], perturbations[kind][1]: level}]})
    for kind, values in levels.items() for level in values
]

# PKG quality: the planners under the same perturbed PKGs (model.pkg.perturbations, seeded by
# the run seed): edge dropout, weight noise, PKG from part of the data, label noise. T=3.
# ViterbiPlanNet is trained and tested with the perturbed graph (its DVL trains through it);
# a network trained without the graph (SCHEMA: only its decoding uses it) is trained once and
# tested with each perturbed graph (model.pkg.recount: the checkpoint's graph is replaced by the
# config's), and without the graph as the dashed reference.
#   .venv/bin/python tools/plots.py pkg-quality RESULTS --out docs/figures/pkg_quality
protocol = 'pkg_quality'
seeds = [0, 1, 2, 3, 4]
# variant name: (perturbation type, its argument), levels
perturbations = dict(edge_dropout=('EdgeDropout', 'fraction'),
                     weight_noise=('WeightNoise', 'sigma'),
                     data_fraction=('DataFraction', 'fraction'),
                     label_noise=('LabelNoise', 'fraction'))
levels = dict(edge_dropout=[0.1, 0.25, 0.5], weight_noise=[0.1, 0.5, 1.0],
              data_fraction=[0.5, 0.25, 0.1], label_noise=[0.1, 0.25, 0.5])
graphs = [(dict(perturbation='none', level=0.0), [])] + [
    (dict(perturbation=kind, level=level),
     [{'type': perturbations[kind][0], perturbations[kind][1]: level}])
    for kind, values in levels.items() for level in values]
# networks whose decoding alone uses the graph: (training, with the graph, without it)
decoded = [(dict(method='SCHEMA', config='configs/baselines/schema_{dataset}_t3.py'),
            ('SCHEMA w/ PKG', {'model.decode': 'viterbi'}),
            ('SCHEMA w/o PKG', {'model.decode': 'argmax'}))]
runs = [dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t3.py', variant=variant,
             cfg_options={'model.pkg.perturbations': graph} if graph else {})
        for variant, graph in graphs] + [
    dict(training, tests=[dict(method=without[0], cfg_options=without[1],
                               variant=dict(perturbation='none', level=0.0))] + [
        dict(method=with_pkg[0], variant=variant,
             cfg_options={**with_pkg[1], 'model.pkg.perturbations': graph,
                          'model.pkg.recount': True})
        for variant, graph in graphs])
    for training, with_pkg, without in decoded]

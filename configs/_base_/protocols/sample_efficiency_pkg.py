# Sample efficiency with and without the PKG (the paper's curves for T=3..6): ViterbiPlanNet
# trained on 10..100% of the training windows (a subset drawn with the run seed), with the
# counted PKG and with a uniform graph (UniformGraph: every transition 1/N).
#   .venv/bin/python tools/run_protocol.py configs/protocol/sample_efficiency_pkg_niv.py
#   .venv/bin/python tools/plots.py efficiency RESULTS --dashed 'ViterbiPlanNet w/o PKG' \
#       --out work_dirs/sample_efficiency_niv
protocol = 'sample_efficiency_pkg'
seeds = [0, 1, 2]
horizons = [3, 4, 5, 6]
fractions = [0.1, 0.25, 0.5, 1.0]
graphs = {'ViterbiPlanNet': {},
          'ViterbiPlanNet w/o PKG': {'model.pkg.perturbations': [dict(type='UniformGraph')]}}
runs = [dict(method=name, config='configs/vpn_{dataset}_t{T}.py', horizons=horizons,
             variant=dict(train_fraction=f),
             cfg_options={'train_dataloader.dataset.subset_fraction': f, **graph})
        for name, graph in graphs.items() for f in fractions]

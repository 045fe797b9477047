# Standard protocol (paper main table): train and test at the same horizon T, 5 seeds.
# 'PKG beam search' uses the paper's PDPP step model; the 0.86M MLP step model is
# configs/baselines/pkg_beam_search_mlp_{dataset}_t{T}.py.
#   .venv/bin/python tools/run_protocol.py configs/protocol/standard_crosstask.py
#   .venv/bin/python tools/report.py work_dirs/protocol/standard/results.jsonl \
#       --reference 'Base Model' --ours ViterbiPlanNet
# SCHEMA: one training per (T, seed), two rows: 'SCHEMA' (its default: Viterbi through the
# PKG, "w/ PKG") and 'SCHEMA w/o PKG' (argmax of its action probabilities).
protocol = 'standard'
seeds = [0, 1, 2, 3, 4]
horizons = [3, 4]
runs = [
    dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t{T}.py', horizons=horizons),
    dict(method='Base Model', config='configs/vpn_{dataset}_t{T}.py', horizons=horizons,
         cfg_options={'model.use_dvl': False, 'model.decode': 'emission_argmax'}),
    dict(method='SCHEMA', config='configs/baselines/schema_{dataset}_t{T}.py', horizons=horizons,
         tests=[dict(method='SCHEMA'),
                dict(method='SCHEMA w/o PKG', cfg_options={'model.decode': 'argmax'})]),
    dict(method='PKG beam search', config='configs/baselines/pkg_beam_search_{dataset}_t{T}.py',
         horizons=horizons),
    dict(method='PKG + uniform emissions', horizons=horizons, train=False,
         config='configs/baselines/uniform_emissions_{dataset}_t{T}.py'),
    # the diffusion baseline (the official PDPP's function: task classifier, then the U-Net)
    dict(method='PDPP', config='configs/baselines/pdpp_{dataset}_t{T}.py', horizons=horizons),
    # KEPP (its official code's function: the step model, then the plan model conditioned on
    # two paths of KEPP's graph counted on the training videos; a released graph file, a
    # test-set PKG, is refused here)
    dict(method='KEPP', config='configs/baselines/kepp_{dataset}_t{T}.py', horizons=horizons),
]

# The standard table at T=3 and the 8-row DVL/Viterbi ablation from ONE set of trainings
# (the ablation's "train DVL / infer DVL+Viterbi" row IS ViterbiPlanNet, "train base / infer
# argmax" IS the Base Model), plus the PKG baselines. T=3.
#   .venv/bin/python tools/run_protocol.py configs/protocol/main_and_ablation_t3_crosstask.py
#   standard table: tools/report.py RESULTS --methods ViterbiPlanNet 'Base Model' \
#       'PKG beam search' 'PKG + uniform emissions'  (on a CPU: --methods ... 'PKG beam search
#       (MLP step model)' instead of the U-Net one, a GPU job)
#   ablation table: tools/report.py RESULTS --methods 'train DVL / infer argmax' ... (8 names)
protocol = 'main_t3'
seeds = [0, 1, 2, 3, 4]
decodes = [('emission_argmax', 'argmax'), ('emission_viterbi', 'Viterbi'),
           ('dvl_argmax', 'DVL'), ('dvl_viterbi', 'DVL+Viterbi')]
aliases = {('DVL', 'dvl_viterbi'): 'ViterbiPlanNet', ('base', 'emission_argmax'): 'Base Model'}
runs = [
    dict(method=f'train {train}', config='configs/vpn_{dataset}_t3.py',
         cfg_options=options,
         tests=[dict(method=aliases.get((train, mode), f'train {train} / infer {name}'),
                     cfg_options={'model.decode': mode}) for mode, name in decodes])
    for train, options in (('DVL', {}), ('base', {'model.use_dvl': False}))
] + [
    dict(method='PKG beam search', config='configs/baselines/pkg_beam_search_{dataset}_t3.py'),
    # the same beam search with the 0.86M MLP step model (CPU-sized; never named like the
    # paper's, whose step model is PDPP's 41.9M U-Net)
    dict(method='PKG beam search (MLP step model)',
         config='configs/baselines/pkg_beam_search_mlp_{dataset}_t3.py'),
    dict(method='PKG + uniform emissions', train=False,
         config='configs/baselines/uniform_emissions_{dataset}_t3.py'),
]

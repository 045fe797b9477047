# T=6: ViterbiPlanNet, the Base Model (argmax, and Viterbi-decoded through the PKG), the 8-row
# DVL/Viterbi ablation, ViterbiPlanNet with a uniform graph (w/o PKG) and SCHEMA w/o and w/ PKG,
# with per-sample dumps for the error-overlap analysis (the paper's three-set Venn diagram on
# NIV T=6: which windows each method fixes or introduces).
#   .venv/bin/python tools/run_protocol.py configs/protocol/main_and_ablation_t6_niv.py
#   .venv/bin/python tools/plots.py overlap RESULTS --horizon 6 \
#       --sets 'SCHEMA w/o PKG' 'SCHEMA w/ PKG' ViterbiPlanNet \
#       --out docs/figures/error_overlap_niv_t6
protocol = 'main_t6'
seeds = [0, 1, 2, 3, 4]
decodings = dict(emission_argmax='argmax', emission_viterbi='Viterbi', dvl_argmax='DVL',
                 dvl_viterbi='DVL+Viterbi')
names = {('DVL', 'dvl_viterbi'): 'ViterbiPlanNet', ('base', 'emission_argmax'): 'Base Model',
         ('base', 'emission_viterbi'): 'Base Model + PKG Viterbi'}
trainings = dict(DVL={}, base={'model.use_dvl': False})
runs = [dict(method=f'train {train}', config='configs/vpn_{dataset}_t6.py', cfg_options=options,
             tests=[dict(method=names.get((train, mode), f'train {train} / infer {label}'),
                         cfg_options={'model.decode': mode})
                    for mode, label in decodings.items()])
        for train, options in trainings.items()]
runs.append(dict(method='ViterbiPlanNet w/o PKG', config='configs/vpn_{dataset}_t6.py',
                 cfg_options={'model.pkg.perturbations': [dict(type='UniformGraph')]}))
# SCHEMA without and with the PKG (one training, two decodings): the paper's three-set Venn;
# with the PKG alone (uniform emissions, no training): the decoding-diversity rows at T=6
runs.append(dict(method='SCHEMA', config='configs/baselines/schema_{dataset}_t6.py',
                 tests=[dict(method='SCHEMA w/o PKG', cfg_options={'model.decode': 'argmax'}),
                        dict(method='SCHEMA w/ PKG', cfg_options={'model.decode': 'viterbi'})]))
runs.append(dict(method='PKG + uniform emissions', train=False,
                 config='configs/baselines/uniform_emissions_{dataset}_t6.py'))

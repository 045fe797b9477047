# Ablation of the 8 train/inference combinations (paper): training with or without the DVL
# (ViterbiPlanNet vs Base Model loss) x inference by {argmax, Viterbi} on {emissions, DVL
# soft plan}. The 4 decodings of one training share its checkpoint. T=3.
protocol = 'ablation'
seeds = [0, 1, 2, 3, 4]
decodes = [('emission_argmax', 'argmax'), ('emission_viterbi', 'Viterbi'),
           ('dvl_argmax', 'DVL'), ('dvl_viterbi', 'DVL+Viterbi')]
runs = [
    dict(method='train DVL', config='configs/vpn_{dataset}_t3.py',
         tests=[dict(method=f'train DVL / infer {name}', cfg_options={'model.decode': mode})
                for mode, name in decodes]),
    dict(method='train base', config='configs/vpn_{dataset}_t3.py',
         cfg_options={'model.use_dvl': False},
         tests=[dict(method=f'train base / infer {name}', cfg_options={'model.decode': mode})
                for mode, name in decodes]),
]

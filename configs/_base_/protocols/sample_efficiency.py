# Sample efficiency (the paper's study): the visual encoder is first trained on the WHOLE
# training set (stage 'encoder': ViterbiPlanNet, one run per seed and horizon, saved in
# <out>/<protocol>/pretrain_encoder/ and reused, never retrained), then loaded, frozen and
# shared by every planner (model.init_visual_from + model.freeze_visual), which train on
# 5..100% of the training windows (a subset drawn with the run seed: run_protocol sets
# subset_seed; the PKG is counted on the same subset). T=3.
#   .venv/bin/python tools/run_protocol.py configs/protocol/sample_efficiency_crosstask.py
#   .venv/bin/python tools/plots.py efficiency RESULTS --dashed 'Base Model' \
#       'SCHEMA w/o Viterbi' --out docs/figures/sample_efficiency
# (solid: ViterbiPlanNet, SCHEMA; dashed, in the same colours: without the Viterbi decoding)
protocol = 'sample_efficiency'
seeds = [0, 1, 2, 3, 4]
horizons = [3]
fractions = [0.05, 0.1, 0.25, 0.5, 1.0]
stages = dict(encoder=dict(config='configs/vpn_{dataset}_t{T}.py'))
# one entry per training; a training's tests are its rows (e.g. one network, two decodings)
planners = [
    dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t{T}.py'),
    dict(method='Base Model', config='configs/vpn_{dataset}_t{T}.py',
         cfg_options={'model.use_dvl': False, 'model.decode': 'emission_argmax'}),
    dict(method='SCHEMA', config='configs/baselines/schema_{dataset}_t{T}.py',
         tests=[dict(), dict(method='SCHEMA w/o Viterbi', cfg_options={'model.decode': 'argmax'})]),
]
runs = [dict(planner, horizons=horizons, variant=dict(train_fraction=f),
             pretrained=dict(stage='encoder', option='model.init_visual_from'),
             cfg_options={**planner.get('cfg_options', {}), 'model.freeze_visual': True,
                          'train_dataloader.dataset.subset_fraction': f})
        for planner in planners for f in fractions]

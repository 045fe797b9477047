# Sample efficiency: train on 5..100% of the training windows (a subset drawn with the run
# seed: run_protocol sets subset_seed) with the visual encoder frozen, ViterbiPlanNet vs
# Base Model, T=3. Plot with
#   .venv/bin/python tools/plots.py efficiency work_dirs/protocol/sample_efficiency/results.jsonl \
#       --dashed 'Base Model' --out docs/figures/sample_efficiency
protocol = 'sample_efficiency'
seeds = [0, 1, 2, 3, 4]
fractions = [0.05, 0.1, 0.25, 0.5, 1.0]
runs = [
    dict(method=name, config='configs/vpn_{dataset}_t3.py', variant=dict(train_fraction=f),
         cfg_options={'train_dataloader.dataset.subset_fraction': f,
                      'model.freeze_visual': True, **extra})
    for name, extra in (('ViterbiPlanNet', {}),
                        ('Base Model', {'model.use_dvl': False,
                                        'model.decode': 'emission_argmax'}))
    for f in fractions
]

# Dataset-independent PKG (the paper's table): ONE model trained on CrossTask + NIV + COIN
# together over their joined action space, with ONE PKG counted on the union
# (configs/union/, ConcatPlanningDataset), tested on each dataset's own test windows, against
# the per-dataset models (configs/vpn_<dataset>_t{T}.py), T=3..6. The three files
# configs/protocol/dataset_independent_pkg_{crosstask,niv,coin}.py share this protocol name and
# results folder: the union model is trained once per (T, seed) and tested on each dataset.
#   for d in crosstask niv coin; do .venv/bin/python tools/run_protocol.py \
#       configs/protocol/dataset_independent_pkg_$d.py; done
#   .venv/bin/python tools/report.py work_dirs/protocol/dataset_independent_pkg/results.jsonl \
#       --average-datasets     # one column per T: the mean over the datasets
protocol = 'dataset_independent_pkg'
seeds = [0, 1, 2, 3, 4]
horizons = [3, 4, 5, 6]
# (method, union config, per-dataset config, cfg_options of both)
planners = [('ViterbiPlanNet', 'configs/union/vpn_union_t{T}.py', 'configs/vpn_{dataset}_t{T}.py',
             {}),
            ('SCHEMA', 'configs/union/schema_union_t{T}.py',
             'configs/baselines/schema_{dataset}_t{T}.py', {})]
runs = [run for name, union, single, options in planners for run in (
    dict(method=f'{name} (dataset-independent PKG)', slug=f'{name}_union', config=union,
         horizons=horizons, cfg_options=options,
         tests=[dict(cfg_options={'test_dataloader.dataset.select': ['{dataset}']})]),
    dict(method=f'{name} (per-dataset PKG)', slug=f'{name}_{{dataset}}', config=single,
         horizons=horizons, cfg_options=options))]
requires = ('COIN features beside CrossTask and NIV\'s (the union model trains on all '
            'three): synthetic (python tools/make_synthetic_features.py --dataset coin '
            '--data-root ../shared/data --out data/synthetic/coin) or the real ones (layout: '
            'configs/_base_/datasets/coin.py); --dry-run works without')

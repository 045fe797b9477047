# Union PKG: the PKG counted on more data than the training windows (model.pkg.extra_datasets,
# same action space): + the held-out validation videos, and an ORACLE row that also adds the
# test videos (an upper bound on PKG coverage; it leaks test transitions, never a result).
# union='pool' counts all sequences together; 'mean' averages each action's outgoing
# distribution over the sources (the dataset-independent graph, core.union_pkg).
# A string entry of extra_datasets names the run config's own dataset of that key
# (run_protocol replaces it by that dataset config). T=3.
protocol = 'union_pkg'
seeds = [0, 1, 2, 3, 4]
runs = [
    dict(method='PKG: train', config='configs/vpn_{dataset}_t3.py'),
    dict(method='PKG: train + val', config='configs/vpn_{dataset}_t3.py',
         cfg_options={'model.pkg.extra_datasets': ['val_dataloader.dataset']}),
    dict(method='PKG: mean(train, val)', config='configs/vpn_{dataset}_t3.py',
         cfg_options={'model.pkg.extra_datasets': ['val_dataloader.dataset'],
                      'model.pkg.union': 'mean'}),
    dict(method='PKG: train + val + test (oracle)', config='configs/vpn_{dataset}_t3.py',
         cfg_options={'model.pkg.extra_datasets': ['val_dataloader.dataset',
                                                   'test_dataloader.dataset']}),
]

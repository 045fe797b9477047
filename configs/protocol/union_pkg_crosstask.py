# Union PKG: the PKG counted on more data than the training windows (PKGHook extra_datasets,
# same 133-action space): + the held-out validation videos, and an ORACLE row that also adds the
# test videos (an upper bound on PKG coverage; it leaks test transitions, never a result).
# union='pool' counts all sequences together; 'mean' averages each action's outgoing
# distribution over the sources (the dataset-independent graph, core.union_pkg).
_base_ = ['../_base_/datasets/crosstask.py']
protocol = 'union_pkg'
dataset = 'crosstask'
seeds = [0, 1, 2, 3, 4]
runs = [
    dict(method='PKG: train', config='configs/vpn_crosstask_t3.py'),
    dict(method='PKG: train + val', config='configs/vpn_crosstask_t3.py',
         cfg_options={'custom_hooks.0.extra_datasets': [{{_base_.val_dataloader.dataset}}]}),
    dict(method='PKG: mean(train, val)', config='configs/vpn_crosstask_t3.py',
         cfg_options={'custom_hooks.0.extra_datasets': [{{_base_.val_dataloader.dataset}}],
                      'custom_hooks.0.union': 'mean'}),
    dict(method='PKG: train + val + test (oracle)', config='configs/vpn_crosstask_t3.py',
         cfg_options={'custom_hooks.0.extra_datasets': [{{_base_.val_dataloader.dataset}},
                                                       {{_base_.test_dataloader.dataset}}]}),
]

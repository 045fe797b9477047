# Intermediate observations (plan revision): the goal-state observations of the first k steps
# are given to the model (dataset observed_steps=k), T=4, k = 0, 1, 2.
protocol = 'observations'
seeds = [0, 1, 2, 3, 4]
runs = [
    dict(method=f'ViterbiPlanNet ({k} observed)', config='configs/vpn_{dataset}_t4.py',
         variant=dict(observed_steps=k),
         cfg_options={f'{split}_dataloader.dataset.observed_steps': k
                      for split in ('train', 'val', 'test')})
    for k in (0, 1, 2)
]

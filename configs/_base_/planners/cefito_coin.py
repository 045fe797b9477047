# CEFITO on COIN (778 actions, 180 tasks): the official coin_t3/coin_t4 recipe (margins
# 0.01/0.1, aux weight 1, lr 5e-4, wd 1e-3, batch 256, EMA 0.995 from step 400 every 10), for
# every T. Same-name actions (224/227 in task 31; 249/251, 250/252 in task 148) have identical
# text features: their sequences tie exactly and the tie goes to the first in A(c)^T.
# Text features: the MiniLM stand-in unless a CLIP file is given (cefito_crosstask.py).
_base_ = ['../datasets/coin.py', '../models/cefito.py', '../schedules/cefito.py']
model = dict(num_actions=778, num_tasks=180, taxonomy='{data_root}/coin/taxonomy.json',
             text_embeddings=dict(taxonomy='{data_root}/coin/taxonomy.json', encoder=None,
                                  pooling='mean', pad_to=512, cache_dir='{cache_dir}'))
optim_wrapper = dict(optimizer=dict(lr=5e-4, weight_decay=1e-3))
train_dataloader = dict(batch_size=256)

# CEFITO on NIV (48 actions, 5 tasks): the official niv_t3/niv_t4 recipe (margins 0.01/0.1, aux
# weight 1, lr 5e-5, wd 1e-3, batch 32, EMA 0.995 from step 400 every 10), for every T.
# The official NIV configs plan with the ground-truth task (eval.oracle_task); here the task
# classifier's prediction, as on every dataset (model.task_source=ground_truth: theirs).
# Text features: the MiniLM stand-in unless a CLIP file is given (cefito_crosstask.py).
_base_ = ['../datasets/niv.py', '../models/cefito.py', '../schedules/cefito.py']
model = dict(num_actions=48, num_tasks=5, taxonomy='{data_root}/niv/taxonomy.json',
             text_embeddings=dict(taxonomy='{data_root}/niv/taxonomy.json', encoder=None,
                                  pooling='mean', pad_to=512, cache_dir='{cache_dir}'))
optim_wrapper = dict(optimizer=dict(lr=5e-5, weight_decay=1e-3))
train_dataloader = dict(batch_size=32)

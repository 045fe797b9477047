_base_ = ['./schema.py']
# COIN's text features: exactly ViterbiPlanNet's setting (models/vpn_coin.py; a test keeps the
# two equal). SCHEMA cannot run without state-description features.
model = dict(
    num_actions=778,
    num_tasks=180,
    text_embeddings=dict(
        taxonomy='../shared/data/coin/taxonomy.json',
        state_descriptions='../shared/data/coin/state_descriptions.json',
        encoder='data/clip-vit-large-patch14',
        pooling='clip',
        cache_dir='data/text_cache'))

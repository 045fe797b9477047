_base_ = ['./schema.py']
# COIN's text features: exactly ViterbiPlanNet's setting (models/vpn_coin.py explains the
# MiniLM stand-in and how to give the paper's CLIP features; a test keeps the two equal).
model = dict(
    num_actions=778,
    num_tasks=180,
    text_embeddings=dict(
        taxonomy='{data_root}/coin/taxonomy.json',
        state_descriptions='{data_root}/coin/state_descriptions.json',
        encoder=None,  # None: the installed MiniLM-L6 (stand-in); a CLIP directory: the paper's
        pooling='mean',  # 'clip' with a CLIP encoder
        pad_to=768,
        cache_dir='{cache_dir}'))

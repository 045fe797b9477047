_base_ = ['./schema.py', './coin_text.py']
model = dict(
    num_actions=778,
    num_tasks=180,
    # the same text features as ViterbiPlanNet's (coin_text.py: the MiniLM stand-in for COIN's
    # CLIP features, and how to give the paper's)
    text_embeddings={{_base_._coin_text_embeddings}})

_base_ = ['./vpn.py', './coin_text.py']
model = dict(
    num_actions=778,
    num_tasks=180,
    # the MiniLM stand-in for COIN's CLIP features, and how to give the paper's: coin_text.py
    # (6,067,795 parameters at T=3, the paper's count, with either)
    text_embeddings={{_base_._coin_text_embeddings}})

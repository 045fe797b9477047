_base_ = ['./compact.py']
model = dict(
    num_actions=133,
    num_tasks=18,
    text_embeddings=dict(
        taxonomy='{data_root}/crosstask/taxonomy_133.json',
        state_descriptions='{data_root}/crosstask/state_descriptions.json',
        encoder=None,  # None = offline all-MiniLM-L6-v2; or a local transformers model dir
        cache_dir='{cache_dir}'))

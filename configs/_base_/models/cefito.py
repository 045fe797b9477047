# CEFITO (Afham et al., GCPR 2026) computing what its official code computes (visinf/cefito,
# commit 0bfaac4; vpn_plugin/models/cefito.py, docs/cefito.md): a causal pre-norm transformer
# (H 384, 4 blocks, 6 heads) over [x_s, a_1, m, ..., a_T, m] predicts the goal; energy = mean
# squared distance to LN(x_g); trained with adaptive-margin triplets over 50 negatives plus an
# auxiliary action classification; planning scores every sequence of A(c)^T, c the task
# classifier's prediction (PDPP's head, trained first). 8,523,013 parameters at CrossTask (task
# classifier 7,094,290, counted apart). Dataset planner bases (../planners/cefito_<dataset>.py)
# add num_actions, num_tasks, the taxonomy and the action-name text features.
model = dict(
    type='CEFITO',
    feature_dim=1536,  # start/goal observation (3 x 512 S3D frames, concatenated)
    text_dim=512,  # CLIP ViT-B/32 text features of the action names
    hidden_dim=384, depth=4, num_heads=6, mlp_ratio=4.0, causal=True,
    # the official loss recipe shared by every config but crosstask_t3 (its planner child)
    num_negatives=50, hard_negative_ratio=0.8, permutation_negative_ratio=0.0,
    min_margin=0.01, max_margin=0.1, margin_order_weight=0.0, aux_weight=1.0,
    observation_noise=0.0,
    # 'per_sample': negatives of window i at step s from random.Random(seeded by seed, s, i);
    # 'global': python's global random stream, as the official sampler
    negative_rng='per_sample', negative_seed=0,
    # 'tree': prefix-tree scoring (same energies, ~(2T+1)/2 fewer token evaluations);
    # 'chunked': full sequences, chunk_size rows per call (official)
    search='tree', chunk_size=50000, top_k=1,
    # 'sequence': exact ties go to the first sequence of A(c)^T; 'topk': torch.topk's order
    tie_break='sequence',
    # 'classifier': the task head's prediction restricts the search; 'ground_truth': the true
    # task (the official NIV configs' eval.oracle_task)
    task_source='classifier',
    # refuse, before the first search, a horizon whose largest A(c)^T exceeds this many
    # sequences per sample (T=5 fits everywhere; T=6 is refused on a CPU: docs/cefito.md);
    # the message estimates the time at tokens_per_second (measured on the 2-core CPU)
    max_sequences=300_000, tokens_per_second=1200.0,
    pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

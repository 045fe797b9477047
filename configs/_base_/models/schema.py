# SCHEMA as its official code computes it (vpn_plugin/models/schema.py), as the unified
# protocol ran it: 1536-d observations (the paper's counts 6.13M / 6.28M / 6.12M need them),
# E=128, 32 heads, 2 decoder layers, mlp_ratio 2, dropout 0.2, state-encoder input dropout 0.4
# (the official scripts/run_*.sh and StateEncoder). Dataset model bases (schema_crosstask.py,
# ...) add num_actions, num_tasks, the text features and no_state_task.
model = dict(
    type='SCHEMA',
    feature_dim=1536,  # the unified observations (observation='authors'); official: 512
    text_dim=768,  # CLIP ViT-L/14 text features of the state descriptions
    embed_dim=128,
    num_heads=32,
    num_layers=2,
    mlp_ratio=2,
    dropout=0.2,
    input_dropout=0.4,
    no_state_task=False,  # True: the task prediction does not feed the state decoder (NIV)
    # 'viterbi': SCHEMA's default, Viterbi through the PKG ("w/ PKG", its float32 probability
    # trellis); 'argmax': "w/o PKG"; 'viterbi_log': log-space Viterbi (no underflow)
    decode='viterbi',
    # official total: action + state + task + 0.1 * state_decode (main.py)
    loss_weights=dict(action=1.0, state=1.0, task=1.0, state_decode=0.1),
    freeze_visual=False,
    # The same PKG as ViterbiPlanNet's configs (unified protocol). SCHEMA's own counting is
    # count_mode='video' (consecutive annotated steps of whole training videos).
    pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

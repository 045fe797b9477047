# SCHEMA on NIV with its official schedule (scripts/run_niv.sh): everything but the horizon.
# configs/baselines/schema_niv_t{T}.py set `horizon = T`; SCHEMA's horizon is fixed at
# construction (a test at another horizon is a config error).
_base_ = [
    '../datasets/niv.py', '../models/schema_niv.py',
    '../schedules/paper_500e.py'
]
# AdamW lr 3e-3, StepLR(40, 0.65), 500 epochs, batch 256 (paper_500e.py and the dataset base);
# weight decay 0.01: AdamW's default, since the official --weight_decay flag is parsed but
# never passed to the optimizer.
optim_wrapper = dict(optimizer=dict(lr=3e-3, weight_decay=0.01))

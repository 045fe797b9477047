# SCHEMA on CrossTask + NIV + COIN together (the dataset-independent PKG): one network over the
# joined action space (../datasets/union.py), decoded through one PKG counted on the union's
# training sequences; the state decoder gets the task prediction (no_state_task=False, as for
# CrossTask and COIN). Its official schedule (StepLR(40, 0.65), 500 epochs, batch 256, AdamW
# weight decay 0.01) with lr 4e-3, CrossTask's: the official scripts give one per dataset
# (CrossTask 4e-3, COIN 5e-3, NIV 3e-3), none for the union.
# configs/union/schema_union_t{T}.py set `horizon = T`.
_base_ = ['../datasets/union.py', '../models/schema.py', '../schedules/paper_500e.py']
model = {{_base_.union_model}}
optim_wrapper = dict(optimizer=dict(lr=4e-3, weight_decay=0.01))

# KEPP's training recipe: PDPP's (./pdpp.py: AdamW, warm-up/step LR, steps-per-epoch, EMA,
# validation every 5 epochs), with KEPP's step model as the first stage instead of PDPP's task
# classifier (the official step/ Trainer: the same recipe and lr, trained alone, then its
# first/last predictions on the training windows give the plan model's training paths).
_base_ = ['./pdpp.py']
custom_hooks = [
    dict(type='PKGHook'),
    # stage 1: the step model, trained alone first (AdamW with the optimiser's lr, wd 0, the
    # same schedule and EMA, as many steps as the plan model), saved as
    # <work_dir>/kepp_step_model.pth and in every checkpoint, reused, never retrained silently
    dict(type='KEPPStepModelHook', lr=None, weight_decay=0.0),
    dict(type='PDPPEMAHook', decay=0.995, start_step=400, interval=10),
]

# The ViterbiPlanNet authors' training of their PDPP step model (step_models/
# Diffusion_based_with_task/scripts/run_<dataset>.sh with utils/args.py defaults), the same for
# every dataset: PDPP's recipe (./pdpp.py) with lr 5e-4 and 200 epochs (of 200 steps of batch
# 256: the dataset planner's StepsPerEpochBatchSampler); 200 diffusion steps (the model).
_base_ = ['./pdpp.py']
optim_wrapper = dict(optimizer=dict(lr=5e-4))
train_cfg = dict(max_epochs=200)

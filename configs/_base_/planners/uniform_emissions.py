# Baseline: Viterbi decoding through the PKG with uniform emissions, dataset-independent part
# (uniform_emissions_<dataset>.py add the dataset). No parameters and no training: evaluate it
# with tools/test.py without a checkpoint, or tools/run_protocol.py (run entry train=False);
# the PKG is counted on the training split.
model = dict(type='UniformEmissionPlanner',
             pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0))

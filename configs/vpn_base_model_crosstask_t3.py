# Base Model (paper ablation): the same network trained WITHOUT the DVL (plan loss = MSE
# between the emissions and the one-hot plan) and decoded by the argmax of the emissions.
_base_ = ['./vpn_crosstask_t3.py']
model = dict(use_dvl=False, decode='emission_argmax')

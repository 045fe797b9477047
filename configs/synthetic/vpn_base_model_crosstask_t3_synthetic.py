# Base Model counterpart of vpn_crosstask_t3_synthetic.py (no DVL, emission argmax).
_base_ = ['./vpn_crosstask_t3_synthetic.py']
model = dict(use_dvl=False, decode='emission_argmax')

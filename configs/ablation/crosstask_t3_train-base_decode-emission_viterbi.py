# Paper ablation (8 rows = 2 trainings x 4 decodings), CrossTask T=3: network trained WITHOUT the DVL (Base Model),
# decoded by 'emission_viterbi'. The 4 decodings of one training share its checkpoint:
#   tools/test.py configs/ablation/crosstask_t3_train-base_decode-emission_viterbi.py CKPT
_base_ = ['../vpn_base_model_crosstask_t3.py']
model = dict(decode='emission_viterbi')

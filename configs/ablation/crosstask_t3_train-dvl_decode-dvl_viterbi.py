# Paper ablation (8 rows = 2 trainings x 4 decodings), CrossTask T=3: network trained WITH the DVL (ViterbiPlanNet),
# decoded by 'dvl_viterbi'. The 4 decodings of one training share its checkpoint:
#   tools/test.py configs/ablation/crosstask_t3_train-dvl_decode-dvl_viterbi.py CKPT
_base_ = ['../vpn_crosstask_t3.py']
model = dict(decode='dvl_viterbi')

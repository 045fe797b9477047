# ViterbiPlanNet on CrossTask with the 105-action taxonomy (MTID's setting; used by
# configs/mtid_protocol/): everything but the horizon.
_base_ = [
    '../datasets/crosstask105.py', '../models/vpn_crosstask105.py',
    '../schedules/paper_500e.py'
]

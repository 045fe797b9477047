# ViterbiPlanNet on crosstask105 under the MTID comparison protocol (./protocol.py): everything but the
# horizon (configs/mtid_protocol/vpn_crosstask105_t{T}.py).
_base_ = ['../planners/vpn_crosstask105.py', './protocol.py']
train_dataloader = dict(dataset=dict(observation={{_base_._mtid_observation}}))
val_dataloader = dict(dataset=dict(observation={{_base_._mtid_observation}}))
test_dataloader = dict(dataset=dict(observation={{_base_._mtid_observation}}))
val_evaluator = {{_base_._mtid_metric}}
test_evaluator = {{_base_._mtid_metric}}

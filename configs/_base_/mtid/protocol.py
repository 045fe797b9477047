# The MTID comparison protocol (supplementary "Comparison with MTID"): MTID's numbers come
# from its paper, so ViterbiPlanNet is evaluated as MTID (and PDPP, whose code it follows)
# evaluates: PDPP's observations (frames s..s+2 / e-2..e concatenated, observation='concat3')
# and PDPP's batch-level mIoU (`miou_batch`: ONE set IoU over each evaluation batch, so it
# depends on the batch size; PDPP's default --batch_size_val is 1024; the size is reported
# as `miou_batch_size` next to it). These numbers are NOT comparable with the unified
# protocol's (configs/vpn_*.py: the authors' observations, per-sample mIoU). Values only:
# configs/_base_/mtid/vpn_<dataset>.py put them into the loaders and evaluators.
_mtid_observation = 'concat3'
_mtid_metric = dict(type='PlanningMetric', extra_metrics=['miou_batch'], miou_batch_size=1024)

# Intermediate observations (the paper's study, CrossTask T=6): the end states of the first three
# steps are observed as well as the goal (dataset observed_steps=3, every split:
# inputs['observed']), against no intermediate observation; each planner is trained and tested
# in both settings. An observed step's end state is scored against the "after" state
# descriptions of every action by the planner's state encoder; that log-evidence is added to
# the step's emissions before the decoding, in training and at test
# (StateEncoder.observed_evidence, shared by both networks), so the network learns to weigh it.
#   .venv/bin/python tools/run_protocol.py configs/protocol/observations_crosstask.py
#   .venv/bin/python tools/report.py RESULTS --metrics success_rate mean_accuracy miou_set
protocol = 'observations'
seeds = [0, 1, 2, 3, 4]
observed_steps = 3
planners = [dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t6.py'),
            dict(method='SCHEMA', config='configs/baselines/schema_{dataset}_t6.py')]
runs = [run for planner in planners for run in (
    dict(planner, tests=[dict(variant=dict(observed_steps=0))]),
    dict(planner, method=f"{planner['method']} ({observed_steps} steps observed)",
         slug=planner['method'],  # + the variant: <method>_observed_steps-3
         variant=dict(observed_steps=observed_steps),
         cfg_options={f'{split}_dataloader.dataset.observed_steps': observed_steps
                      for split in ('train', 'val', 'test')}))]

# Intermediate observations (the paper's study, CrossTask T=6): the end states of the first three
# steps are observed as well as the goal (test dataset observed_steps=3: inputs['observed']),
# against no intermediate observation. One training per planner (start and goal only), tested
# both ways; an observed step's end state is scored against the "after" state descriptions of
# every action by the planner's state encoder, the evidence that multiplies that step's
# emissions before the decoding (StateEncoder.observed_evidence, shared by both networks).
#   .venv/bin/python tools/run_protocol.py configs/protocol/observations_crosstask.py
#   .venv/bin/python tools/report.py RESULTS --metrics success_rate mean_accuracy miou_set
protocol = 'observations'
seeds = [0, 1, 2, 3, 4]
observed_steps = 3
planners = [dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t6.py'),
            dict(method='SCHEMA', config='configs/baselines/schema_{dataset}_t6.py')]
runs = [dict(planner, tests=[
    dict(method=planner['method'], variant=dict(observed_steps=0)),
    dict(method=f"{planner['method']} ({observed_steps} steps observed)",
         variant=dict(observed_steps=observed_steps),
         cfg_options={'test_dataloader.dataset.observed_steps': observed_steps})])
    for planner in planners]

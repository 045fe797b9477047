# Decoding diversity (the paper's table, CrossTask T=6): on the test windows that share their
# start and goal actions, the entropy of the predicted plans (plan_entropy) and their Jensen-
# Shannon divergence from the ground-truth plans (plan_jsd), in bits (core.decoding_diversity;
# every protocol row carries both). Rows: the PKG with uniform emissions (the graph alone),
# SCHEMA without and with the PKG (one training, two decodings), ViterbiPlanNet.
#   .venv/bin/python tools/run_protocol.py configs/protocol/decoding_diversity_crosstask.py
#   .venv/bin/python tools/report.py RESULTS --metrics plan_entropy plan_jsd success_rate
protocol = 'decoding_diversity'
seeds = [0, 1, 2, 3, 4]
runs = [
    dict(method='PKG + uniform emissions', train=False,
         config='configs/baselines/uniform_emissions_{dataset}_t6.py'),
    dict(method='SCHEMA', config='configs/baselines/schema_{dataset}_t6.py',
         tests=[dict(method='SCHEMA w/o PKG', cfg_options={'model.decode': 'argmax'}),
                dict(method='SCHEMA w/ PKG', cfg_options={'model.decode': 'viterbi'})]),
    dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t6.py'),
]

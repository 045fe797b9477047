# The two networks side by side, same data, seeds and schedule: ViterbiPlanNet (the authors'
# network, exactly) and CompactPlanNet (this plugin's smaller alternative), T=3.
#   .venv/bin/python tools/run_protocol.py configs/protocol/networks_crosstask.py
#   .venv/bin/python tools/report.py RESULTS --methods ViterbiPlanNet CompactPlanNet
protocol = 'networks'
seeds = [0, 1, 2, 3, 4]
runs = [dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t3.py'),
        dict(method='CompactPlanNet', config='configs/compact/compact_{dataset}_t3.py')]

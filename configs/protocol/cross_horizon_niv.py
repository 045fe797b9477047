# cross horizon protocol on niv (../_base_/protocols/cross_horizon.py).
_base_ = ['../_base_/protocols/cross_horizon.py']
dataset = 'niv'
protocol = 'cross_horizon_niv'  # its own results folder

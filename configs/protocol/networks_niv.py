# networks protocol on niv (../_base_/protocols/networks.py).
_base_ = ['../_base_/protocols/networks.py']
dataset = 'niv'
protocol = 'networks_niv'  # its own results folder

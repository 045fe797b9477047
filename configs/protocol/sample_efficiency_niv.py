# sample efficiency protocol on niv (../_base_/protocols/sample_efficiency.py).
_base_ = ['../_base_/protocols/sample_efficiency.py']
dataset = 'niv'
protocol = 'sample_efficiency_niv'  # its own results folder

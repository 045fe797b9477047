# observations protocol on niv (../_base_/protocols/observations.py).
_base_ = ['../_base_/protocols/observations.py']
dataset = 'niv'
protocol = 'observations_niv'  # its own results folder

# standard protocol on niv (../_base_/protocols/standard.py).
_base_ = ['../_base_/protocols/standard.py']
dataset = 'niv'
protocol = 'standard_niv'  # its own results folder

# ablation protocol on niv (../_base_/protocols/ablation.py).
_base_ = ['../_base_/protocols/ablation.py']
dataset = 'niv'
protocol = 'ablation_niv'  # its own results folder

# main and ablation t6 protocol on niv (../_base_/protocols/main_and_ablation_t6.py).
_base_ = ['../_base_/protocols/main_and_ablation_t6.py']
dataset = 'niv'
protocol = 'main_t6_niv'  # its own results folder

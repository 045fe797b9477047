# main and ablation t3 protocol on niv (../_base_/protocols/main_and_ablation_t3.py).
_base_ = ['../_base_/protocols/main_and_ablation_t3.py']
dataset = 'niv'
protocol = 'main_t3_niv'  # its own results folder

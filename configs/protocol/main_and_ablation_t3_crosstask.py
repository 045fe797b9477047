# main and ablation t3 protocol on crosstask (../_base_/protocols/main_and_ablation_t3.py).
_base_ = ['../_base_/protocols/main_and_ablation_t3.py']
dataset = 'crosstask'

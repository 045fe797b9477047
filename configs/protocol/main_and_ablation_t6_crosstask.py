# main and ablation t6 protocol on crosstask (../_base_/protocols/main_and_ablation_t6.py).
_base_ = ['../_base_/protocols/main_and_ablation_t6.py']
dataset = 'crosstask'

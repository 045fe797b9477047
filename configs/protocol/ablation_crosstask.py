# ablation protocol on crosstask (../_base_/protocols/ablation.py).
_base_ = ['../_base_/protocols/ablation.py']
dataset = 'crosstask'

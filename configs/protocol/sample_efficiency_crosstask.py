# sample efficiency protocol on crosstask (../_base_/protocols/sample_efficiency.py).
_base_ = ['../_base_/protocols/sample_efficiency.py']
dataset = 'crosstask'

# networks protocol on crosstask (../_base_/protocols/networks.py).
_base_ = ['../_base_/protocols/networks.py']
dataset = 'crosstask'

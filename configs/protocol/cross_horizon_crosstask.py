# cross horizon protocol on crosstask (../_base_/protocols/cross_horizon.py).
_base_ = ['../_base_/protocols/cross_horizon.py']
dataset = 'crosstask'

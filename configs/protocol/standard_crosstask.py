# standard protocol on crosstask (../_base_/protocols/standard.py).
_base_ = ['../_base_/protocols/standard.py']
dataset = 'crosstask'

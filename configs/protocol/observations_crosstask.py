# observations protocol on crosstask (../_base_/protocols/observations.py).
_base_ = ['../_base_/protocols/observations.py']
dataset = 'crosstask'

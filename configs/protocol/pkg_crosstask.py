# pkg protocol on crosstask (../_base_/protocols/pkg.py).
_base_ = ['../_base_/protocols/pkg.py']
dataset = 'crosstask'

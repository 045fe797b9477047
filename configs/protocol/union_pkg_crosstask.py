# union pkg protocol on crosstask (../_base_/protocols/union_pkg.py).
_base_ = ['../_base_/protocols/union_pkg.py']
dataset = 'crosstask'

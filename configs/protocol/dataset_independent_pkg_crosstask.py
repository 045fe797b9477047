# dataset-independent PKG protocol tested on crosstask
# (../_base_/protocols/dataset_independent_pkg.py).
_base_ = ['../_base_/protocols/dataset_independent_pkg.py']
dataset = 'crosstask'

# dataset-independent PKG protocol tested on niv
# (../_base_/protocols/dataset_independent_pkg.py).
_base_ = ['../_base_/protocols/dataset_independent_pkg.py']
dataset = 'niv'

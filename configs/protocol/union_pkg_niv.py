# union pkg protocol on niv (../_base_/protocols/union_pkg.py).
_base_ = ['../_base_/protocols/union_pkg.py']
dataset = 'niv'
protocol = 'union_pkg_niv'  # its own results folder

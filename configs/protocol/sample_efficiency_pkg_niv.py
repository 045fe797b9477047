# sample efficiency pkg protocol on niv (../_base_/protocols/sample_efficiency_pkg.py).
_base_ = ['../_base_/protocols/sample_efficiency_pkg.py']
dataset = 'niv'
protocol = 'sample_efficiency_pkg_niv'  # its own results folder

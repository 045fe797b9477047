# sample efficiency pkg protocol on crosstask (../_base_/protocols/sample_efficiency_pkg.py).
_base_ = ['../_base_/protocols/sample_efficiency_pkg.py']
dataset = 'crosstask'

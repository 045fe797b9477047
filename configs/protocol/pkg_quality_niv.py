# pkg quality protocol on niv (../_base_/protocols/pkg_quality.py).
_base_ = ['../_base_/protocols/pkg_quality.py']
dataset = 'niv'
protocol = 'pkg_quality_niv'  # its own results folder

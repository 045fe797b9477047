# pkg protocol on niv (../_base_/protocols/pkg.py).
_base_ = ['../_base_/protocols/pkg.py']
dataset = 'niv'
protocol = 'pkg_and_task_niv'  # its own results folder

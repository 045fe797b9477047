# pkg quality protocol on crosstask (../_base_/protocols/pkg_quality.py).
_base_ = ['../_base_/protocols/pkg_quality.py']
dataset = 'crosstask'

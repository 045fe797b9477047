# decoding diversity protocol on crosstask (../_base_/protocols/decoding_diversity.py).
_base_ = ['../_base_/protocols/decoding_diversity.py']
dataset = 'crosstask'

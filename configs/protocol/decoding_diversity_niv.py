# decoding diversity protocol on niv (../_base_/protocols/decoding_diversity.py).
_base_ = ['../_base_/protocols/decoding_diversity.py']
dataset = 'niv'
protocol = 'decoding_diversity_niv'  # its own results folder

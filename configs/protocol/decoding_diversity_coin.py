# decoding diversity protocol on coin (../_base_/protocols/decoding_diversity.py).
_base_ = ['../_base_/protocols/decoding_diversity.py']
dataset = 'coin'
protocol = 'decoding_diversity_coin'  # its own results folder
requires = ('COIN annotations, not in ../shared/data: <data_root>/coin/splits/'
            '{train,test}_T{T}.json window files and the COIN features (layout: '
            'configs/_base_/datasets/coin.py); --dry-run works without them')

# decoding diversity protocol on coin (../_base_/protocols/decoding_diversity.py).
_base_ = ['../_base_/protocols/decoding_diversity.py']
dataset = 'coin'
protocol = 'decoding_diversity_coin'  # its own results folder
requires = ('COIN features: synthetic (python tools/make_synthetic_features.py --dataset coin '
            '--data-root ../shared/data --out data/synthetic/coin) or the real ones '
            '(--feature-dir; layout: configs/_base_/datasets/coin.py); --dry-run works without')

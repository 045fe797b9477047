# sample efficiency pkg protocol on coin (../_base_/protocols/sample_efficiency_pkg.py).
_base_ = ['../_base_/protocols/sample_efficiency_pkg.py']
dataset = 'coin'
protocol = 'sample_efficiency_pkg_coin'  # its own results folder
requires = ('COIN features: synthetic (python tools/make_synthetic_features.py --dataset coin '
            '--data-root ../shared/data --out data/synthetic/coin) or the real ones '
            '(--feature-dir; layout: configs/_base_/datasets/coin.py); --dry-run works without')

# main and ablation t3 protocol on coin (../_base_/protocols/main_and_ablation_t3.py).
_base_ = ['../_base_/protocols/main_and_ablation_t3.py']
dataset = 'coin'
protocol = 'main_t3_coin'  # its own results folder
requires = ('COIN features: synthetic (python tools/make_synthetic_features.py --dataset coin '
            '--data-root ../shared/data --out data/synthetic/coin) or the real ones '
            '(--feature-dir; layout: configs/_base_/datasets/coin.py); --dry-run works without')

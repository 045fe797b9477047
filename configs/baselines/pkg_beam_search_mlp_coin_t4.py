# PKG beam search baseline (MLP step model) on COIN at horizon T=4 (../_base_/planners/pkg_beam_search_mlp_coin.py).
_base_ = ['../_base_/planners/pkg_beam_search_mlp_coin.py']
horizon = 4

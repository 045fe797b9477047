# PKG beam search baseline (PDPP step model) on COIN at horizon T=3 (../_base_/planners/pkg_beam_search_coin.py).
_base_ = ['../_base_/planners/pkg_beam_search_coin.py']
horizon = 3

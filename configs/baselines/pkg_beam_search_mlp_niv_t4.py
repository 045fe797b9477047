# PKG beam search baseline (MLP step model) on NIV at horizon T=4 (../_base_/planners/pkg_beam_search_mlp_niv.py).
_base_ = ['../_base_/planners/pkg_beam_search_mlp_niv.py']
horizon = 4

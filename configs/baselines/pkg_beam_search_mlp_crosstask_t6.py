# PKG beam search baseline (MLP step model) on CrossTask at horizon T=6 (../_base_/planners/pkg_beam_search_mlp_crosstask.py).
_base_ = ['../_base_/planners/pkg_beam_search_mlp_crosstask.py']
horizon = 6

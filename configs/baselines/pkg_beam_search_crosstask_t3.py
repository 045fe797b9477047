# PKG beam search baseline (PDPP step model) on CrossTask at horizon T=3 (../_base_/planners/pkg_beam_search_crosstask.py).
_base_ = ['../_base_/planners/pkg_beam_search_crosstask.py']
horizon = 3

# PKG beam search baseline (PDPP step model) on NIV at horizon T=5 (../_base_/planners/pkg_beam_search_niv.py).
_base_ = ['../_base_/planners/pkg_beam_search_niv.py']
horizon = 5

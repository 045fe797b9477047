# PKG beam search baseline on NIV at horizon T=6 (../_base_/planners/pkg_beam_search_niv.py).
_base_ = ['../_base_/planners/pkg_beam_search_niv.py']
horizon = 6

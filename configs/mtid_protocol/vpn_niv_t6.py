# ViterbiPlanNet on niv, T=6, under the MTID comparison protocol (../_base_/mtid/protocol.py).
_base_ = ['../_base_/mtid/vpn_niv.py']
horizon = 6

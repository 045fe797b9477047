# ViterbiPlanNet on crosstask105, T=6, under the MTID comparison protocol (../_base_/mtid/protocol.py).
_base_ = ['../_base_/mtid/vpn_crosstask105.py']
horizon = 6

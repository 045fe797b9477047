# ViterbiPlanNet on coin, T=3, under the MTID comparison protocol (../_base_/mtid/protocol.py).
_base_ = ['../_base_/mtid/vpn_coin.py']
horizon = 3

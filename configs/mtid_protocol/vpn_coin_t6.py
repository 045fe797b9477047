# ViterbiPlanNet on coin, T=6, under the MTID comparison protocol (../_base_/mtid/protocol.py).
_base_ = ['../_base_/mtid/vpn_coin.py']
horizon = 6
model = dict(dvl_layers=2)  # two stacked DVL layers at COIN T=6, as configs/vpn_coin_t6.py

"""Convert a checkpoint of an official code (ViterbiPlanNet's authors', SCHEMA's) for this plugin.

    .venv/bin/python tools/convert_authors_checkpoint.py SRC DST --config CFG [--pkg PKG]

The config's model type is the method switch: a ViterbiPlanNet config (``configs/vpn_*.py``)
reads the authors' code's names (Gigi-G/ViterbiPlanNet), a SCHEMA config
(``configs/baselines/schema_*.py``) SCHEMA's official names (WenliangGuo/SCHEMA, e.g. its
``checkpoints/crosstask/T3_model_best.pth``; its sinusoidal tables are checked against the
config's horizon and dropped). SRC: their ``model.state_dict()`` (``.pth``, read with
``weights_only=True``) or an ``.npz`` of the same names (the oracle fixtures'
``authors_state_dict.npz`` / ``state_dict.npz``). PKG: their raw transition matrix (N, N)
[from, to] as ``.npy`` (the ViterbiPlanNet authors' evaluation saves
``T{T}_transition_matrix.npy``) or an ``.npz`` with a ``transition_matrix`` array (a fixture's
``inputs.npz``); without it (SCHEMA saves none: it recounts its graph on the training split),
the checkpoint carries no graph and ``tools/test.py`` counts the config's PKG on its training
split. CFG: the config the checkpoint will be tested with (it fixes N, K, T and the observation
width). DST: an mmengine checkpoint ``tools/test.py CFG DST`` loads.
"""
import argparse
import sys

import torch

import vpn_plugin.mm  # noqa: F401  (compat + registration)
from mmaction.registry import MODELS
from vpn_plugin.data_paths import load_config
from vpn_plugin.oracles.authors import install_authors_weights, read_authors_state_dict, read_pkg
from vpn_plugin.errors import path_argument, tool_main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help="the official state dict (.pth or .npz)")
    parser.add_argument('dst', help='output checkpoint (.pth)')
    parser.add_argument('--config', type=path_argument,
                        required=True, help='the config the checkpoint is for '
                        '(its model type selects the official naming)')
    parser.add_argument('--pkg', type=path_argument,
                        help='raw transition matrix (.npy, or .npz with a '
                        "'transition_matrix' array); default: none, counted when tested")
    return parser.parse_args(argv)


@tool_main
def main(argv=None) -> int:
    args = parse_args(argv)
    model_cfg = load_config(args.config).model
    model_cfg.text_embeddings = None  # not stored in checkpoints; the config brings them
    if model_cfg.type == 'ViterbiPlanNet':
        model_cfg.loss_weights = dict(state=0.0)
    model = MODELS.build(model_cfg)
    if not hasattr(model, 'official_prefixes'):
        raise SystemExit(f'{args.config}: model type {model_cfg.type} has no official '
                         'checkpoint naming; expected a ViterbiPlanNet or SCHEMA config')
    install_authors_weights(model, read_authors_state_dict(args.src),
                            read_pkg(args.pkg) if args.pkg else None)
    meta = dict(source=str(args.src), pkg=str(args.pkg), config=str(args.config),
                converted_by='tools/convert_authors_checkpoint.py')
    torch.save(dict(state_dict=model.state_dict(), meta=meta), args.dst)
    graph = 'with the given PKG' if args.pkg else 'without a PKG (counted when tested)'
    print(f'wrote {args.dst}: {len(model.state_dict())} tensors for {model_cfg.type} '
          f'(N={model.num_actions}, K={model.num_tasks}, T={model.horizon}), {graph}')
    return 0


if __name__ == '__main__':
    sys.exit(main())

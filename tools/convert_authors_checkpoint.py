"""Convert a checkpoint of the authors' code (Gigi-G/ViterbiPlanNet) for this plugin.

    .venv/bin/python tools/convert_authors_checkpoint.py SRC DST --config CFG --pkg PKG

SRC: their ``model.state_dict()`` (``.pth``, read with ``weights_only=True``, e.g.
``T3_model_best_viterbi.pth``) or an ``.npz`` of the same names (the oracle fixtures'
``authors_state_dict.npz``). PKG: their raw transition matrix (N, N) [from, to] as ``.npy``
(their evaluation saves ``T{T}_transition_matrix.npy``) or an ``.npz`` with a
``transition_matrix`` array (a fixture's ``inputs.npz``). CFG: the config the checkpoint will be
tested with (it fixes N, K, T). DST: an mmengine checkpoint ``tools/test.py CFG DST`` loads.
"""
import argparse
import sys

import torch

import vpn_plugin.mm  # noqa: F401  (compat + registration)
from mmaction.registry import MODELS
from vpn_plugin.data_paths import load_config
from vpn_plugin.models.authors import install_authors_weights, read_authors_state_dict, read_pkg
from vpn_plugin.errors import tool_main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help="the authors' state dict (.pth or .npz)")
    parser.add_argument('dst', help='output checkpoint (.pth)')
    parser.add_argument('--config', required=True, help='the config the checkpoint is for')
    parser.add_argument('--pkg', required=True, help='raw transition matrix (.npy, or .npz '
                        "with a 'transition_matrix' array)")
    return parser.parse_args(argv)


@tool_main
def main(argv=None) -> int:
    args = parse_args(argv)
    model_cfg = load_config(args.config).model
    model_cfg.text_embeddings = None  # not stored in checkpoints; the config brings them
    model_cfg.loss_weights = dict(state=0.0)
    model = MODELS.build(model_cfg)
    install_authors_weights(model, read_authors_state_dict(args.src), read_pkg(args.pkg))
    meta = dict(source=str(args.src), pkg=str(args.pkg), config=str(args.config),
                converted_by='tools/convert_authors_checkpoint.py')
    torch.save(dict(state_dict=model.state_dict(), meta=meta), args.dst)
    print(f'wrote {args.dst}: {len(model.state_dict())} tensors for {model_cfg.type} '
          f'(N={model.num_actions}, K={model.num_tasks}, T={model.horizon})')
    return 0


if __name__ == '__main__':
    sys.exit(main())

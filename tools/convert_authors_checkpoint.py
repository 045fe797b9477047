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
width). DST: an mmengine checkpoint ``tools/test.py CFG DST`` loads; it records what the
config is for, as training would: ``meta.dataset_meta`` (the taxonomy of the config's test
split, the model's horizon) and ``meta.text_features`` (the identity of the config's text
features, when they are here), so a test with another config or text features is refused.
"""
import argparse
import sys


import vpn_plugin.mm  # noqa: F401  (compat + registration)
from mmaction.registry import MODELS
from vpn_plugin.data_paths import load_config
from vpn_plugin.datasets.planning_dataset import config_metainfo
from vpn_plugin.engine.checkpoint import UNCHECKED_KEY, recorded_setting, save_atomically
from vpn_plugin.engine.pre_stage import save_torch_file
from vpn_plugin.oracles.authors import install_authors_weights, read_authors_state_dict, read_pkg
from vpn_plugin.errors import parse_once, path_argument, tool_main
from vpn_plugin.outputs import CONVERTED_MARKER, add_overwrite_argument, check_output


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', type=path_argument, help="the official state dict (.pth or .npz)")
    parser.add_argument('dst', type=path_argument, help='output checkpoint (.pth)')
    parser.add_argument('--config', type=path_argument,
                        required=True, help='the config the checkpoint is for '
                        '(its model type selects the official naming)')
    parser.add_argument('--pkg', type=path_argument,
                        help='raw transition matrix (.npy, or .npz with a '
                        "'transition_matrix' array); default: none, counted when tested")
    add_overwrite_argument(parser, 'DST')
    return parse_once(parser, argv)


def build_model(model_cfg) -> tuple:
    """(the config's model, note): with the config's text features when they are here (their
    identity is recorded, as training does), else without (the note says what that means)."""
    try:
        return MODELS.build(model_cfg), ''
    except (FileNotFoundError, ImportError) as error:
        if not model_cfg.get('text_embeddings'):
            raise
        model_cfg.text_embeddings = None
        if model_cfg.type == 'ViterbiPlanNet':
            model_cfg.loss_weights = dict(state=0.0)
        return MODELS.build(model_cfg), (
            f'; WITHOUT the identity of its text features ({error}): tools/test.py then '
            f'scores it only with {UNCHECKED_KEY}=True')


@tool_main
def main(argv=None) -> int:
    args = parse_args(argv)
    args.dst = check_output(args.dst, 'converted_checkpoint', 'DST',
                            (args.src, args.pkg, args.config), args.overwrite)
    cfg = load_config(args.config)
    model, text_note = build_model(cfg.model)
    if not hasattr(model, 'official_prefixes'):
        raise SystemExit(f'{args.config}: model type {cfg.model.type} has no official '
                         'checkpoint naming; expected a ViterbiPlanNet or SCHEMA config')
    state, pkg = read_authors_state_dict(args.src), (
        read_pkg(args.pkg, num_actions=model.num_actions) if args.pkg else None)
    try:
        install_authors_weights(model, state, pkg)
    except (ValueError, KeyError) as error:  # a parameter named without file or config
        reason = error.args[0] if isinstance(error, KeyError) else error
        raise ValueError(f'SRC {args.src} into the {cfg.model.type} of --config {args.config}: '
                         f'{reason} (a state dict of another method, dataset or horizon than '
                         'the config?)') from None
    meta = dict(source=str(args.src), pkg=str(args.pkg), config=str(args.config),
                converted_by=CONVERTED_MARKER, **recorded_setting(model, config_metainfo(
                    (cfg.get('test_dataloader') or {}).get('dataset'))))
    model_cfg = cfg.model
    save_atomically(lambda path: save_torch_file(dict(state_dict=model.state_dict(), meta=meta),
                                                 path), args.dst,
                    then=lambda: 'Give DST in an existing, writable folder with free space')
    graph = 'with the given PKG' if args.pkg else 'without a PKG (counted when tested)'
    print(f'wrote {args.dst}: {len(model.state_dict())} tensors for {model_cfg.type} '
          f'(N={model.num_actions}, K={model.num_tasks}, T={model.horizon}), {graph}; '
          f'recorded for the taxonomy of {args.config}' + text_note)
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Print predicted plans with action names next to the ground truth.

    python tools/plan.py CONFIG CHECKPOINT [--indices 0 5 9] [--split test|val|train]
"""
import argparse
import sys

from mmengine.config import DictAction

from vpn_plugin.data_paths import add_data_arguments, data_path_args, load_config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--indices', type=int, nargs='+', default=[0, 1, 2],
                        help='dataset sample indices (default: 0 1 2)')
    parser.add_argument('--split', choices=('test', 'val', 'train'), default='test',
                        help='which dataloader of the config to take samples from')
    parser.add_argument('--decode', help='override model.decode (e.g. emission_argmax)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default={},
                        help='override config keys, e.g. model.cross_horizon=repeat_last')
    add_data_arguments(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import vpn_plugin.mm  # noqa: F401  (compat + registration)
    from mmaction.registry import DATASETS, MODELS
    from mmengine.registry import init_default_scope
    from mmengine.runner import load_checkpoint
    from vpn_plugin.models.plan_display import format_plan, predict_indices

    cfg = load_config(args.config, args.cfg_options, **data_path_args(args))
    if args.decode:
        cfg.model.decode = args.decode
    init_default_scope(cfg.get('default_scope', 'mmaction'))
    dataset = DATASETS.build(cfg[f'{args.split}_dataloader'].dataset)
    model = MODELS.build(cfg.model)
    load_checkpoint(model, args.checkpoint, map_location='cpu', strict=True)
    for sample in predict_indices(model, dataset, args.indices):
        print('\n'.join(format_plan(sample, dataset.taxonomy)))
        print()


if __name__ == '__main__':
    sys.exit(main())

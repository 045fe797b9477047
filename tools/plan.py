"""Print predicted plans with action names next to the ground truth.

    python tools/plan.py CONFIG CHECKPOINT [--indices 0 5 9] [--split test|val|train]
"""
import argparse
import sys

from mmengine.config import DictAction

from vpn_plugin.data_paths import add_data_arguments, data_path_args, load_config
from vpn_plugin.errors import NON_NEGATIVE_INT, tool_main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--indices', type=NON_NEGATIVE_INT, nargs='+', default=[0, 1, 2],
                        help='dataset sample indices (default: 0 1 2)')
    parser.add_argument('--split', choices=('test', 'val', 'train'), default='test',
                        help='which dataloader of the config to take samples from')
    parser.add_argument('--decode', help='override model.decode (e.g. emission_argmax)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default={},
                        help='override config keys, e.g. model.cross_horizon=repeat_last')
    add_data_arguments(parser)
    return parser.parse_args(argv)


@tool_main
def main(argv=None):
    args = parse_args(argv)
    from vpn_plugin.apis import build_split_dataset, inference_planner, init_planner
    from vpn_plugin.models.plan_display import format_plan

    cfg = load_config(args.config, args.cfg_options, **data_path_args(args))
    if args.decode:
        cfg.model.decode = args.decode
    model = init_planner(cfg, args.checkpoint)
    dataset = build_split_dataset(cfg, args.split)
    for sample in inference_planner(model, dataset, args.indices):
        print('\n'.join(format_plan(sample, dataset.taxonomy)))
        print()


if __name__ == '__main__':
    sys.exit(main())

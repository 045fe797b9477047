"""Parameter counts of the model a config builds (total and per top-level module).

    .venv/bin/python tools/model_stats.py configs/vpn_crosstask_t3.py [CONFIG ...] \
        [--cfg-options model.horizon=4]

The text features are not needed: when the config's are absent here (e.g. COIN's CLIP
features), the model is built without them; ViterbiPlanNet's and SCHEMA's counts do not depend
on them (their text projection is always built), CompactPlanNet's then lacks its text
projection (said in the output).
"""
import argparse
import sys

# torch and OpenMMLab are imported after the arguments are parsed (--help and refusals answer
# in ~0.1 s; tests/test_import_purity.py)
from vpn_plugin.data_paths import add_cfg_options, load_config
from vpn_plugin.errors import parse_once, path_argument, tool_main

# the loss term that needs the text features, per model type (SCHEMA: built without them
# it can be counted, not run)
TEXT_LOSS = {'ViterbiPlanNet': 'state', 'CompactPlanNet': 'align', 'SCHEMA': None}


def build_model(model_cfg):
    """(model, note): the config's model, or without text features when they are absent."""
    from mmaction.registry import MODELS
    try:
        return MODELS.build(model_cfg), ''
    except (FileNotFoundError, ImportError) as err:
        if model_cfg.type not in TEXT_LOSS:
            raise
        model_cfg.text_embeddings = None
        if TEXT_LOSS[model_cfg.type]:
            model_cfg.setdefault('loss_weights', {})[TEXT_LOSS[model_cfg.type]] = 0.0
        return MODELS.build(model_cfg), f' (built without text features: {err})'


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('configs', type=path_argument, nargs='+', help='config files')
    add_cfg_options(parser, 'override config keys, e.g. horizon=4')
    args = parse_once(parser, argv)
    import vpn_plugin.mm  # noqa: F401  (compat + registration)
    from vpn_plugin.models.base_planner import num_parameters
    from vpn_plugin.runner import check_config_entries
    with_options = (' with --cfg-options ' + ' '.join(  # the counts are of the overridden model
        f'{key}={value}' for key, value in args.cfg_options.items()) if args.cfg_options else '')
    for path in args.configs:
        cfg = load_config(path, args.cfg_options)
        if not isinstance(cfg.get('model'), dict):
            raise ValueError(f'{path}: holds no model entry; expected a config that builds a '
                             'model (e.g. configs/vpn_crosstask_t3.py)')
        check_config_entries(cfg, path)  # an unknown option or type, named
        model, note = build_model(cfg.model)
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        print(f'{path}{with_options}: {cfg.model.type}, {num_parameters(model):,} parameters '
              f'({num_parameters(model) / 1e6:.2f}M), {trainable:,} trainable{note}')
        for name in getattr(model, 'counted_apart', ()):  # e.g. PDPP's task classifier
            print(f'  not counted above: {name} '
                  f'{num_parameters(model.get_submodule(name)):,}')
        for name, child in model.named_children():
            if num_parameters(child):
                print(f'  {name:<20}{num_parameters(child):>12,}')
        own = [n for n, _ in model.named_parameters(recurse=False)]
        for name in own:
            print(f'  {name:<20}{getattr(model, name).numel():>12,}')
    return 0


if __name__ == '__main__':
    sys.exit(main())

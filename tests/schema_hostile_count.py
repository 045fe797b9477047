"""Issue 37 measurement: over every option of every registered vpn_plugin class set on a shipped
config to each of 11 hostile values, how many pairs pass ``check_config_entries`` (reach the
model/dataset build unrefused), and how many of those are of the option's declared kind.

    .venv/bin/python tests/schema_hostile_count.py --save-kinds /tmp/kinds.json
    PYTHONPATH=/tmp/old .venv/bin/python tests/schema_hostile_count.py --kinds /tmp/kinds.json

The first run (this tree) writes, per pair, whether the value is of the option's declared
kind; the second measures an older checkout (PYTHONPATH) and judges its unrefused pairs by
those same kinds (the old tree declares few)."""
import argparse
import copy
import inspect
import json
import sys
from pathlib import Path

HOSTILE = (0, -1, 1.5, 'abc', None, True, [], {}, 1e9, float('nan'), float('inf'))
# class -> (shipped config, key of its entry)
ENTRIES = {
    'ViterbiPlanNet': ('configs/vpn_niv_t3.py', 'model'),
    'PKGBuilder': ('configs/vpn_niv_t3.py', 'model.pkg'),
    'PlanningDataset': ('configs/vpn_niv_t3.py', 'train_dataloader.dataset'),
    'PlanningMetric': ('configs/vpn_niv_t3.py', 'test_evaluator'),
    'CompactPlanNet': ('configs/compact/compact_coin_t3.py', 'model'),
    'SCHEMA': ('configs/baselines/schema_coin_t3.py', 'model'),
    'PDPP': ('configs/baselines/pdpp_coin_t3.py', 'model'),
    'KEPP': ('configs/baselines/kepp_coin_t3.py', 'model'),
    'CEFITO': ('configs/baselines/cefito_coin_t3.py', 'model'),
    'PKGBeamSearchPlanner': ('configs/baselines/pkg_beam_search_coin_t3.py', 'model'),
    'PDPPDiffusion': ('configs/baselines/pkg_beam_search_coin_t3.py', 'model.step_model'),
    'EndpointMLP': ('configs/baselines/pkg_beam_search_mlp_coin_t3.py', 'model.step_model'),
    'UniformEmissionPlanner': ('configs/baselines/uniform_emissions_coin_t3.py', 'model'),
    'LLMPlanner': ('configs/llm/llm_crosstask_t3.py', 'model'),
    'ConcatPlanningDataset': ('configs/union/schema_union_t3.py', 'train_dataloader.dataset'),
    'CEFITOEMAHook': ('configs/baselines/cefito_coin_t3.py', 'custom_hooks.2'),
    'TaskClassifierHook': ('configs/baselines/cefito_coin_t3.py', 'custom_hooks.1'),
    'KEPPStepModelHook': ('configs/baselines/kepp_coin_t3.py', 'custom_hooks.1'),
    'PDPPEMAHook': ('configs/baselines/kepp_coin_t3.py', 'custom_hooks.2'),
    'PDPPWarmupStepLR': ('configs/baselines/kepp_coin_t3.py', 'param_scheduler.0'),
    'StepsPerEpochBatchSampler': ('configs/baselines/kepp_coin_t3.py',
                                  'train_dataloader.batch_sampler'),
    'CheckpointHook': ('configs/vpn_niv_t3.py', 'default_hooks.checkpoint'),
    **{name: ('configs/vpn_niv_t3.py', 'model.pkg.perturbations.0')
       for name in ('DataFraction', 'LabelNoise', 'EdgeDropout', 'WeightNoise')},
}
# a valid entry put in place first for the classes a shipped config does not hold
PLACED = {'DataFraction': dict(fraction=1.0), 'LabelNoise': dict(fraction=0.1),
          'EdgeDropout': dict(fraction=0.1), 'WeightNoise': dict(sigma=0.1)}
OBJECTS = {'optimizer', 'sampler', 'action_embeddings'}  # passed in Python, not by a config


def entry_of(cfg, key, name=None):
    """The entry at ``key`` of ``cfg`` (a valid one of class ``name`` put there first when
    it is one of :data:`PLACED`)."""
    if name in PLACED:
        cfg.model.setdefault('pkg', {})['perturbations'] = [dict(type=name, **PLACED[name])]
    node = cfg
    for part in key.split('.'):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--kinds', help='JSON of --save-kinds: judge by those kinds')
    parser.add_argument('--save-kinds', help='write this tree\'s verdicts to this JSON')
    args = parser.parse_args()
    verdicts = json.loads(Path(args.kinds).read_text()) if args.kinds else {}
    import vpn_plugin.mm  # noqa: F401
    from mmaction.registry import (DATA_SAMPLERS, DATASETS, HOOKS, METRICS, MODELS,
                                   PARAM_SCHEDULERS, TASK_UTILS)
    from vpn_plugin.data_paths import REPO_ROOT, load_config
    from vpn_plugin.runner import check_config_entries
    registries = (MODELS, DATASETS, HOOKS, METRICS, TASK_UTILS, PARAM_SCHEDULERS, DATA_SAMPLERS)
    loaded, pairs, passed, conforming = {}, 0, 0, 0
    for name, (config, key) in ENTRIES.items():
        cls = next(r.get(name) for r in registries if r.get(name) is not None)
        if not args.kinds:
            from vpn_plugin.config_types import conforms, option_types
            declared = option_types(cls)
        if config not in loaded:
            loaded[config] = load_config(str(REPO_ROOT / config))
        for option, p in inspect.signature(cls.__init__).parameters.items():
            if option == 'self' or option in OBJECTS or p.kind in (p.VAR_KEYWORD,
                                                                   p.VAR_POSITIONAL):
                continue
            for index, value in enumerate(HOSTILE):
                pairs += 1
                pair = f'{name}.{option}#{index}'
                if not args.kinds:
                    verdicts[pair] = option in declared and conforms(value, declared[option])
                cfg = copy.deepcopy(loaded[config])
                entry_of(cfg, key, name)[option] = value
                try:
                    check_config_entries(cfg, config)
                except Exception:  # noqa: BLE001  (refused, any way)
                    continue
                passed += 1
                if verdicts.get(pair):
                    conforming += 1
                else:
                    print(f'unrefused: {name}.{option}={value!r}', file=sys.stderr)
    if args.save_kinds:
        Path(args.save_kinds).write_text(json.dumps(verdicts))
    print(f'{pairs} (option, hostile value) pairs over {len(ENTRIES)} registered classes; '
          f'{passed} pass check_config_entries, {conforming} of them conforming to the '
          f'declared kind ({passed - conforming} non-conforming or undeclared)')


if __name__ == '__main__':
    main()

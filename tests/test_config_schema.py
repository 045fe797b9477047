"""The declared kind of every config key (issue 37): the runner's own keys by one table
(``runner.RUNNER_KEYS``), a registered class's options by its annotations; every key of every
config is declared, and a value not of its key's kind is refused before anything runs."""
import copy
import math
from pathlib import Path

import pytest
from mmengine.config import Config

import vpn_plugin.mm  # noqa: F401  (registration)
from vpn_plugin.config_types import conforms
from vpn_plugin.runner import check_config_entries
from vpn_plugin.runner_keys import CONFIG_HELPERS, RUNNER_KEYS

REPO = Path(__file__).resolve().parents[1]
BASE = 'configs/synthetic/vpn_crosstask_t3_synthetic.py'
HOSTILE = [0, -1, 1.5, 'abc', None, True, [], {}, 1e9, math.nan, math.inf]
# entries whose options their registered class declares (config_types.check_options)
REGISTERED = ('model', 'custom_hooks', 'val_evaluator', 'test_evaluator',
              *(f'{split}_dataloader.dataset' for split in ('train', 'val', 'test')))


def leaf_keys(value, prefix=''):
    """The dotted keys of the leaves of a config dict (a list of dicts: ``key.*.option``)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaf_keys(item, f'{prefix}.{key}' if prefix else str(key))
    elif isinstance(value, (list, tuple)) and any(isinstance(v, dict) for v in value):
        for item in value:
            yield from leaf_keys(item, f'{prefix}.*')
    else:
        yield prefix


def declared(key: str) -> bool:
    top = key.split('.')[0]
    return (key in RUNNER_KEYS or key.endswith('.type')  # a type: its registry holds it
            or top.startswith('_') or top in CONFIG_HELPERS  # helper variables
            or any(key == entry or key.startswith(entry + '.') for entry in REGISTERED))


def runner_configs():
    """Every config of configs/ a tool trains or tests (protocol configs list runs), as
    tools/train.py loads it (load_config: the table's kinds checked, horizon and paths
    applied)."""
    from vpn_plugin.data_paths import load_config
    for path in sorted((REPO / 'configs').rglob('*.py')):
        if '_base_' not in path.parts and 'protocol' not in path.parts:
            cfg = load_config(str(path))
            if 'model' in cfg:
                yield path.relative_to(REPO), cfg


def test_every_key_of_every_config_is_declared_and_of_its_kind():
    """(a) an undeclared key (a new one, a misspelt one) fails here naming it; neither the
    table nor the registered classes' annotations cry wolf on any shipped config's value
    (load_config checks the table, check_config_entries the rest)."""
    from vpn_plugin.runner import check_config_entries
    undeclared, refused, checked = {}, [], 0
    for path, cfg in runner_configs():
        for key in leaf_keys(cfg.to_dict()):
            if not declared(key):
                undeclared.setdefault(key, str(path))
        try:
            check_config_entries(cfg, str(path))
        except ValueError as error:
            refused.append(f'{path}: {error}')
        checked += 1
    assert checked > 150
    assert not undeclared, f'config keys without a declared kind: {undeclared}'
    assert not refused, '\n'.join(refused)


def test_an_undeclared_key_is_named():
    assert not declared('optim_wrapper.optimizer.lrr')
    assert not declared('train_dataloader.batch_sise')
    assert declared('param_scheduler.*.gamma') and declared('model.num_actions')


def set_key(cfg, key: str, value) -> None:
    """Set the dotted ``key`` (``*``: the first list item) of ``cfg``, making missing dicts."""
    *parents, last = key.replace('*', '0').split('.')
    node = cfg
    for part in parents:
        if isinstance(node, list):
            node = node[int(part)]
        else:
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]
    node[int(last) if isinstance(node, list) else last] = value


@pytest.fixture(scope='module')
def base_cfg():
    from vpn_plugin.data_paths import apply_horizon, resolve_paths
    return resolve_paths(apply_horizon(Config.fromfile(str(REPO / BASE))))


def test_every_table_key_refuses_values_not_of_its_kind(base_cfg):
    """(b) the 11 hostile values at every key of the table: each one not of the declared
    kind is refused before anything runs, naming config, key and value."""
    check_config_entries(base_cfg, BASE)  # the base itself passes
    silent, unnamed, refused = [], [], 0
    for key, kind in RUNNER_KEYS.items():
        shown = key.replace('.*', '[0]')
        for value in HOSTILE:
            if conforms(value, kind):
                continue
            cfg = copy.deepcopy(base_cfg)
            set_key(cfg, key, copy.deepcopy(value))
            try:
                check_config_entries(cfg, BASE)
            except ValueError as error:
                refused += 1
                if not all(part in str(error) for part in (BASE, f'{shown}={value!r}')):
                    unnamed.append(str(error))
                continue
            silent.append((key, value))
    assert refused > 1500
    assert not silent, f'accepted without a word: {silent}'
    assert not unnamed, unnamed[:5]


@pytest.mark.parametrize('key, value, expected', [
    ('train_dataloader.batch_size', True, 'an integer >= 1'),
    ('optim_wrapper.optimizer.lr', math.nan, 'a finite number >= 0'),
    ('randomness.seed', -1, 'an integer >= 0 and <= 4294967295 (or None)'),
    ('default_hooks.checkpoint.rule', 'max', "one of 'greater', 'less'"),
    ('env_cfg.mp_cfg.mp_start_method', 'abc', "one of 'fork', 'spawn', 'forkserver'"),
    ('train_dataloader.persistent_workers', None, 'True or False'),
])
def test_the_message_names_config_key_value_and_kind(base_cfg, key, value, expected):
    cfg = copy.deepcopy(base_cfg)
    set_key(cfg, key, value)
    with pytest.raises(ValueError) as error:
        check_config_entries(cfg, BASE)
    assert str(error.value).startswith(f'{BASE}: {key}={value!r}; expected ')
    assert expected in str(error.value)


def test_the_table_accepts_the_kinds_mmengine_reads(base_cfg):
    """Values of the declared kind pass: None where mmengine takes it, 0 workers, inf norm."""
    cfg = copy.deepcopy(base_cfg)
    for key, value in [('randomness.seed', None), ('train_dataloader.num_workers', 0),
                       ('optim_wrapper.clip_grad', dict(max_norm=1.0, norm_type=math.inf)),
                       ('default_hooks.checkpoint.max_keep_ckpts', -1),
                       ('optim_wrapper.optimizer.weight_decay', 0)]:
        set_key(cfg, key, value)
    check_config_entries(cfg, BASE)


@pytest.mark.parametrize('option, expected', [
    ('log_processor.window_size=1.5', r"log_processor\.window_size=1\.5; expected an integer >= 1"),
    # read by the data locations and the horizon before the entries are checked
    ('data_root=0', r'data_root=0; expected a non-empty string'),
    ('train_dataloader=0', r'train_dataloader=0; expected a dict \(or None\)'),
])
def test_a_refused_config_writes_nothing(tmp_path, option, expected):
    """(c) tools/train.py with one value of the wrong kind: refused, no work dir, no log
    folder, no checkpoint."""
    from tool_modules import load_tool
    work_dir = tmp_path / 'work'
    with pytest.raises((SystemExit, ValueError), match=f'{BASE}: {expected}'):
        load_tool('train').main([str(REPO / BASE), '--work-dir', str(work_dir),
                                 '--cfg-options', option])
    # the work dir's lock file beside it (vpn_plugin.locks) is all there is
    assert [p.name for p in tmp_path.iterdir()] in ([], ['.work.lock'])

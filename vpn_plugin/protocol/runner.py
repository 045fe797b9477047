"""Run a protocol: configs x seeds x horizons through the mmengine Runner, resumably.

A protocol config (``configs/protocol/*.py``) defines::

    protocol = 'standard'            # name written into every results row
    dataset = 'crosstask'
    seeds = [0, 1, 2, 3, 4]
    requires = ''                    # optional: data the protocol needs beyond ../shared/data
    runs = [                         # one entry = one training per (horizon, seed)
        dict(method='ViterbiPlanNet', config='configs/vpn_{dataset}_t{T}.py',
             horizons=[3, 4],        # fills {T}, sets `horizon`; default: the config's own
             cfg_options={},         # dotted overrides, e.g. {'model.loss_weights.task': 0}
             variant={},             # study settings recorded in the results rows
             train=True,             # False: evaluate without training (parameter-free planners)
             tests=[dict()]),        # evaluations of the trained model, one results row each
    ]

A run may start from a **pre-training stage** (the sample-efficiency study's visual encoder,
trained on the whole training set, then frozen)::

    stages = dict(encoder=dict(config='configs/vpn_{dataset}_t{T}.py', cfg_options={}))
    runs = [dict(..., pretrained=dict(stage='encoder', option='model.init_visual_from'))]

A stage trains once per (stage, horizon, seed) in ``<out>/<protocol>/pretrain_<stage>/T<T>/
seed<s>`` (same overrides as the runs) before the first run that names it; its checkpoint is
given to each such run's training and tests as the config option ``option``. A finished stage
is reused by every run and every later call, never retrained: a stage whose checkpoint has
gone missing is an error. The stage's identity is part of the run's (``run.json``, the rows'
``settings['pretrained']``).

A test entry may set ``method`` (row name; default the run's), ``config`` (test config, default
the run's; may use {T}), ``cfg_options``, ``variant`` (added to the run's in the row: tests of
one training under several study settings) and ``horizon`` (the test horizon; default the test
config's ``test_horizon``, else the run's). Several tests share one training (ablation
decodings, cross-horizon evaluation). ``{dataset}`` in a config path, a run's ``slug`` or a
``cfg_options`` string is the protocol's ``dataset``. Every training and test sets the horizon
through :func:`vpn_plugin.data_paths.apply_horizon` (``horizon`` = the training's,
``test_horizon`` = the test's), as ``tools/train.py --horizon`` does.

Each (run, horizon, seed) trains in its own work dir ``<out>/<protocol>/<slug>/T<T>/seed<s>``
(``seed<s>_batch_size-64_max_epochs-3`` etc. when ``--max-epochs``/``--val-interval``/
``--batch-size`` override the configs, so a smoke run and the full run live side by side);
a finished training leaves ``train_done.json`` and is never repeated, a finished test is a row
of ``<out>/<protocol>/results.jsonl`` (``results_batch_size-64_max_epochs-3.jsonl`` etc. with
overrides; ``results_smoke.jsonl`` and ``seed<s>_smoke`` for a ``--smoke`` run, every training
and test shortened by ``vpn_plugin/smoke.py``) and is skipped on the next call (resumable). Before
anything runs, the configs of the unfinished runs are checked with their overrides
(:func:`check_units`; also what ``tools/run_protocol.py --dry-run`` does).

The unit function is :meth:`ProtocolRunner.run_unit` (a sequential run, the ``--jobs`` pool
and a Slurm array task call it): it trains a unit, resuming from the last checkpoint of its
work dir when an earlier attempt was cut (a checkpoint every ``--checkpoint-interval`` epochs;
default: about 10 minutes of training by the dry run's cost model,
``dry_run.checkpoint_epochs``), tests it, and records each row not in the results file yet:
running a finished unit again adds nothing. It writes the unit's state (running, done, failed
with the error) to ``<work dir>/unit_state.json`` (``unit_state.py``). A unit that fails does
not stop the others: the run goes on and ends with :class:`UnitsFailedError` naming them.

Run identity: everything that changes a result (config, seed, ``cfg_options``, schedule and
batch-size overrides, ``--data-root``) is in the rows' ``settings`` (``results.py``) and in the work dir's
``run.json``; a row counts as done only for the same settings, and a work dir whose
``run.json`` names other settings is refused, never reused. Rows of runs trained for fewer
epochs than their config say so in ``shortened``.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from vpn_plugin.datasets.provenance import run_features
from vpn_plugin.errors import differences, read_json, write_text_atomically
from vpn_plugin.locks import LockBusyError, exclusive_lock, lock_path_of
from vpn_plugin.smoke import SMOKE, limit_test_windows, smoke_config
from .configs import config_content, config_with_options, parsed_config
from .dry_run import CPU_EPOCH_SECONDS, plan_runs
from .progress import Progress, log, unit_name
from .results import ResultRow, append_result, drop_replaced_rows, read_results
from .unit_state import STATE_FILE, read_unit_state, unit_done, unit_failed, unit_started


SMOKE_SUFFIX = '_smoke'  # of a --smoke run's results file and work dirs
TRAIN_DONE = 'train_done.json'  # a finished training's record (finished_training)
# what a protocol config, a run entry and a test entry may set (module docstring)
PROTOCOL_KEYS = ('protocol', 'dataset', 'seeds', 'requires', 'runs', 'max_epochs', 'stages')
RUN_KEYS = ('method', 'config', 'horizons', 'cfg_options', 'variant', 'train', 'tests', 'slug',
            'pretrained')
TEST_KEYS = ('method', 'config', 'cfg_options', 'horizon', 'variant')


@dataclass
class TestSpec:
    method: str
    config: str
    horizon: int
    cfg_options: dict = field(default_factory=dict)
    variant: dict = field(default_factory=dict)  # added to the run's in this test's row


@dataclass
class TrainUnit:
    """One training (run x horizon x seed) and the tests that use it."""
    slug: str
    config: str
    horizon: int
    seed: int
    cfg_options: dict
    variant: dict
    train: bool
    tests: list
    # dict(option=<config key>, unit=<TrainUnit of the pre-training stage>) or None
    pretrained: dict | None = None


@dataclass(frozen=True)
class Trained:
    """What :meth:`ProtocolRunner.train` hands the unit's tests (``NOT_TRAINED`` for a planner
    evaluated untrained)."""
    checkpoint: str | None  # the checkpoint to test (``selected_checkpoint``)
    params: int | None  # the trained model's parameter count
    shortened: str = ''  # how the training was shorter than its config ('' when it was not)
    selection: str = ''  # how the checkpoint was selected, e.g. 'unified: last epoch'


NOT_TRAINED = Trained(checkpoint=None, params=None)


@dataclass(frozen=True)
class Tested:
    """What :meth:`ProtocolRunner.test` measured under one :class:`TestSpec`."""
    metrics: dict  # the evaluator's metrics (``clean_metrics``)
    params: int  # the tested model's parameter count
    limited: str  # how the test windows were limited ('' for all of them)
    features: dict  # the provenance record of the test features (``read_features``)
    # the checkpoint's EMA weights are not the trained ones its config asks for ('' when they
    # are: ``PlanningRunner.tested_ema_mark``)
    ema_mark: str = ''
    caveats: dict = field(default_factory=dict)  # the row's (results.py), from test_caveats
    test_set_pkg: bool = False  # the tested model's graph holds test videos (KEPP's buffer)


def load_protocol(path: str):
    """The protocol config (mmengine ``Config``) with its required fields checked."""
    from vpn_plugin.data_paths import read_config_file
    from vpn_plugin.errors import check_misspelled, check_names
    cfg = read_config_file(path)
    for name in ('protocol', 'runs'):
        if name not in cfg:
            raise ValueError(f'{path}: protocol config lacks "{name}"; see '
                             'vpn_plugin/protocol/runner.py for the format')
    if not isinstance(cfg.runs, (list, tuple)) or not cfg.runs:
        raise ValueError(f'{path}: runs = {cfg.runs!r}; expected a list of at least one run '
                         '(a protocol without runs measures nothing)')
    check_misspelled(cfg.keys(), PROTOCOL_KEYS, f'{path}: protocol key')
    check_protocol_values(cfg, path)
    for index, run in enumerate(cfg.runs):
        check_names(run, RUN_KEYS, f'{path}: runs[{index}] keys')
        for number, test in enumerate(run.get('tests') or []):
            check_names(test, TEST_KEYS, f'{path}: runs[{index}].tests[{number}] keys')
    return cfg


def check_protocol_values(cfg, path) -> None:
    """The values a protocol names: ``protocol`` and each ``method`` a non-empty name, ``seeds``
    a non-empty list of distinct integers >= 0, ``max_epochs`` an integer >= 1, ``horizons``
    integers >= 1; ``ValueError`` naming the file and the field (``0`` epochs or seed ``8.9``
    would otherwise mean the config's schedule, or a seed nobody asked for)."""
    from vpn_plugin.errors import check_number

    def name(value, where):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f'{path}: {where} = {value!r}; expected a non-empty name')
    name(cfg.protocol, 'protocol')
    if cfg.protocol in ('.', '..') or any(c in cfg.protocol for c in '/\\'):
        raise ValueError(f'{path}: protocol = {cfg.protocol!r}; expected a plain name: it is '
                         'the folder of the runs and results under --out (a path would put '
                         'them elsewhere)')
    if 'seeds' in cfg:
        seeds = cfg.seeds
        if not isinstance(seeds, (list, tuple)) or not seeds:
            raise ValueError(f'{path}: seeds = {seeds!r}; expected a non-empty list of seeds')
        for seed in seeds:
            check_number(f'{path}: seeds entry', seed, integer=True, low=0)
        if len(set(seeds)) != len(seeds):
            raise ValueError(f'{path}: seeds = {list(seeds)} repeats a seed; expected each once')
    check_number(f'{path}: max_epochs', cfg.get('max_epochs'), integer=True, low=1,
                 optional=True)
    if 'dataset' in cfg:  # it fills '{dataset}' of the config paths
        name(cfg.dataset, 'dataset')
    for index, run in enumerate(cfg.runs):
        if 'method' in run:
            name(run['method'], f'runs[{index}].method')
        if not isinstance(run.get('train', True), bool):  # 'no' would be true: a training
            raise ValueError(f'{path}: runs[{index}].train = {run["train"]!r}; expected True or '
                             'False (False: test the config untrained)')
        for horizon in run.get('horizons') or []:
            check_number(f'{path}: runs[{index}].horizons entry', horizon, integer=True, low=1)
        check_run_kinds(run, f'{path}: runs[{index}]')
        for number, test in enumerate(run.get('tests') or []):
            if isinstance(test, dict) and 'horizon' in test:
                check_number(f'{path}: runs[{index}].tests[{number}].horizon', test['horizon'],
                             integer=True, low=1)


def check_run_kinds(run, where: str) -> None:
    """A run's ``tests`` a non-empty list of dicts (``tests=[]`` would be read as the default
    one test, a dict as the list of its keys), its and each test's ``variant`` and
    ``cfg_options`` dicts; ``ValueError`` naming the file, the field and the value."""
    def mapping(owner, at):
        for key in ('variant', 'cfg_options'):
            if key in owner and not isinstance(owner[key], dict):
                raise ValueError(f'{at}.{key} = {owner[key]!r}; expected a dict, e.g. '
                                 f'{key}=dict(...)')
    mapping(run, where)
    if 'tests' not in run:
        return
    tests = run['tests']
    if not isinstance(tests, (list, tuple)) or not tests or \
            not all(isinstance(test, dict) for test in tests):
        raise ValueError(f'{where}.tests = {tests!r}; expected a non-empty list of dicts, one '
                         'per test (tests=[dict(), dict(horizon=4)]); left out, the run has one '
                         'test of its own config and horizon')
    for number, test in enumerate(tests):
        mapping(test, f'{where}.tests[{number}]')


def expand_units(protocol_cfg, seeds=None, methods=None, horizons=None) -> list[TrainUnit]:
    """All training units of a protocol, in order (seeds x runs x horizons).

    ``seeds`` overrides the protocol's seeds; ``methods`` keeps only tests of these names;
    ``horizons`` keeps only trainings at these horizons.
    """
    seeds = list(seeds if seeds is not None else protocol_cfg.get('seeds', [0, 1, 2, 3, 4]))
    twice = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if twice:  # each would be trained and counted as one more run (and in the dry run's time)
        raise ValueError(f'seeds {seeds}: seed(s) {twice} given twice; expected each seed once')
    dataset = protocol_cfg.get('dataset', '')
    stages = _StageUnits(protocol_cfg, dataset)
    per_run, names, trained = [], set(), set()
    for index, run in enumerate(protocol_cfg.runs):
        run = dict(run)
        if 'config' not in run:
            raise ValueError(f'protocol {protocol_cfg.protocol!r}: runs[{index}] has no "config"')
        name = run.get('method') or Path(run['config']).stem
        tests = run.get('tests') or [dict()]
        for horizon in run.get('horizons') or [None]:
            config = _config_path(run['config'], horizon, dataset)
            check_config_found(protocol_cfg, f'runs[{index}].config', run['config'], config,
                               horizon)
            horizon = horizon or _config_horizon(config)
            trained.add(horizon)
            if horizons and horizon not in horizons:
                continue
            specs = [_test_spec(t, name, config, horizon, dataset) for t in tests]
            names.update(s.method for s in specs)
            if methods:
                specs = [s for s in specs if s.method in methods]
            if specs:
                run_options = _fill(dict(run.get('cfg_options', {})), dataset)
                variant = {**run.get('variant', {}), **config_variant(config, run_options)}
                for spec in specs:  # a test's own PKG options (a recounted, perturbed graph)
                    _mark_unread_pkg(spec, run_options)
                per_run.append((run, name, config, horizon, specs, variant))
    from vpn_plugin.errors import check_names
    check_names(methods, sorted(names), '--methods')  # a typo would silently drop a method
    check_names(horizons, sorted(trained), '--horizons')
    # seeds outermost: an interrupted protocol has every method for its first seeds
    units = []
    for seed in seeds:
        for run, name, config, horizon, specs, variant in per_run:
            units.append(TrainUnit(_slug(_fill(run.get('slug') or name, dataset),
                                         run.get('variant', {})),
                                   config, horizon, seed,
                                   _fill(dict(run.get('cfg_options', {})), dataset), variant,
                                   bool(run.get('train', True)), specs,
                                   stages.link(run.get('pretrained'), horizon, seed)))
    check_main_table(protocol_cfg.protocol, units[:len(per_run)])
    _check_own_work_dirs(protocol_cfg.protocol, [r for r, *_ in per_run], units[:len(per_run)])
    return units


def _check_own_work_dirs(protocol: str, runs: list, units: list[TrainUnit]) -> None:
    """Two runs of a protocol that train in one work dir (the same method name or slug and
    horizon) would be one training: the second run would reuse the first's, or be refused
    when its options differ, only when it runs; refused here, naming both."""
    seen = {}
    for index, unit in enumerate(units):
        where = (unit.slug, unit.horizon)
        if where in seen:
            first = seen[where]
            raise ValueError(
                f'protocol {protocol!r}: runs {runs[first].get("method")!r} and '
                f'{runs[index].get("method")!r} (entries {first} and {index} of its '
                f'trainings) both train in the work dir {unit.slug}/T{unit.horizon}; expected '
                'each run once, with its own method name or slug')
        seen[where] = index
        rows = [(spec.method, spec.horizon, json.dumps(spec.variant, sort_keys=True))
                for spec in unit.tests]
        twice = sorted({row[:2] for row in rows if rows.count(row) > 1})
        if twice:
            raise ValueError(
                f'protocol {protocol!r}: the tests of run {runs[index].get("method")!r} give '
                f'the row(s) {", ".join(f"{m!r} T={h}" for m, h in twice)} twice (one method '
                'name, horizon and variant); expected each row once: give each test its own '
                'method name or variant')


class _StageUnits:
    """The pre-training stages of a protocol (``stages``), one shared :class:`TrainUnit` per
    (stage, horizon, seed)."""

    def __init__(self, protocol_cfg, dataset: str):
        self.stages = dict(protocol_cfg.get('stages') or {})
        self.name, self.dataset, self.units = protocol_cfg.protocol, dataset, {}

    def link(self, pretrained, horizon: int, seed: int):
        """``TrainUnit.pretrained`` of a run's ``pretrained=dict(stage=, option=)``."""
        if not pretrained:
            return None
        stage, option = pretrained.get('stage'), pretrained.get('option')
        if stage not in self.stages or not option:
            raise ValueError(f'protocol {self.name!r}: pretrained={dict(pretrained)} must name '
                             f'one of the stages {sorted(self.stages)} and the config option '
                             "that receives its checkpoint, e.g. option='model.init_visual_from'")
        key = (stage, horizon, seed)
        if key not in self.units:
            spec = self.stages[stage]
            self.units[key] = TrainUnit(f'pretrain_{stage}',
                                        _config_path(spec['config'], horizon, self.dataset),
                                        horizon, seed, dict(spec.get('cfg_options', {})), {},
                                        True, [])
        return dict(option=option, unit=self.units[key])


def with_stages(units: list[TrainUnit]) -> list[TrainUnit]:
    """``units`` preceded by the distinct pre-training stages they start from (dry run)."""
    stages = {id(u.pretrained['unit']): u.pretrained['unit'] for u in units if u.pretrained}
    return list(stages.values()) + list(units)


def config_variant(config: str, cfg_options: dict) -> dict:
    """What a config records in its rows' ``variant`` by itself: its ``dataset_variant``
    (e.g. ``egoper_errors`` of a converted EgoPER dataset) and ``text_features`` when its
    model reads stand-in text features or none (``models.text_embeddings.text_features_label``:
    COIN's MiniLM stand-in for the paper's CLIP features), and ``unchecked_checkpoint`` when the run
    may score a checkpoint that records nothing to check it by (``engine.checkpoint``), so no
    table mistakes those rows; ``pkg_unread`` when its model plans without the PKG while the
    config changes PKG options (``models.base_planner.unread_pkg_note``): no PKG effect."""
    from vpn_plugin.engine.checkpoint import UNCHECKED_KEY
    from vpn_plugin.models.base_planner import unread_pkg_note
    from vpn_plugin.models.text_embeddings import text_features_label
    cfg = config_with_options(config, cfg_options)
    variant = dict(cfg.get('dataset_variant') or {})
    label = text_features_label(cfg.get('model'))
    if label:
        variant['text_features'] = label
    if cfg.get(UNCHECKED_KEY):
        variant[UNCHECKED_KEY] = True
    unread = unread_pkg_note(cfg.get('model'))
    if unread:
        variant['pkg_unread'] = unread
    return variant


def _test_spec(test: dict, method: str, config: str, horizon: int, dataset: str) -> TestSpec:
    test_horizon = test.get('horizon')
    test_config = _config_path(test.get('config', config), test_horizon, dataset)
    if test_horizon is None:
        test_horizon = _config_horizon(test_config, 'test_horizon') if 'config' in test \
            else horizon
    return TestSpec(test.get('method', method), test_config, test_horizon,
                    _fill(dict(test.get('cfg_options', {})), dataset),
                    dict(test.get('variant', {})))


def _mark_unread_pkg(spec: TestSpec, run_options: dict) -> None:
    """Add ``pkg_unread`` to a test's variant when its own options change the PKG of a model
    that plans without it (``config_variant`` marks the run's)."""
    if not any(key.startswith(('model.pkg', 'model.decode', 'model.type'))
               for key in spec.cfg_options):
        return
    from vpn_plugin.models.base_planner import unread_pkg_note
    cfg = config_with_options(spec.config, {**run_options, **spec.cfg_options})
    note = unread_pkg_note(cfg.get('model'))
    if note:
        spec.variant['pkg_unread'] = note


def check_config_found(protocol_cfg, field_name: str, template: str, config: str,
                       horizon) -> None:
    """``ValueError`` naming the protocol, its field and value, what it was filled to and
    why, when ``config`` (``template`` filled) is no file."""
    if Path(config).is_file():
        return
    dataset = protocol_cfg.get('dataset', '')
    filled = [f'dataset {dataset!r}' for _ in [0] if '{dataset}' in template] + \
        [f'T={horizon}' for _ in [0] if '{T}' in template and horizon]
    why = (' (the protocol sets no dataset = ..., which fills {dataset})'
           if '{dataset}' in template and not dataset else '')
    raise ValueError(f'protocol {protocol_cfg.get("protocol")!r}: {field_name} {template!r}'
                     + (f' gives {config!r} ({", ".join(filled)})' if config != template else '')
                     + f', which is no file{why}; a relative path is read from the current '
                     f'folder ({os.getcwd()}); expected a config file: run from the '
                     "repository, or give the config's path")


def _config_path(template: str, horizon, dataset: str) -> str:
    """``template`` with ``{T}`` (when a horizon is given) and ``{dataset}`` filled."""
    path = template.replace('{dataset}', dataset)
    return path.replace('{T}', str(horizon)) if horizon else path


def _fill(value, dataset: str):
    """``value`` (a slug or ``cfg_options``) with ``{dataset}`` in every string replaced by
    the protocol's dataset (e.g. ``select=['{dataset}']`` of a union model's test)."""
    if isinstance(value, str):
        return value.replace('{dataset}', dataset)
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(item, dataset) for item in value)
    if hasattr(value, 'items'):
        return {key: _fill(item, dataset) for key, item in value.items()}
    return value


def _config_horizon(config: str, name: str = 'horizon') -> int:
    """A config's ``horizon`` (or ``test_horizon``, which defaults to its ``horizon``)."""
    cfg = parsed_config(config)
    if cfg.get(name) is not None:
        return int(cfg[name])
    if 'horizon' not in cfg:
        raise ValueError(f'{config}: no top-level "horizon"; give the run "horizons"')
    return int(cfg.horizon)


def _slug(name: str, variant: dict) -> str:
    text = name + ''.join(f'_{k}-{v}' for k, v in sorted(variant.items()))
    return re.sub(r'[^A-Za-z0-9.=-]+', '_', text).strip('_')


# ----------------------------------------------------------------------------- checking
def pkg_source(config: str, cfg_options: dict) -> str:
    """A row's ``pkg_source``: 'test-set PKG' when the model loads a released graph file
    (KEPP's ``model.released_graph``) instead of counting its training videos."""
    model = config_with_options(config, cfg_options).get('model') or {}
    return 'test-set PKG' if model.get('released_graph') else ''


MAIN_TABLE_PROTOCOLS = ('standard', 'main_t3', 'main_t6')  # and their _<dataset> variants


def is_main_table(protocol: str) -> bool:
    """Whether ``protocol`` writes the paper's main table (``standard``, ``standard_niv``,
    ``main_t3_coin``, ...)."""
    return any(protocol == name or protocol.startswith(name + '_')
               for name in MAIN_TABLE_PROTOCOLS)


def check_main_table(protocol: str, units: list[TrainUnit]) -> None:
    """The main table's protocols (:func:`is_main_table`) refuse a test-set PKG."""
    if not is_main_table(protocol):
        return
    for unit in units:
        for spec in unit.tests:
            if pkg_source(spec.config, {**unit.cfg_options, **spec.cfg_options}):
                raise ValueError(f'protocol {protocol!r} (the main table): {spec.method} '
                                 f'({spec.config}) sets model.released_graph, a test-set PKG '
                                 '(the released NIV graph holds test videos); the main table '
                                 'takes only PKGs counted on the training videos: drop the '
                                 'option or run it in another protocol')


def check_units(units: list[TrainUnit]) -> int:
    """Check every training and test config of ``units`` with its overrides; returns how many.

    Each model, dataset and hook entry must name a registered type, and every option it sets
    must be an argument of that class (the model's ``pkg`` is also built, which checks its
    perturbations and their ranges): a mistyped study option fails here, not after hours of
    training.
    """
    checked = set()
    for unit in with_stages(units):
        jobs = [(unit.config, unit.cfg_options, None)] if unit.train else []
        jobs += [(s.config, {**unit.cfg_options, **s.cfg_options}, s.horizon)
                 for s in unit.tests]
        for config, options, test_horizon in jobs:
            key = (config, json.dumps(options, sort_keys=True, default=str), unit.horizon,
                   test_horizon or unit.horizon)
            if key not in checked:
                check_config(config, options, unit.horizon, test_horizon)
                checked.add(key)
    return len(checked)


def check_config(config: str, cfg_options: dict, horizon=None, test_horizon=None) -> None:
    """Raise ``ValueError`` naming the config and entry for an unknown type or option."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.runner import check_config_entries
    check_config_entries(load_config(config, copy.deepcopy(cfg_options), horizon=horizon,
                                     test_horizon=test_horizon), config)


# ----------------------------------------------------------------------------- running
class UnitsFailedError(RuntimeError):
    """Units of a protocol run failed (the others ran): ``failures`` lists
    ``(unit, error text)``."""

    def __init__(self, message: str, failures: list):
        super().__init__(message)
        self.failures = failures


def training_horizon(unit: TrainUnit, spec: TestSpec):
    """A row's ``train_horizon``: the unit's horizon for a training, and for an untrained
    planner tested at another horizon than its unit's (its test config is built with
    ``horizon`` = the unit's, so its PKG is counted on those training windows); ``None``
    (= the row's own ``horizon``) for an untrained planner tested at its unit's horizon."""
    return unit.horizon if unit.train or spec.horizon != unit.horizon else None


def built_horizons(unit: TrainUnit, spec: TestSpec, options: dict) -> dict:
    """``{'horizon': T, 'test_horizon': T'}`` the test was built with (``horizon`` = the
    unit's, ``test_horizon`` = the test's, as :meth:`ProtocolRunner.test` builds it) when its
    config file says another ``horizon`` than the unit's (a test entry's own ``config`` of
    another horizon, e.g. ``uniform_emissions_niv_t3.py`` under a T=6 run), or another
    ``test_horizon`` than a test at the unit's horizon (a run of
    ``vpn_niv_t6_eval_t3.py`` tests at T=6); {} otherwise. The row records them in
    ``settings.cfg_options``, so that the row says how its config was run:
    ``tools/report.py`` compares the row with the config read with them, instead of refusing
    the protocol's own row as "another run or an edited one"."""
    cfg = config_with_options(spec.config, options)
    if cfg.get('horizon') in (None, unit.horizon) and (
            spec.horizon != unit.horizon or cfg.get('test_horizon') in (None, spec.horizon)):
        return {}
    return {'horizon': unit.horizon, 'test_horizon': spec.horizon}


class ProtocolRunner:
    """Executes training units and appends one results row per finished test.

    ``checkpoint_interval``: epochs between a training's checkpoints (None: about
    ``dry_run.CHECKPOINT_SECONDS`` of training by the cost model of ``epoch_seconds``); it
    bounds the work a kill loses and changes no result."""

    def __init__(self, protocol_cfg, out_dir='work_dirs/protocol', *, max_epochs=None,
                 val_interval=None, batch_size=None, log_level='WARNING', dataset=None,
                 data_paths=None, checkpoint_interval=None, epoch_seconds=CPU_EPOCH_SECONDS,
                 smoke: bool = False):
        self.cfg = protocol_cfg
        self.protocol = protocol_cfg.protocol
        self.dataset = dataset or protocol_cfg.get('dataset', '')
        self.root = Path(out_dir) / self.protocol
        self.max_epochs = max_epochs if max_epochs is not None else protocol_cfg.get('max_epochs')
        self.val_interval = val_interval
        self.batch_size = batch_size
        self.log_level = log_level
        self.checkpoint_interval, self.epoch_seconds = checkpoint_interval, epoch_seconds
        self.data_paths = data_paths or {}  # --data-root / --feature-dir (vpn_plugin.data_paths)
        self.smoke = smoke  # vpn_plugin/smoke.py: every training and test shortened
        if smoke and any(v is not None for v in (self.max_epochs, val_interval, batch_size)):
            raise ValueError('--smoke sets the schedule, batch size and windows of every run '
                             '(vpn_plugin/smoke.py); give no --max-epochs, --val-interval or '
                             '--batch-size with it')
        if val_interval is not None and not (self.max_epochs and val_interval <= self.max_epochs):
            raise ValueError(f'--val-interval {val_interval} applies with --max-epochs, and at '
                             f'most it (got --max-epochs {self.max_epochs}): without it each '
                             "run keeps its config's schedule and the results would name a "
                             'validation interval that was not used')
        given = {k: v for k, v in (('max_epochs', self.max_epochs),
                                   ('val_interval', val_interval),
                                   ('batch_size', batch_size)) if v is not None}
        # runs with overrides have their own table: a smoke run never mixes with the full one
        self.results_file = self.root / f'{_slug("results", given)}{SMOKE_SUFFIX * smoke}.jsonl'

    def done_keys(self) -> set:
        """The identities of the rows in the protocol's results file, which holds this
        protocol's rows only: a symbolic link (to another protocol's file) or a row of
        another protocol (an llm_eval.py --out into it, a copied file) is refused, as the
        protocol would write its rows into that other file or beside those rows."""
        path = self.results_file
        if path.is_symlink():
            raise ValueError(f'{path} is a symbolic link to {path.resolve()}; the protocol '
                             'writes its rows into its own results file: remove the link (or '
                             'give another --out)')
        if not path.is_file():
            return set()
        rows = read_results(path, empty_ok=True)
        foreign = sorted({(r.protocol, r.method) for r in rows
                          if r.protocol not in ('', self.protocol)})  # '': not recorded
        if foreign:
            raise ValueError(f'{path} holds rows of another protocol than {self.protocol!r}: '
                             + ', '.join(f'{m!r} (protocol {p!r})' for p, m in foreign[:5])
                             + '; a protocol\'s results file holds its own rows only: move '
                             'those rows to a file of their own (or give another --out)')
        return {row.key() for row in rows}

    def drop_replaced_rows(self) -> None:
        """Remove the rows of the results file that later rows of the same tests replace
        (``results.drop_replaced_rows``: an untrained planner tested at another horizon than
        its run's, written with ``train_horizon: null`` before 2026-11-28 and tested again by
        a resume), saying which; a run or a submission calls it, never ``--status``."""
        dropped = drop_replaced_rows(self.results_file)
        if dropped:
            log(f'removed {len(dropped)} row(s) written with train_horizon: null by an older '
                'runner, each replaced by the row of the same test that says its training '
                f'horizon: {", ".join(dropped[:5])}' + (' ...' if len(dropped) > 5 else ''))

    def is_done(self, unit: TrainUnit, done: set) -> bool:
        """Every row of ``unit`` is among ``done`` (:meth:`done_keys`)."""
        return all(self.row_for(unit, spec).key() in done for spec in unit.tests)

    def row_for(self, unit: TrainUnit, spec: TestSpec, metrics=None, params=None,
                work_dir='', shortened='') -> ResultRow:
        return ResultRow(method=spec.method, seed=unit.seed, horizon=spec.horizon,
                         metrics=metrics or {'pending': 0.0}, params=params,
                         dataset=self.dataset, config=spec.config,
                         train_horizon=training_horizon(unit, spec),
                         protocol=self.protocol, variant={**unit.variant, **spec.variant},
                         per_sample_file='', work_dir=str(work_dir), shortened=shortened,
                         pkg_source=pkg_source(spec.config, {**unit.cfg_options,
                                                             **spec.cfg_options}),
                         settings=self.settings(unit, spec))

    def overrides(self, unit: TrainUnit) -> dict:
        """The command line's schedule and batch-size overrides that apply to ``unit``
        (``None`` = the config's value; ``smoke``: a smoke run's)."""
        schedule = ({'max_epochs': self.max_epochs, 'val_interval': self.val_interval}
                    if unit.train else {})
        return dict(schedule, batch_size=self.batch_size, **({'smoke': True} if self.smoke
                                                            else {}))

    def settings(self, unit: TrainUnit, spec: TestSpec) -> dict:
        """A row's ``settings``: the overrides, the test's merged ``cfg_options`` (with
        :func:`built_horizons`), the pre-training stage (if any), how a training subset was
        drawn (``subset_draw``, :func:`subset_draw`) and, when test or training windows are
        limited (``--smoke``, a ``...limit`` option, a ``limit`` the test's or the training's
        config file sets: :func:`training_draw`), how they are drawn (``sample_draw``). Known before the test: a row's identity says whether it
        is done."""
        from vpn_plugin.core.stats import SAMPLE_DRAW
        options = {**unit.cfg_options, **spec.cfg_options}
        limited = self.smoke or any(key.split('.')[-1] == 'limit' and value is not None
                                    for key, value in options.items()) or bool(config_values(
            spec.config, options, 'test_dataloader', 'limit')) or bool(training_draw(unit))
        return dict(self.overrides(unit), cfg_options={**options, **built_horizons(
            unit, spec, options)}, **self._pretrained_identity(unit), **subset_draw(unit),
            **({'sample_draw': SAMPLE_DRAW} if limited else {}), **self.data_root_given())

    def data_root_given(self) -> dict:
        """``{'data_root': folder}`` when ``--data-root`` moved the configs' annotations (other
        annotations are other windows: another row and another run, as ``llm_eval.py``
        records it), else ``{}`` (the configs' own data: as before)."""
        from vpn_plugin.data_paths import row_config_path
        given = self.data_paths.get('data_root')
        return {} if given is None else {'data_root': row_config_path(given)}

    def work_dir(self, unit: TrainUnit) -> Path:
        """Work dir of a training unit (also listed by ``--dry-run``)."""
        given = {k: v for k, v in self.overrides(unit).items()
                 if v is not None and k != 'smoke'}
        return (self.root / unit.slug / f'T{unit.horizon}'
                / f'{_slug(f"seed{unit.seed}", given)}{SMOKE_SUFFIX * self.smoke}')

    def identity(self, unit: TrainUnit) -> dict:
        """What ``run.json`` records: everything that changes the training's result."""
        return dict(config=unit.config, config_digest=config_digest(unit.config),
                    seed=unit.seed, cfg_options=unit.cfg_options,
                    train=unit.train, **self.overrides(unit), **self._pretrained_identity(unit),
                    **subset_draw(unit), **training_draw(unit, self.smoke),
                    **self.data_root_given())

    def _pretrained_identity(self, unit: TrainUnit) -> dict:
        if not unit.pretrained:
            return {}
        stage = unit.pretrained['unit']
        return dict(pretrained=dict(option=unit.pretrained['option'], stage=stage.slug,
                                    **self.identity(stage)))

    def pretrained_options(self, unit: TrainUnit) -> dict:
        """``{option: checkpoint}`` of the unit's pre-training stage, trained first when it
        never was (once per stage, horizon and seed, under its work dir's lock: runs of other
        processes that need it wait; a finished stage is never retrained)."""
        if not unit.pretrained:
            return {}
        stage = unit.pretrained['unit']
        work_dir = self.work_dir(stage)
        with exclusive_lock(lock_path_of(work_dir), wait=True, what=f'work dir {work_dir}'):
            claim_work_dir(work_dir, self.identity(stage))
            if not (work_dir / TRAIN_DONE).is_file():
                log(f'    pre-training stage {stage.slug} T={stage.horizon} seed={stage.seed} '
                     f'({stage.config}) -> {work_dir}')
            checkpoint = self.train(stage, work_dir).checkpoint
        if not Path(checkpoint).is_file():
            raise FileNotFoundError(f'{work_dir}: the finished pre-training stage lists the '
                                    f'checkpoint {checkpoint}, which is gone; it is never '
                                    'retrained silently: delete the folder to train it again')
        return {unit.pretrained['option']: checkpoint}

    def run(self, units: list[TrainUnit], jobs: int = 1, estimate=None,
            unit_estimates=None) -> Path:
        """Run every unfinished unit, ``jobs`` at once (``protocol/pool.py``: one process per
        unit; the rows are the same and written in the same order); returns the results file.
        ``estimate(units)``: the dry run's seconds of those units in one process (the ETA
        until the first one finishes); ``unit_estimates(units)``: its seconds of each unit,
        which weigh the units left in the ETA (:class:`progress.Progress`)."""
        if jobs < 1:
            raise ValueError(f'jobs={jobs}; expected >= 1 runs at once')
        done = self.done_keys()
        self.drop_replaced_rows()
        todo = [u for u in units if not self.is_done(u, done)]
        self.check_done_configs([u for u in units if u not in todo])
        self.check_done_features([u for u in units if u not in todo])
        check_units(todo)
        self.check_requirements(todo)
        self.expect(units)
        log(f'protocol {self.protocol}: {len(units)} runs, {len(units) - len(todo)} '
             f'already finished, {len(todo)} to run -> {self.results_file}')
        started = time.time()
        progress = Progress(len(todo), jobs=jobs, estimate=estimate(todo) if estimate else None,
                            unit_seconds=unit_estimates(todo) if unit_estimates else None)
        if jobs > 1:
            from .pool import run_pool
            failures = run_pool(self, todo, done, jobs, progress)
        else:
            failures = self.run_in_turn(todo, done, progress)
        self.raise_failures(failures)
        log(f'protocol {self.protocol}: done in {time.time() - started:.0f}s')
        return self.results_file

    def expect(self, units: list[TrainUnit]) -> None:
        """Add the rows of ``units`` to the rows this results file is expected to hold
        (``expected.py``: ``tools/report.py`` names the missing ones); every launcher calls it
        before it runs or submits them."""
        from .expected import add_expected
        add_expected(self.results_file, [self.row_for(unit, spec, work_dir=self.work_dir(unit))
                                         for unit in units for spec in unit.tests])

    def run_in_turn(self, units: list[TrainUnit], done: set, progress: Progress) -> list:
        """Run ``units`` one after the other in this process; a unit another process holds
        is skipped and waited for at the end; a unit that fails is logged and the next one
        runs. Returns the failures (:meth:`failure`)."""
        busy, failures = [], []
        for number, unit in enumerate(units, 1):
            log(f'[{number}/{len(units)}] {unit_name(unit)}' + progress.text())
            try:
                self.run_unit(unit, done, wait=False)
                progress.done(number - 1)
            except LockBusyError as error:  # another process runs it: come back at the end
                log(f'    skipped for now: {error}')
                busy.append((number - 1, unit))
            except Exception as error:  # noqa: BLE001  (the unit's state file records it)
                failures.append(self.failure(unit, error))
        for index, unit in busy:
            log(f'waiting for {self.work_dir(unit)} (run by another process)')
            try:
                self.run_unit(unit, done)
                progress.done(index)
            except Exception as error:  # noqa: BLE001
                failures.append(self.failure(unit, error))
        return failures

    def failure(self, unit: TrainUnit, error: BaseException) -> tuple:
        """``(unit, text)`` of a failed unit, logged: the error on one line and where its
        state file keeps the traceback (the traceback itself when the unit wrote none: it
        failed before claiming its work dir)."""
        import traceback
        text = ' '.join(f'{type(error).__name__}: {error}'.split())
        state = getattr(error, 'unit_state_file', None)
        if state:
            text += f' (traceback: {state})'
        log(f'    FAILED {unit_name(unit)}: {text}' + ('' if state else '\n' + ''.join(
            traceback.format_exception(error)).rstrip()))
        return unit, text

    def raise_failures(self, failures: list) -> None:
        """After the other units ran: :class:`UnitsFailedError` naming each failed unit, its
        error and its state file; nothing when none failed."""
        if not failures:
            return
        lines = [f'{unit_name(unit)}: {text}' for unit, text in failures]
        raise UnitsFailedError(
            f'{len(failures)} protocol run(s) failed (the others ran; their rows are in '
            f'{self.results_file}); fix the cause and rerun the same command to run only '
            'what is missing:\n' + '\n'.join(lines), failures)

    def check_done_configs(self, units: list[TrainUnit]) -> None:
        """A finished unit counts as done for the config it was run with: a config file (or
        one of its ``_base_`` files) edited since (``run.json``'s ``config_digest``) would
        otherwise exit 0 with the rows of the old config, "already finished"."""
        for unit in units:
            for stage in with_stages([unit]):
                record = Path(self.work_dir(stage)) / 'run.json'
                recorded = read_json(record, 'work dir record').get('config_digest') \
                    if record.is_file() else None
                if recorded and recorded != config_digest(stage.config):
                    raise ValueError(
                        f'{stage.config} changed since {self.work_dir(stage)} ran it (config '
                        f'digest {recorded} there, {config_digest(stage.config)} now: the file '
                        'or one of its _base_ files was edited); the protocol never passes '
                        'rows of another config off as done: give another --out, or restore '
                        'the config')

    def check_done_features(self, units: list[TrainUnit]) -> None:
        """A finished unit counts as done for the features it was tested on: its rows'
        ``features.fingerprint`` must be the one of the feature folder its tests read now
        (``--feature-dir`` pointing at other features would otherwise exit 0 with the old
        features' rows, "already finished")."""
        from vpn_plugin.datasets.provenance import folder_fingerprint
        rows = {row.key(): row for row in read_results(self.results_file, empty_ok=True)} \
            if units and self.results_file.is_file() else {}
        folders = {}
        for unit in units:
            for spec in unit.tests:
                row = rows.get(self.row_for(unit, spec).key())
                recorded = (row.features or {}).get('fingerprint') if row else None
                if not recorded or '+' in recorded:  # not recorded, or a union's folders
                    continue
                job = (spec.config, json.dumps({**unit.cfg_options, **spec.cfg_options},
                                               sort_keys=True, default=str), unit.horizon,
                       spec.horizon)
                if job not in folders:
                    cfg = self.build_cfg(spec.config, {**unit.cfg_options, **spec.cfg_options},
                                         unit.seed, self.root, unit.horizon, spec.horizon)
                    folder = ((cfg.get('test_dataloader') or {}).get('dataset') or {}).get(
                        'feature_dir')
                    folders[job] = folder if folder and Path(folder).is_dir() else None
                if folders[job] is None:
                    continue
                now = folder_fingerprint(folders[job])['fingerprint']
                if now != recorded:
                    raise ValueError(
                        f'{self.results_file} holds the row of {spec.method!r} seed '
                        f'{unit.seed} T={spec.horizon}, tested on features of fingerprint '
                        f'{recorded}, but its test now reads {folders[job]} (fingerprint '
                        f'{now}): other features; the protocol never passes rows of other '
                        'features off as done: give another --out for these features, or the '
                        'feature folder the rows were made with')

    def check_requirements(self, units: list[TrainUnit]) -> None:
        """For a protocol with ``requires`` (data beyond ../shared/data, e.g. COIN's
        annotations): build every dataset of ``units`` first, and stop with what is missing."""
        requires = self.cfg.get('requires')
        if not requires:
            return
        from mmaction.registry import DATASETS
        from vpn_plugin.data_paths import load_config
        log(f'protocol {self.protocol} needs: {requires}')
        for config, horizon in sorted({(u.config, u.horizon) for u in units}):
            cfg = load_config(config, horizon=horizon, **self.data_paths)
            for split in ('train', 'test'):
                try:
                    DATASETS.build(copy.deepcopy(cfg[f'{split}_dataloader'].dataset))
                except (FileNotFoundError, ValueError) as error:
                    raise SystemExit(f'protocol {self.protocol} needs {requires}; {config} '
                                     f'(T={horizon}, {split}): {error}') from error

    def check_feature_files(self, units: list[TrainUnit]) -> tuple[int, list]:
        """Every feature file the trainings and tests of ``units`` read must exist (a look
        at the names only, nothing is read): (videos checked, one message per split that
        lacks some). A Slurm submission refuses them (each task would fail after its time in
        the queue), a dry run prints them. Splits that read a subset of their windows
        (``limit``, ``subset_fraction``: ``--smoke``) count only when none of their videos
        has a file."""
        seen, checked, problems, configs = set(), 0, [], set()
        for unit in with_stages(units):
            jobs = [(unit.config, unit.cfg_options, None, ('train', 'val'))] if unit.train else []
            jobs += [(s.config, {**unit.cfg_options, **s.cfg_options}, s.horizon, ('test',))
                     for s in unit.tests]
            for config, options, test_horizon, splits in jobs:
                job = (config, json.dumps(options, sort_keys=True, default=str), unit.horizon,
                       test_horizon, splits)  # the seeds of a run read the same videos
                if job in configs:
                    continue
                configs.add(job)
                cfg = self.build_cfg(config, options, unit.seed, self.root, unit.horizon,
                                     test_horizon)
                if self.smoke:
                    smoke_config(cfg)
                for split in splits:
                    dataset = (cfg.get(f'{split}_dataloader') or {}).get('dataset') or {}
                    key = json.dumps({k: dataset.get(k) for k in FEATURE_CHECK_KEYS},
                                     sort_keys=True, default=str)
                    if key not in seen:
                        seen.add(key)
                        count, problem = missing_feature_files(
                            dataset, f'{config} ({split} split)')
                        checked += count
                        problems += [problem] if problem else []
        return checked, problems

    def run_unit(self, unit: TrainUnit, done: set | None = None, wait: bool = True,
                 record=None) -> list[ResultRow]:
        """The unit function: train ``unit`` (resuming its work dir's last checkpoint when an
        earlier attempt was cut; a finished training is reused), test it and hand each row
        not in the results file yet to ``record`` (default :meth:`record`: appended to the
        results file at once); returns those rows. Idempotent: a finished unit (all its rows
        in the results file) records nothing; the rows' keys join ``done``. Records the
        unit's state in its work dir (``unit_state.py``); an error is recorded there and
        raised. ``wait=False``: ``LockBusyError`` at once when another process runs it."""
        done = set() if done is None else done
        rows = []
        for row in self.unit_rows(unit, done, wait):
            (record or functools.partial(self.record, done=done))(row)
            rows.append(row)
        return rows

    def unit_rows(self, unit: TrainUnit, done: set, wait: bool = True):
        """Train ``unit`` (or reuse its finished training) and yield the row of each test not
        in ``done`` as soon as it is evaluated, holding its work dir's lock
        (``locks.exclusive_lock``): a unit is run by one process at a time, and a process that
        gets the lock after another finished it finds its rows done. ``wait=False``: raise
        ``LockBusyError`` at once when another process holds it. The unit's state file says
        'running' from the claim of its work dir on, 'done' once every row was yielded (and
        recorded by the caller), 'failed' with the error."""
        work_dir = self.work_dir(unit)
        with exclusive_lock(lock_path_of(work_dir), wait=wait, what=f'work dir {work_dir}'):
            done |= self.done_keys()  # rows another process wrote meanwhile
            if self.is_done(unit, done):
                if (read_unit_state(work_dir) or {}).get('state', 'done') != 'done':
                    unit_done(work_dir)  # a run killed after its rows, before its state
                return
            claim_work_dir(work_dir, self.identity(unit))
            unit_started(work_dir)
            claimed = _inode(work_dir)
            try:
                yield from self._unit_rows(unit, work_dir, done)
            except Exception as error:
                if _inode(work_dir) != claimed:  # not the folder it started in: say so
                    raise RuntimeError(
                        f'the work dir {work_dir} was moved or removed while this unit ran (the '
                        'protocol folder moved?), and then it failed: '
                        f'{type(error).__name__}: {error}; its files are at the new place: rerun '
                        'the same command with --out pointing there') from error
                unit_failed(work_dir, error)
                with contextlib.suppress(AttributeError, TypeError):  # where the traceback is
                    error.unit_state_file = str(work_dir / STATE_FILE)
                raise
            unit_done(work_dir)

    def _unit_rows(self, unit: TrainUnit, work_dir: Path, done: set):
        identity, unit = unit, dataclasses.replace(  # the stage's checkpoint reaches the configs
            unit, cfg_options={**unit.cfg_options, **self.pretrained_options(unit)})
        trained = self.train(unit, work_dir) if unit.train else NOT_TRAINED
        for spec in unit.tests:
            if self.row_for(identity, spec).key() in done:
                continue
            # the dataset: one training may be tested on several (a union model's work dir is
            # shared by the protocol files of its datasets)
            test_dir = work_dir / _slug(f'test_{spec.method}_{self.dataset}_T{spec.horizon}',
                                        spec.variant)
            tested = self.test(unit, spec, trained.checkpoint, test_dir)
            row = self.row_for(identity, spec, tested.metrics, trained.params or tested.params,
                               test_dir, '; '.join(filter(None, (trained.shortened,
                                                                 tested.limited,
                                                                 tested.ema_mark))))
            if tested.limited and 'sample_draw' not in row.settings:  # settings() missed it
                raise RuntimeError(f'{test_dir}: the test kept {tested.limited}, a limit that '
                                   "the row's settings do not record (sample_draw); no row "
                                   'is written without it')
            row.selection, row.caveats = trained.selection, tested.caveats
            if tested.test_set_pkg:  # a checkpoint's graph, whatever the test config says
                row.pkg_source = 'test-set PKG'
            row.features = run_features(trained_features(work_dir) if unit.train else None,
                                        tested.features)
            per_sample = test_dir / 'per_sample.json'
            if per_sample.is_file():
                row.per_sample_file = str(per_sample)
                row.metrics.update(diversity_metrics(per_sample, row.metric_bounds))
            yield row

    def record(self, row: ResultRow, done: set) -> None:
        """Append a finished test's row to the results file (not twice: ``append_result``)."""
        append_result(self.results_file, row)
        done.add(row.key())
        log('    ' + metrics_line(row))

    # ------------------------------------------------------------------ mmengine glue
    def build_cfg(self, config: str, cfg_options: dict, seed: int, work_dir: Path,
                  horizon=None, test_horizon=None):
        from vpn_plugin.data_paths import load_config
        from vpn_plugin.runner import resolve_dataset_references
        cfg = resolve_dataset_references(load_config(
            config, copy.deepcopy(cfg_options), **self.data_paths, horizon=horizon,
            test_horizon=test_horizon))
        cfg.work_dir = str(work_dir)
        cfg.randomness = dict(cfg.get('randomness', {}), seed=seed)
        cfg.log_level = self.log_level
        cfg.experiment_name = work_dir.name  # made unique per process by PlanningRunner
        cfg.launcher = 'none'
        if cfg.model.get('pkg') is not None:
            cfg.model.pkg['seed'] = seed  # PKG perturbations differ across seeds
        train_set = cfg.get('train_dataloader', {}).get('dataset', {})
        if train_set.get('subset_fraction') is not None:
            train_set['subset_seed'] = seed  # so do the training subsets (sample efficiency)
        if self.batch_size:
            for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
                if cfg.get(name):
                    cfg[name]['batch_size'] = self.batch_size
        return cfg

    def train(self, unit: TrainUnit, work_dir: Path) -> Trained:
        """Train once; reuses a finished training (of the same identity:
        :func:`claim_work_dir`)."""
        done = finished_training(work_dir)
        if done is not None:
            return done
        marker = work_dir / TRAIN_DONE
        from vpn_plugin.models.base_planner import num_parameters
        from vpn_plugin.runner import build_runner
        cfg = self.build_cfg(unit.config, unit.cfg_options, unit.seed, work_dir, unit.horizon)
        shortened = ''
        if self.smoke:
            shortened = smoke_config(cfg).shortened
        if self.max_epochs and self.max_epochs < cfg.train_cfg.max_epochs:
            shortened = f'max_epochs={self.max_epochs} (config: {cfg.train_cfg.max_epochs})'
        if self.max_epochs:
            cfg.train_cfg.max_epochs = self.max_epochs
            cfg.train_cfg.val_interval = self.val_interval or self.max_epochs
            cfg.default_hooks.checkpoint = dict(type='CheckpointHook', max_keep_ckpts=1)
        cfg.default_hooks.checkpoint.interval = self.checkpoint_epochs(unit)
        # an interrupted training of this identity (claim_work_dir) goes on from its last
        # checkpoint (bit-exact: RNGStateHook) instead of starting over; PlanningRunner
        # starts afresh when the work dir holds none
        cfg.resume = True
        runner = build_runner(cfg)
        runner.train()
        checkpoint, selection = selected_checkpoint(cfg, work_dir)
        params = num_parameters(runner.model)
        write_text_atomically(marker, json.dumps(dict(
            checkpoint=checkpoint, params=params, shortened=shortened, selection=selection,
            features=read_features(runner.train_dataloader), **subset_draw(unit),
            **training_draw(unit, self.smoke))),
            'training record')
        return Trained(checkpoint, params, shortened, selection)

    def checkpoint_epochs(self, unit: TrainUnit) -> int:
        """Epochs between the checkpoints of ``unit``'s training: ``checkpoint_interval``, else
        the dry run's (about ``dry_run.CHECKPOINT_SECONDS`` of training); a smoke run's 1."""
        if self.smoke:
            return 1
        (planned,) = plan_runs([unit], self.work_dir, self.max_epochs, self.epoch_seconds,
                               self.checkpoint_interval)
        return planned.checkpoint_interval

    def test(self, unit: TrainUnit, spec: TestSpec, checkpoint, test_dir: Path) -> Tested:
        """Test a checkpoint (or an untrained planner: ``checkpoint=None``) under a spec."""
        from vpn_plugin.models.base_planner import num_parameters
        from vpn_plugin.runner import build_runner
        options = {**unit.cfg_options, **spec.cfg_options}
        cfg = self.build_cfg(spec.config, options, unit.seed, test_dir, unit.horizon,
                             spec.horizon)
        cfg.load_from, cfg.load_partial = checkpoint, False  # the trained model, exactly
        if self.smoke:
            limit_test_windows(cfg, SMOKE['test_windows'])
        evaluator = cfg.test_evaluator
        if isinstance(evaluator, dict) and evaluator.get('type') == 'PlanningMetric':
            evaluator['out_file'] = str(test_dir / 'per_sample.json')
        runner = build_runner(cfg)  # PKGHook fills the PKG when no checkpoint carries it
        if checkpoint is None:
            _check_untrained(spec, runner.model)
        runner.declared_test_options = declared_test_options(unit, spec)  # logged as such
        metrics = runner.test()
        limit = getattr(runner.test_dataloader.dataset, 'limited', None)
        return Tested(metrics=clean_metrics(metrics), params=num_parameters(runner.model),
                      limited=f'limit={limit[0]} of {limit[1]} test windows' if limit else '',
                      features=read_features(runner.test_dataloader),
                      ema_mark=runner.tested_ema_mark,
                      caveats=test_caveats(runner, declared=declared_test_options(unit, spec)),
                      test_set_pkg=bool(getattr(_bare(runner.model), 'test_set_pkg', False)))


def dataset_values(cfg, loader: str, name: str) -> list:
    """The values (not None) that ``cfg``'s ``<loader>.dataset`` sets for the option ``name``:
    on the dataset itself, a union's ``dataset_options`` or a source's ``cfg_options``."""
    def values(value) -> list:
        if hasattr(value, 'items'):
            return [found for key, item in value.items() for found in (
                [item] if str(key).split('.')[-1] == name and item is not None
                else values(item))]
        return [found for item in value for found in values(item)] \
            if isinstance(value, (list, tuple)) else []
    return values((cfg.get(loader) or {}).get('dataset') or {})


def subset_draw(unit: TrainUnit) -> dict:
    """``{'subset_draw': SAMPLE_DRAW}`` when ``unit``'s training split is a
    ``subset_fraction`` below 1 of its windows (the sample-efficiency studies; drawn by the
    windows' identity, ``core.stats.SAMPLE_DRAW``), else ``{}`` (a fraction of 1 keeps every
    window, whichever the draw): in its rows' settings, its work dir's identity and its
    training record, so that no row, table or figure takes a subset drawn by list position
    (before 2026-11-29, recorded nothing) for one drawn by identity."""
    from vpn_plugin.core.stats import SAMPLE_DRAW
    fractions = config_values(unit.config, unit.cfg_options, 'train_dataloader',
                              'subset_fraction')
    return {'subset_draw': SAMPLE_DRAW} if any(f != 1 for f in fractions) else {}


def training_draw(unit: TrainUnit, smoke: bool = False) -> dict:
    """``{'sample_draw': SAMPLE_DRAW}`` when ``unit``'s training split keeps ``limit`` of its
    windows (a ``...limit`` option, a ``limit`` its config file sets, ``--smoke``), else ``{}``:
    in its work dir's identity (``run.json``) and its rows' settings, so that a work dir whose
    limited training was drawn by list position (session 12 and before: ``run.json`` records
    no draw) is never reused as if current (:func:`claim_work_dir` refuses it)."""
    from vpn_plugin.core.stats import SAMPLE_DRAW
    limited = smoke or any(key.startswith('train_dataloader.') and key.split('.')[-1] == 'limit'
                           and value is not None for key, value in unit.cfg_options.items()) \
        or bool(config_values(unit.config, unit.cfg_options, 'train_dataloader', 'limit'))
    return {'sample_draw': SAMPLE_DRAW} if limited else {}


def config_values(config: str, cfg_options: dict, loader: str, name: str) -> tuple:
    """:func:`dataset_values` of ``config`` with ``cfg_options`` merged, remembered per content
    of the config and its ``_base_`` files (``configs.config_content``) and options (a protocol
    asks it of the same configs for every unit and row; a config edited during a long run is
    read anew, whatever its time stamp and size)."""
    return _config_values(os.path.abspath(config), config_content(config),
                          json.dumps(cfg_options or {}, sort_keys=True, default=str), loader,
                          name)


@functools.lru_cache(maxsize=1024)
def _config_values(path: str, content: str, options: str, loader: str, name: str) -> tuple:
    return tuple(dataset_values(config_with_options(path, json.loads(options)), loader, name))


def declared_test_options(unit: TrainUnit, spec: TestSpec) -> dict:
    """What the protocol's test itself sets against the training (no caveat of its row): the
    spec's ``cfg_options`` and, for a cross-horizon test, the test horizon (in the row's
    ``horizon`` / ``train_horizon`` and method name)."""
    declared = dict(spec.cfg_options)
    if spec.horizon != unit.horizon:
        declared['test_dataloader.dataset.horizon'] = spec.horizon
    return declared


def _bare(model):
    return getattr(model, 'module', model)


def test_caveats(runner, declared=()) -> dict:
    """What a test recorded about its own trust, as a row's ``caveats`` (results.py): the
    options that differ from the checkpoint's training and what it could not compare
    (``PlanningRunner.changed_from_training`` / ``not_compared``: a list, or a '; '-joined
    text), a feature-scale note, a planner given the true task, and the test feature files
    read that record a damaged video (``PlanningRunner.damaged_test_files``), and a checkpoint
    stored in a coarser float than the model (``reduced_precision_note``). An option the protocol's
    test itself sets (``declared``: its ``cfg_options``, e.g. the ablation's
    ``model.decode``; in the row's settings and method name) is no caveat."""
    caveats = {}
    for kind in ('changed_from_training', 'not_compared'):
        value = getattr(runner, kind, None) or []
        lines = value.split('; ') if isinstance(value, str) else [str(v) for v in value]
        if kind == 'changed_from_training':
            lines = [line for line in lines if line.split(': ', 1)[0] not in declared]
        if lines:
            caveats[kind] = lines
    if getattr(runner, 'feature_statistics_note', ''):
        caveats['feature_scale'] = runner.feature_statistics_note
    if getattr(_bare(runner.model), 'task_source', None) == 'ground_truth':
        caveats['task_source'] = 'ground_truth'
    damaged = getattr(runner, 'damaged_test_files', list)()
    if damaged:
        caveats['damaged_features'] = damaged
    if getattr(runner, 'reduced_precision_note', ''):
        caveats['reduced_precision'] = runner.reduced_precision_note
    return caveats


def _check_untrained(spec: TestSpec, model) -> None:
    """A run with ``train=False`` is scored as built: its model must have nothing to learn
    (a parameter-free planner such as 'PKG + uniform emissions'), else its row would be the
    score of random weights."""
    model = getattr(model, 'module', model)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if trainable:
        raise ValueError(f'{spec.method!r} ({spec.config}): its run has train=False, but its '
                         f'model {type(model).__name__} has {trainable} trainable parameters, '
                         'so it would be scored with its random initial weights; train=False '
                         "is for planners without parameters (e.g. 'PKG + uniform emissions'): "
                         'drop it, or freeze the model')


def selected_checkpoint(cfg, work_dir: Path) -> tuple:
    """(checkpoint to test, how it was selected) after training: the config's ``save_best``
    checkpoint when one was kept, else the last one. ``cfg.selection`` names the validation
    split ('unified': held-out training videos; 'authors': the test windows)."""
    split = cfg.get('selection', 'unified')
    save_best = (cfg.get('default_hooks', {}).get('checkpoint') or {}).get('save_best')
    best = sorted(Path(work_dir).glob('best_*.pth'), key=lambda path: [
        int(part) if part.isdigit() else part for part in re.split(r'(\d+)', path.name)])
    if save_best and best:
        return str(best[-1]), f'{split}: best {save_best}'
    return (Path(work_dir) / 'last_checkpoint').read_text().strip(), f'{split}: last epoch'


def config_digest(config: str) -> str:
    """A digest of a config as its file and ``_base_`` files now read (16 hex digits)."""
    path = Path(config)
    return _config_digest(str(path), config_content(config) if path.is_file() else None)


@functools.lru_cache(maxsize=256)
def _config_digest(config: str, content) -> str:
    import hashlib
    from vpn_plugin.data_paths import read_config_file
    text = json.dumps(read_config_file(config).to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def claim_work_dir(work_dir: Path, identity: dict) -> None:
    """Record ``identity`` in ``<work_dir>/run.json``, or check it against the one there: a
    work dir made with other settings (or by a version that recorded none) is refused."""
    check_work_dir(work_dir, identity)
    record = work_dir / 'run.json'
    if not record.is_file():
        wanted = json.loads(json.dumps(identity, sort_keys=True, default=str))
        write_text_atomically(record, json.dumps(wanted, sort_keys=True, indent=1), 'run record')


def check_work_dir(work_dir: Path, identity: dict) -> None:
    """Raise ``ValueError`` when ``work_dir`` cannot hold the run of ``identity`` (it holds
    files, and no ``run.json`` or one of other settings): :func:`claim_work_dir` refuses it,
    ``run_protocol.py --status`` says so (``status.py``)."""
    work_dir = Path(work_dir)
    record = work_dir / 'run.json'
    wanted = json.loads(json.dumps(identity, sort_keys=True, default=str))
    if record.is_file():
        found = read_json(record, 'work dir record')
        if 'config_digest' not in found:  # recorded before the digest: not compared
            wanted.pop('config_digest', None)
        if 'sample_draw' in wanted and 'sample_draw' not in found:
            raise ValueError(f'{record} records a training on a limited split but no draw '
                             f'version: its windows were drawn by list position (session 12 '
                             f'and before), this run draws them by window identity '
                             f'({wanted["sample_draw"]}), so its training is not this run\'s; '
                             f'it is never reused: delete {work_dir} (the training then starts '
                             'over) or give another --out')
        if found != wanted:
            changed = differences(found, wanted)
            raise ValueError(f'{work_dir} holds a run made with other settings ({changed}); it '
                             'is never reused for another run: delete it or give another --out')
        return
    from vpn_plugin.engine.checkpoint import PARTIAL_FILE
    if work_dir.is_dir() and any(not PARTIAL_FILE.match(p.name) for p in work_dir.iterdir()):
        raise ValueError(f'{work_dir} holds files but no run.json (a run of unknown settings); '
                         'delete it or give another --out')


def diversity_metrics(per_sample_file: Path, bounds: dict) -> dict:
    """``plan_entropy`` / ``plan_jsd`` (bits) from a ``PlanningMetric`` per-sample dump;
    ``bounds`` (the row's ``metric_bounds``) gets ``plan_entropy``'s: log2 of the largest group.

    Empty (with a logged reason) when the dump has no group of windows sharing start and goal.
    """
    from vpn_plugin.core.diversity import decoding_diversity
    dump = json.loads(Path(per_sample_file).read_text())
    try:
        diversity = decoding_diversity(dump['pred_plan'], dump['gt_plan'])
    except ValueError as error:
        log(f'    no decoding diversity for {per_sample_file}: {error}')
        return {}
    bounds['plan_entropy'] = math.log2(diversity['largest_group'])
    return dict(plan_entropy=diversity['pred_entropy'], plan_jsd=diversity['js_divergence'])


FEATURE_CHECK_KEYS = ('feature_dir', 'data_root', 'taxonomy', 'horizon', 'split', 'val_fraction',
                      'split_seed', 'limit', 'subset_fraction', 'skip_bad_videos',
                      'window_file', 'video_list', 'annotation_dir', 'tasks_primary',
                      'annotation_file', 'annotation_format', 'other_split',
                      'annotation_taxonomy')  # what missing_feature_files reads


@functools.lru_cache(maxsize=64)
def _source_stems(data_root, taxonomy, horizon, sources: str) -> tuple:
    """The feature stem of each window of a source (read once per call of a tool)."""
    from vpn_plugin.datasets.sources import read_source, source_path
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    windows, _, _ = read_source(data_root, load_taxonomy(source_path(data_root, taxonomy,
                                                                     horizon)),
                                horizon, **json.loads(sources))
    return tuple(w.feature for w in windows)


def _inode(folder: Path):
    """(device, inode) of ``folder``; None when it is gone."""
    try:
        stat = folder.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def missing_feature_files(dataset: dict, where: str) -> tuple[int, str]:
    """Whether a ``PlanningDataset`` config's videos have feature files (names only):
    (videos checked, '' or a message naming the folder, how many videos lack a file, the
    first of them and how to make them); (0, '') for a dataset of another kind."""
    from vpn_plugin.datasets.features import (feature_fix_hint, find_feature_file,
                                              other_case_hint)
    from vpn_plugin.datasets.planning_dataset import PlanningDataset
    from vpn_plugin.datasets.sources import SOURCE_KEYS
    if not {'feature_dir', 'data_root', 'taxonomy', 'horizon'} <= set(dataset) \
            or dataset.get('skip_bad_videos'):  # skipped videos are counted by the run
        return 0, ''
    horizon, feature_dir = dataset['horizon'], Path(dataset['feature_dir'])
    try:
        stems = _source_stems(str(dataset['data_root']), str(dataset['taxonomy']), horizon,
                              json.dumps({k: dataset[k] for k in SOURCE_KEYS if k in dataset},
                                         sort_keys=True))
    except (OSError, ValueError) as error:  # annotations absent or bad: the run says so too
        return 0, f'{where}: {error}'

    split = dataset.get('split', 'train')
    if split != 'test':
        stems = [s for s in stems if PlanningDataset.held_out(
            s, dataset.get('val_fraction', 0.1), dataset.get('split_seed', 0)) == (split == 'val')]
    stems = sorted(set(stems))
    missing = [s for s in stems if not feature_dir.is_dir()
               or not find_feature_file(feature_dir, s).exists()]
    partial = dataset.get('limit') is not None or dataset.get('subset_fraction') is not None
    if not missing or (partial and len(missing) < len(stems)):
        return len(stems), ''
    first = find_feature_file(feature_dir, missing[0]) if feature_dir.is_dir() \
        else feature_dir / f'{missing[0]}.npy'
    folder = 'holds' if feature_dir.is_dir() else 'does not exist, so it holds'
    return len(stems), (
        f'{where}: feature_dir {feature_dir} {folder} no feature file for {len(missing)} '
        f'of the {len(stems)} videos this split reads, e.g. {first} (nor .npz)'
        f'{other_case_hint(first)}; the run '
        f'would fail on the first of them. '
        f'{feature_fix_hint(feature_dir, dataset["data_root"])}')


def read_features(dataloader) -> dict:
    """The provenance record (``datasets/provenance.py``) of the feature folders a built
    dataloader's dataset reads."""
    from vpn_plugin.datasets.provenance import dataset_feature_dirs, folders_provenance
    return folders_provenance(dataset_feature_dirs(dataloader.dataset))


def finished_training(work_dir) -> Trained | None:
    """The training record of ``work_dir`` (``train_done.json``: its checkpoint resolved
    inside ``work_dir``, as a moved or copied protocol folder tests its own checkpoint), None
    when its training has not finished."""
    marker = Path(work_dir) / TRAIN_DONE
    if not marker.is_file():
        return None
    from vpn_plugin.engine.checkpoint import is_inside
    info = read_json(marker, 'training record')
    checkpoint = info['checkpoint']
    if not is_inside(checkpoint, work_dir):  # a moved or copied protocol folder
        checkpoint = str(Path(work_dir) / Path(checkpoint).name)
    if not Path(checkpoint).is_file():
        raise ValueError(
            f'{marker} records a finished training whose tested checkpoint '
            f'{Path(checkpoint).name} is not in its work dir {work_dir} (deleted, or not '
            'copied with the folder), so its tests cannot run; the protocol never trains a '
            f'finished unit again: put the checkpoint back, or remove the work dir (the '
            'training then starts over) and rerun the same command')
    return Trained(checkpoint, info['params'], info.get('shortened', ''),
                   info.get('selection', ''))


def trained_features(work_dir: Path) -> dict:
    """The features a finished training read (``train_done.json``; ``{}`` for a training
    finished before they were recorded)."""
    marker = Path(work_dir) / TRAIN_DONE
    return read_json(marker, 'training record').get('features', {}) if marker.is_file() else {}


def metrics_line(row: ResultRow) -> str:
    """The log line of a finished test: method, dataset, horizon, seed, variant, metrics."""
    trained = f' (trained T={row.train_horizon})' if row.train_horizon not in (
        None, row.horizon) else ''
    variant = ''.join(f' {k}={v}' for k, v in sorted(row.variant.items()))
    return (f'{row.method} {row.dataset} T={row.horizon}{trained} seed={row.seed}{variant}: '
            + ', '.join(f'{k}={v:.2f}' for k, v in row.metrics.items()
                        if k in ('success_rate', 'mean_accuracy', 'miou_set')))


def clean_metrics(metrics: dict) -> dict:
    """``{'prefix/success_rate': x}`` -> ``{'success_rate': float(x)}``."""
    return {key.rsplit('/', 1)[-1]: float(value) for key, value in metrics.items()}


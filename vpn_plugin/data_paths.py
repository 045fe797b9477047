"""One data root for every config and tool: ``--data-root`` / ``--feature-dir``.

A dataset base config (``configs/_base_/datasets/*.py``) declares its locations in top-level
variables and builds every path from them:

* ``data_root``: the folder holding ``<dataset>/...`` laid out as ``../shared/data``;
* ``feature_dir``: the per-video feature files;
* ``cache_dir``: where extracted observations are cached.

:func:`load_config` reads a config, merges ``--cfg-options`` and moves every path string
that lies under a declared location to its final value: the ``--data-root`` /
``--feature-dir`` flag, else a ``--cfg-options data_root=...`` override (both relative to the
working directory), else the file's value, which is relative to the REPOSITORY ROOT (so a
config works from any working directory). Model configs that read the taxonomy or the state
descriptions under ``data_root`` follow it the same way.

The planning horizon is set in one place as well: a config's top-level ``horizon = T`` (and
``test_horizon = T'`` for cross-horizon configs; default ``horizon``), or the tools'
``--horizon T``. :func:`apply_horizon` writes it into the model and the datasets; it runs in
:func:`load_config` and in ``PlanningRunner.from_cfg`` (so MMAction2's own tools agree).
"""
from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

PATH_VARIABLES = ('data_root', 'feature_dir', 'cache_dir')


class ConfigError(ValueError):
    """A config that cannot run as written (e.g. a test horizon its model cannot plan, an
    observation width its checkpoint was not trained on); tools print its message alone."""
REPO_ROOT = Path(__file__).resolve().parents[1]


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--data-root`` / ``--feature-dir`` flags every tool shares."""
    group = parser.add_argument_group('data locations')
    group.add_argument('--data-root', metavar='DIR',
                       help='folder holding <dataset>/... annotation files laid out as '
                            '../shared/data (default: the config\'s data_root)')
    group.add_argument('--feature-dir', metavar='DIR',
                       help='folder of the per-video feature files (default: the config\'s '
                            'feature_dir)')


def data_path_args(args: argparse.Namespace) -> dict:
    """``{'data_root': ..., 'feature_dir': ...}`` from parsed flags (``None`` = not given)."""
    return dict(data_root=getattr(args, 'data_root', None),
                feature_dir=getattr(args, 'feature_dir', None))


@contextlib.contextmanager
def explained_input_errors():
    """Missing or bad input files and config errors (``ConfigError``) end a tool with their
    message (which names the file, the dataset and the command that fixes it) instead of a
    traceback; ``VPN_TRACEBACK=1`` keeps the traceback."""
    from vpn_plugin.datasets.annotations import BadVideoError
    try:
        yield
    except (FileNotFoundError, BadVideoError, ConfigError) as error:
        if os.environ.get('VPN_TRACEBACK'):
            raise
        raise SystemExit(f'error: {error}\n(set VPN_TRACEBACK=1 for the traceback)') from None


def add_runner_arguments(parser: argparse.ArgumentParser, example: str) -> None:
    """The flags ``tools/train.py`` and ``tools/test.py`` share with MMAction2's tools:
    ``--cfg-options`` (``example``: a sample override for the help), ``--launcher``,
    ``--local-rank``, then ``--horizon`` and the data locations."""
    from mmengine.config import DictAction
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help=f'override config keys, e.g. {example}')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                        default='none', help='job launcher')
    # torch.distributed.launch passes --local-rank; torchrun sets LOCAL_RANK.
    parser.add_argument('--local-rank', '--local_rank', type=int, default=0)
    add_horizon_argument(parser)
    add_data_arguments(parser)


def add_horizon_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--horizon`` flag of ``tools/train.py`` / ``tools/test.py``."""
    parser.add_argument('--horizon', type=int, metavar='T',
                        help="planning horizon (overrides the config's `horizon`: model, "
                        "train/val and test datasets; a config's `test_horizon` still sets "
                        'the test windows, --cfg-options test_horizon=T changes it)')


def apply_horizon(cfg, horizon=None, test_horizon=None):
    """Write the horizon into ``model.horizon``, the train/val datasets and the model's own
    datasets (``model.train_dataset``, ``model.pkg.extra_datasets``), and ``test_horizon``
    into the test dataset; returns ``cfg``.

    ``horizon`` / ``test_horizon`` (if given) replace the config's top-level variables first;
    ``test_horizon`` defaults to ``horizon``. A config without ``horizon`` is left unchanged.
    Applying it twice is the same as once.
    """
    if horizon is not None:
        cfg['horizon'] = horizon
    if test_horizon is not None:
        cfg['test_horizon'] = test_horizon
    if cfg.get('horizon') is None:
        return cfg
    horizon = _positive_horizon(cfg, 'horizon')
    test_horizon = _positive_horizon(cfg, 'test_horizon') if cfg.get('test_horizon') else horizon
    model = cfg.get('model')
    if model is not None:
        if _accepts_horizon(model):
            model['horizon'] = horizon
        model_datasets = [model.get('train_dataset')]
        model_datasets += list((model.get('pkg') or {}).get('extra_datasets') or [])
        for dataset in model_datasets:
            _set_dataset_horizon(dataset, horizon)
    for split, value in (('train', horizon), ('val', horizon), ('test', test_horizon)):
        loader = cfg.get(f'{split}_dataloader')
        if loader is not None:
            _set_dataset_horizon(loader.get('dataset'), value)
    _check_test_horizon(cfg, horizon, test_horizon)
    return cfg


def _check_test_horizon(cfg, horizon: int, test_horizon: int) -> None:
    """A test horizon the config's planner cannot plan is a config error, raised before
    anything is built (``BasePlanner`` planners; the same rule as at predict time)."""
    if test_horizon == horizon or cfg.get('model') is None:
        return
    from mmaction.registry import MODELS
    from vpn_plugin.models.base_planner import BasePlanner, horizon_mismatch
    cls = MODELS.get(cfg.model.get('type')) if cfg.model.get('type') else None
    if not (isinstance(cls, type) and issubclass(cls, BasePlanner)):
        return
    error = horizon_mismatch(cls, cfg.model.get('cross_horizon'), horizon, test_horizon)
    if error:
        raise ConfigError(f'{cfg.filename}: test_horizon={test_horizon} with horizon={horizon}: '
                          f'{error}')


def _positive_horizon(cfg, name: str) -> int:
    value = cfg[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'{cfg.filename}: {name} = {value!r}; expected an integer >= 1 '
                         '(the number of planned steps)')
    return value


def _set_dataset_horizon(dataset, horizon: int) -> None:
    if hasattr(dataset, 'items') and 'type' in dataset:
        dataset['horizon'] = horizon


def _accepts_horizon(model) -> bool:
    """Whether the model's registered class takes a ``horizon`` argument (unknown types: yes,
    so that building them reports the real problem)."""
    import inspect
    from mmaction.registry import MODELS
    cls = MODELS.get(model.get('type')) if model.get('type') else None
    if cls is None:
        return True
    params = inspect.signature(cls.__init__).parameters
    return 'horizon' in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def load_config(path, cfg_options=None, *, data_root=None, feature_dir=None, horizon=None,
                test_horizon=None):
    """The mmengine ``Config`` of ``path`` with ``cfg_options`` merged, the data locations
    resolved to absolute paths and the horizon applied (rules: module docstring)."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(path))
    declared = {name: cfg.get(name) for name in PATH_VARIABLES}
    if cfg_options:
        _refuse_derived_horizons(path, cfg_options)
        cfg.merge_from_dict(cfg_options)
    apply_horizon(cfg, horizon, test_horizon)
    flags = dict(data_root=data_root, feature_dir=feature_dir)
    for name, flag in flags.items():
        if flag is not None and declared[name] is None:
            raise ValueError(f'{path}: --{name.replace("_", "-")} needs a config that defines '
                             f'the variable {name!r} (inherit a dataset base from '
                             'configs/_base_/datasets/)')
    # longest first: a location nested in another (features under the root) moves on its own
    for name in sorted((n for n in PATH_VARIABLES if declared[n] is not None),
                       key=lambda n: -len(str(declared[n]))):
        target = _final_location(str(declared[name]), flags.get(name), cfg.get(name))
        _rebase(cfg._cfg_dict, str(declared[name]), target)
        cfg[name] = target
    return cfg


def _refuse_derived_horizons(path, cfg_options: dict) -> None:
    """``model.horizon=4`` etc. would be overwritten by :func:`apply_horizon`: refuse it."""
    derived = sorted(key for key in cfg_options if key.endswith('.horizon'))
    if derived:
        raise ValueError(f'{path}: --cfg-options {", ".join(derived)}: the horizon is set in '
                         'one place; give horizon=T (--horizon T), and test_horizon=T for a '
                         'different test horizon')


def _final_location(declared: str, flag, current) -> str:
    if flag is not None:
        return str(Path(flag).resolve())
    if current is not None and str(current) != declared:
        return str(Path(current).resolve())  # a --cfg-options override: relative to the CWD
    path = Path(declared)
    return str(path if path.is_absolute() else (REPO_ROOT / path).resolve())


def _rebase(node, old: str, new: str) -> None:
    """Replace the prefix ``old`` of every path string under ``node`` (dicts/lists) by ``new``."""
    items = node.items() if hasattr(node, 'items') else enumerate(node)
    for key, value in list(items):
        if isinstance(value, str) and (value == old or value.startswith(old.rstrip('/') + '/')):
            node[key] = new + value[len(old.rstrip('/')):]
        elif isinstance(value, (dict, list)) or hasattr(value, 'items'):
            _rebase(value, old, new)

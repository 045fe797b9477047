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
"""
from __future__ import annotations

import argparse
from pathlib import Path

PATH_VARIABLES = ('data_root', 'feature_dir', 'cache_dir')
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


def load_config(path, cfg_options=None, *, data_root=None, feature_dir=None):
    """The mmengine ``Config`` of ``path`` with ``cfg_options`` merged and the data locations
    resolved to absolute paths (rules: module docstring)."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(path))
    declared = {name: cfg.get(name) for name in PATH_VARIABLES}
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
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

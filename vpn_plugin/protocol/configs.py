"""The protocol's configs, parsed once per file version (a protocol names the same configs for
every run and seed): the runner and the dry run read them through here."""
from __future__ import annotations

import copy
import functools
import os


def parsed_config(config: str):
    """``Config.fromfile(config)``, parsed once per file version (a protocol names the same
    configs for every run and seed); callers must not modify it."""
    stat = os.stat(config)
    return _parse_config(os.path.abspath(config), stat.st_mtime_ns, stat.st_size)


def config_with_options(config: str, cfg_options: dict):
    """A copy of the parsed ``config`` (:func:`parsed_config`) with ``cfg_options`` merged."""
    cfg = copy.deepcopy(parsed_config(config))
    if cfg_options:
        cfg.merge_from_dict(copy.deepcopy(dict(cfg_options)))
    return cfg


@functools.lru_cache(maxsize=256)
def _parse_config(path: str, mtime_ns: int, size: int):
    from vpn_plugin.data_paths import read_config_file
    return read_config_file(path)

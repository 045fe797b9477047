"""The protocol's configs, parsed once per content (a protocol names the same configs for
every run and seed): the runner and the dry run read them through here. The key is the
content of the config and of its ``_base_`` files (:func:`config_content`), not a file's time
stamp and size: a config or base edited during a long protocol run is read anew."""
from __future__ import annotations

import copy
import functools
import os

from vpn_plugin.data_paths import config_content  # noqa: F401  (runner, report)


def parsed_config(config: str):
    """``Config.fromfile(config)``, parsed once per content (:func:`config_content`; a
    protocol names the same configs for every run and seed); callers must not modify it."""
    return _parse_config(os.path.abspath(config), config_content(config))


def config_with_options(config: str, cfg_options: dict):
    """A copy of the parsed ``config`` (:func:`parsed_config`) with ``cfg_options`` merged."""
    cfg = copy.deepcopy(parsed_config(config))
    if cfg_options:
        cfg.merge_from_dict(copy.deepcopy(dict(cfg_options)))
    return cfg


@functools.lru_cache(maxsize=256)
def _parse_config(path: str, content: str):
    from vpn_plugin.data_paths import read_config_file
    return read_config_file(path)

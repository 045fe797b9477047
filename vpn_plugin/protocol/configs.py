"""The protocol's configs, parsed once per content (a protocol names the same configs for
every run and seed): the runner and the dry run read them through here. The key is the
content of the config and of its ``_base_`` files (:func:`config_content`), not a file's time
stamp and size: a config or base edited during a long protocol run is read anew."""
from __future__ import annotations

import copy
import functools
import hashlib
import os
from pathlib import Path


def parsed_config(config: str):
    """``Config.fromfile(config)``, parsed once per content (:func:`config_content`; a
    protocol names the same configs for every run and seed); callers must not modify it."""
    return _parse_config(os.path.abspath(config), config_content(config))


def config_content(config: str) -> str:
    """A digest of the bytes of ``config`` and of every file of its ``_base_`` chain: the key
    of what is remembered of a config. Only the bytes are read each time; a file's bases are
    parsed once per content of that file (:func:`_base_files`)."""
    digest, todo, seen = hashlib.sha256(), [os.path.abspath(config)], set()
    while todo:
        file = todo.pop(0)
        if file in seen or (seen and not os.path.isfile(file)):  # (config itself: its error)
            continue
        seen.add(file)
        with open(file, 'rb') as handle:
            data = handle.read()
        digest.update(file.encode() + b'\0' + data + b'\0')
        todo += _base_files(file, hashlib.sha256(data).hexdigest())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1024)
def _base_files(file: str, content: str) -> list:
    """The ``_base_`` files of ``file`` (of that ``content``) as a run reads them
    (``data_paths.config_bases``); [] when they cannot be read (its reader names what is
    wrong)."""
    from vpn_plugin.data_paths import config_bases
    try:
        return [str(base) for base in config_bases(Path(file))]
    except (UnicodeDecodeError, SyntaxError, ValueError, OSError, AttributeError):
        return []


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

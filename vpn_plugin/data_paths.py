"""One data root for every config and tool: ``--data-root`` / ``--feature-dir``.

A dataset base config (``configs/_base_/datasets/*.py``) declares its locations in top-level
variables and builds every path from them with placeholders (``'{data_root}/niv'``):

* ``data_root``: the folder holding ``<dataset>/...`` laid out as ``../shared/data``;
* ``feature_dir``: the per-video feature files;
* ``cache_dir``: where extracted observations (and computed text features) are cached.

The variables are authoritative wherever a config is loaded (:func:`load_config` for our
tools, ``PlanningRunner.from_cfg`` for MMAction2's own ``tools/train.py`` / ``test.py``,
``vpn_plugin.apis``): :func:`resolve_paths` fills the placeholders (also inside another
variable, ``feature_dir = '{data_root}/my_dataset/features'``) and moves paths that start with
a variable's file value. Each variable's final value: the ``--data-root`` / ``--feature-dir``
flag, or a ``--cfg-options data_root=...`` override (both relative to the working
directory; both given with different values: refused, :func:`check_flags_agree`), else the
config's value (a child config's own value included), which is relative
to the REPOSITORY ROOT (so a config works from any working directory). A split moved alone
(``--cfg-options train_dataloader.dataset.feature_dir=X``) is refused, naming the splits.

The planning horizon is set in one place as well: a config's top-level ``horizon = T`` (and
``test_horizon = T'`` for cross-horizon configs; default ``horizon``), or the tools'
``--horizon T``. :func:`apply_horizon` writes it into the model and the datasets; it runs in
:func:`load_config` and in ``PlanningRunner.from_cfg`` (so MMAction2's own tools agree).

A misspelled top-level key is refused (:func:`check_config_keys`). This module stands below the
datasets (which load configs too) and knows no planner or runner (docs/design.md, "Layout").
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import hashlib
import json
import os
import re
from pathlib import Path

from .errors import (NON_NEGATIVE_INT, POSITIVE_INT, check_file, check_misspelled,
                     close_match_hint, number_text_problem, unique_keys)

PATH_VARIABLES = ('data_root', 'feature_dir', 'cache_dir')
# Top-level config keys besides the Runner's arguments: mmengine's (read by Runner / from_cfg /
# MMAction2's tools), this plugin's variables, and the helpers of configs/_base_/.
MMENGINE_KEYS = ('runner_type', 'custom_imports', 'model_wrapper_cfg', 'activation_checkpointing',
                 'efficient_conv_bn_eval', 'compile', 'sync_bn', 'find_unused_parameters',
                 'gpu_ids', 'dist_params', 'vis_backends')
PLUGIN_KEYS = ('horizon', 'test_horizon', 'data_root', 'feature_dir', 'cache_dir', 'selection',
               'load_partial', 'unchecked_checkpoint', 'observation', 'window_policy',
               'batch_size', 'dataset', 'loader', 'paths', 'train_source', 'test_source',
               'dataset_variant', 'device_resident', 'shortened')

REPO_ROOT = Path(__file__).resolve().parents[1]


def add_data_arguments(parser: argparse.ArgumentParser, feature_dir: bool = True) -> None:
    """The ``--data-root`` / ``--feature-dir`` flags every tool shares (``feature_dir=False``:
    a tool that reads no feature file has no ``--feature-dir``, rather than one it ignores)."""
    group = parser.add_argument_group('data locations')
    from vpn_plugin.errors import path_argument
    group.add_argument('--data-root', metavar='DIR', type=path_argument,
                       help='folder holding <dataset>/... annotation files laid out as '
                            '../shared/data (default: the config\'s data_root)')
    if not feature_dir:
        return
    group.add_argument('--feature-dir', metavar='DIR', type=path_argument,
                       help='folder of the per-video feature files (default: the config\'s '
                            'feature_dir)')


def data_path_args(args: argparse.Namespace) -> dict:
    """``{'data_root': ..., 'feature_dir': ...}`` from parsed flags (``None`` = not given)."""
    return dict(data_root=getattr(args, 'data_root', None),
                feature_dir=getattr(args, 'feature_dir', None))


def add_cfg_options(parser: argparse.ArgumentParser, help: str, **kwargs) -> None:
    """``--cfg-options KEY=VALUE ...`` (mmengine's ``DictAction``), with an item that is not
    ``KEY=VALUE`` (``--cfg-options foo``) refused by the parser naming it. mmengine is imported
    when the flag is read (``--help`` and other flags' refusals import none of it; its
    ``config`` module needs no compat fix)."""

    class CfgOptions(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            bad = [item for item in values or () if '=' not in item or item.startswith('=')]
            if bad:
                parser.error(f'{option_string} {bad[0]}: expected KEY=VALUE (e.g. '
                             'train_cfg.max_epochs=5; a list: KEY=[a,b]), got no "=" or no key')
            spaced = [item for item in values or ()  # code is named as such later
                      if SPACE_INSIDE.search(item.split('=', 1)[1])
                      and not looks_like_code(item.split('=', 1)[1])]
            if spaced:  # mmengine's DictAction removes every space of a value
                key, value = spaced[0].split('=', 1)
                parser.error(f'{option_string} {spaced[0]}: the value holds a space, which '
                             f"mmengine's --cfg-options removes (it would read {key}="
                             f"{value.strip(chr(39) + chr(34)).replace(' ', '')}); expected a "
                             'value without spaces: give a path with spaces through the '
                             "tool's own flag (--feature-dir, --data-root, --work-dir) or in a "
                             "config file of your own (_base_ = ['<config>'])")
            for item in values:  # mmengine's DictAction reads '٥' as 5, '1_0' as 10
                key, text = item.split('=', 1)  # and "'1_0'" too: it strips the quotes first
                tokens = (token.strip().strip('\'"') for token in re.split(r'[\[\]\(\),]', text))
                token = next((token for token in tokens if number_text_problem(token)), None)
                if token is not None:
                    problem = number_text_problem(token)
                    parser.error(f'{option_string} {item}: {token!r} {problem}; expected a '
                                 'number in ASCII digits 0-9 without "_"')
            given = getattr(namespace, '_cfg_options_given', {})  # key -> text, every flag
            for item in values:
                key, text = item.split('=', 1)
                if given.get(key, text) != text:  # mmengine keeps the last without a word
                    parser.error(f'{option_string}: {key} is given twice, {key}={given[key]} '
                                 f'and {key}={text}; expected one value per key')
                given[key] = text
            namespace._cfg_options_given = given
            from mmengine.config import DictAction
            try:
                DictAction(self.option_strings, self.dest)(parser, namespace, values,
                                                           option_string)
            except RecursionError:  # mmengine's parser on some nested values
                parser.error(f'{option_string} {" ".join(values)}: cannot be parsed; '
                             + DICT_VALUE_HINT)
            except AssertionError as error:  # mmengine: "Imbalanced brackets exist in [1,2"
                wrong = next((item for item in values if str(error).endswith(
                    item.split('=', 1)[1])), ' '.join(values))
                parser.error(f'{option_string} {wrong}: {error}; expected a plain value or a '
                             'list [a,b] / tuple (a,b) with every bracket closed')
            calls = [f'{key}={value}' for key, parsed in getattr(namespace, self.dest).items()
                     for value in _strings_in(parsed) if value.lstrip().startswith('dict(')]
            if calls:  # read as the text "dict(type='PKGHook')", not as a dict
                parser.error(f'{option_string} {calls[0]}: dict(...) is not read there; '
                             + DICT_VALUE_HINT)

    parser.add_argument('--cfg-options', nargs='+', action=CfgOptions, help=help, **kwargs)


# a space between two characters of a value (not one beside a list's brackets or commas):
# what mmengine's DictAction would remove, joining the two
SPACE_INSIDE = re.compile(r'[^\s,\[\]()]\s+[^\s,\[\]()]')
DICT_VALUE_HINT = ("mmengine's --cfg-options reads plain values, lists [a,b] and tuples (a,b), "
                   'not dict(...): set the keys one by one (KEY.SUB=VALUE) or write the '
                   "override in a config file of your own (_base_ = ['<config>'])")


def _strings_in(value):
    """Every string in a parsed ``--cfg-options`` value (nested lists / tuples / dicts)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings_in(item)


def add_runner_arguments(parser: argparse.ArgumentParser, example: str) -> None:
    """The flags ``tools/train.py`` and ``tools/test.py`` share with MMAction2's tools:
    ``--cfg-options`` (``example``: a sample override for the help), ``--launcher``,
    ``--local-rank``, then ``--horizon`` and the data locations."""
    add_cfg_options(parser, f'override config keys, e.g. {example}')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                        default='none', help='job launcher')
    # torch.distributed.launch passes --local-rank; torchrun sets LOCAL_RANK.
    parser.add_argument('--local-rank', '--local_rank', type=NON_NEGATIVE_INT, default=0)
    add_horizon_argument(parser)
    add_data_arguments(parser)


def pkg_extra_datasets(cfg) -> list:
    """``model.pkg.extra_datasets`` of ``cfg`` (the list itself; [] when absent), refused
    unless a list: 'abc' would be read letter by letter, 5 end in "'int' object is not
    iterable"."""
    from collections.abc import Mapping
    pkg = (cfg.get('model') or {}).get('pkg')
    if pkg is not None and not isinstance(pkg, Mapping):
        raise ValueError(f'{cfg.filename}: model.pkg={pkg!r}; expected a dict of PKGBuilder '
                         "options (e.g. dict(type='PKGBuilder', smoothing=0.0)) or None for the "
                         'defaults')
    extra = (pkg or {}).get('extra_datasets', [])
    if not isinstance(extra, (list, tuple)):
        raise ValueError(f'{cfg.filename}: model.pkg.extra_datasets={extra!r}; expected a list '
                         "of dataset configs or keys such as 'val_dataloader.dataset' ([] for "
                         'none)')
    return extra


def check_work_dir_option(args: argparse.Namespace, unread_because: str = '') -> None:
    """``--cfg-options work_dir=X`` is read only when no ``--work-dir`` is given and the tool
    reads the config's work dir at all (``unread_because``: why it does not, e.g. a smoke run);
    else the flag or the tool's own folder replaced it without a word: refused."""
    given = (args.cfg_options or {}).get('work_dir')
    flag = getattr(args, 'work_dir', None)
    check_flags_agree(args.cfg_options, {'--work-dir': ('work_dir', flag)}, paths=('work_dir',))
    if given is not None and not flag and unread_because:
        raise SystemExit(f'--cfg-options work_dir={given} is not read: {unread_because}; give '
                         f'--work-dir {given}')


def set_launcher(cfg, args: argparse.Namespace) -> None:
    """``cfg.launcher`` = ``--launcher`` (as MMAction2's tools); ``--cfg-options launcher=X``
    of another value is refused: the flag would replace it without a word (a run asked for
    ``launcher=pytorch`` ran one process)."""
    check_flags_agree(args.cfg_options, {'--launcher': ('launcher', args.launcher)})
    cfg.launcher = args.launcher


def add_horizon_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--horizon`` flag of ``tools/train.py`` / ``tools/test.py``."""
    parser.add_argument('--horizon', type=POSITIVE_INT, metavar='T',
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
    if horizon is not None:  # a numpy integer given from Python is an integer
        cfg['horizon'] = _python_int(horizon)
    if test_horizon is not None:
        cfg['test_horizon'] = _python_int(test_horizon)
    if cfg.get('horizon') is None:
        return cfg
    horizon = _positive_horizon(cfg, 'horizon')
    # 0, [] or {} were read as "no test_horizon" (the training horizon tested without a word)
    test_horizon = (_positive_horizon(cfg, 'test_horizon')
                    if cfg.get('test_horizon') is not None else horizon)
    model = cfg.get('model')
    if model is not None and not hasattr(model, 'get'):  # model = 'ViterbiPlanNet'
        raise ValueError(f'{cfg.filename or "config"}: model = {model!r}; expected a model dict '
                         "with a type, e.g. model = dict(type='ViterbiPlanNet', ...) (or inherit "
                         "one: _base_ = ['configs/vpn_niv_t3.py'])")
    refuse_contradicting_horizons(cfg, horizon, test_horizon)
    if model is not None:
        if _accepts_horizon(model):
            model['horizon'] = horizon
        model_datasets = [model.get('train_dataset')]
        model_datasets += pkg_extra_datasets(cfg)
        for dataset in model_datasets:
            _set_dataset_horizon(dataset, horizon)
    for split, value in (('train', horizon), ('val', horizon), ('test', test_horizon)):
        loader = cfg.get(f'{split}_dataloader')
        if loader is not None:
            _set_dataset_horizon(loader.get('dataset'), value)
    _check_test_horizon(cfg, horizon, test_horizon)
    return cfg


def _python_int(value):
    """``value`` as a Python int when it is a 0-d numpy / torch integer (np.int64(4) from
    Python was refused as 'expected an integer'), else as given (:func:`_positive_horizon`
    checks it)."""
    if hasattr(value, 'item') and getattr(value, 'ndim', None) == 0:
        item = value.item()
        if isinstance(item, int) and not isinstance(item, bool):
            return item
    return value


def _horizon_places(cfg, horizon: int, test_horizon: int):
    """(key, value the config holds, value apply_horizon writes) of every place it writes."""
    model = cfg.get('model')
    if model is not None:
        if _accepts_horizon(model):
            yield 'model.horizon', model.get('horizon'), horizon
        yield 'model.train_dataset.horizon', _dataset_horizon(model.get('train_dataset')), horizon
        for i, dataset in enumerate(pkg_extra_datasets(cfg)):
            yield f'model.pkg.extra_datasets.{i}.horizon', _dataset_horizon(dataset), horizon
    for split, value in (('train', horizon), ('val', horizon), ('test', test_horizon)):
        loader = cfg.get(f'{split}_dataloader')
        if hasattr(loader, 'get'):
            yield (f'{split}_dataloader.dataset.horizon', _dataset_horizon(loader.get('dataset')),
                   value)


def _dataset_horizon(dataset):
    return dataset.get('horizon') if hasattr(dataset, 'items') and 'type' in dataset else None


def refuse_contradicting_horizons(cfg, horizon: int, test_horizon: int) -> None:
    """A config FILE whose dataset (or model) horizon contradicts its top-level ``horizon``
    (``train_dataloader.dataset.horizon=4`` under ``horizon = 3`` trained T=3 without a word)
    is refused naming both. A base file's copy of its own ``horizon`` (the stale value this
    function's caller exists to overwrite, e.g. 3 under a child's ``horizon = 6``) passes: a
    value is a contradiction only when no file of the ``_base_`` chain has it as ``horizon`` /
    ``test_horizon``. Configs not read from a file (no chain to tell) are not compared."""
    path = cfg.filename
    if not path or not Path(path).is_file():
        return
    chain = None
    for key, value, written in _horizon_places(cfg, horizon, test_horizon):
        if value is None or value == written:
            continue
        chain = _chain_horizons(Path(path)) if chain is None else chain
        if value in chain:
            continue
        top = 'test_horizon' if key.startswith('test_') else 'horizon'
        raise ValueError(f'{path}: {key}={value!r} contradicts {top}={written} (the horizon is '
                         f'set in one place: {top} is written into the model and the datasets, '
                         f'so this run would use {written}); set {top} = {value} (or --cfg-options '
                         f'{top}={value}; train.py / test.py: --horizon {value}) instead of '
                         f'{key}, or remove {key}')


def _chain_horizons(path: Path) -> set:
    """The literal top-level ``horizon`` / ``test_horizon`` values of ``path`` and its
    ``_base_`` files, each read alone (a stale dataset horizon is one of them)."""
    values = set()
    for file in config_chain(path):
        own = _own_top_level(file)
        values.update(v for k, v in own.items() if k in ('horizon', 'test_horizon')
                      and isinstance(v, int) and not isinstance(v, bool))
    return values


PREDEFINED_VARIABLE = re.compile(r'\{\{\s*file(Dirname|Basename|BasenameNoExtension|Extname)'
                                 r'\s*\}\}')  # mmengine's Config._substitute_predefined_vars


def config_bases(file: Path) -> list:
    """The ``_base_`` files of the config ``file`` as mmengine reads them (``Config.
    _get_base_files``, which evaluates the ``_base_`` expression; a .json / .yaml config as
    mmengine parses it, ``{{...}}`` references replaced), each beside ``file`` as named (links
    not resolved); package bases (``mmaction::...``) left out. Its predefined variables
    (``{{ fileDirname }}``...) are filled in first, as mmengine does. Raises what reading it
    raises."""
    import tempfile
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmengine.config import Config

    def bases_of(source: Path) -> list:
        if source.suffix == '.py':
            return Config._get_base_files(str(source))
        found = mapping_config(source).get('_base_', [])
        return found if isinstance(found, list) else [found]

    found = None
    if PREDEFINED_VARIABLE.search(Path(file).read_text(encoding='utf-8')):
        with tempfile.TemporaryDirectory() as folder, contextlib.suppress(Exception):
            filled = Path(folder) / Path(file).name
            Config._substitute_predefined_vars(str(file), str(filled))
            found = bases_of(filled)  # a file that does not read so: its own error below
    found = bases_of(file) if found is None else found
    return [Path(os.path.abspath(os.path.join(os.path.dirname(file), str(base))))
            for base in found if '::' not in str(base)]


def config_chain(path, literal: bool = False) -> list:
    """``path`` and the files of its ``_base_`` chain, each once, ``path`` first then breadth
    first; files that do not exist and package bases (``mmaction::...``, which set no variable
    of this project) are left out. The one walk of a config's chain, with two readers of a
    file's ``_base_``, both needed:

    * default: mmengine's own (``Config._get_base_files``, which evaluates the ``_base_``
      expression), for a config whose code mmengine runs anyway (the user's, the
      repository's): a ``_base_`` built at run time (``['../' + 'x.py']``) is followed, so the
      horizon and inert-variable checks see every file the run reads (a literal reader would
      miss that base: its stale dataset horizon was then refused as a contradiction);
    * ``literal``: :func:`_literal_bases`, WITHOUT running code, for a config that may be
      someone else's (:func:`read_config_safely`); a ``_base_`` outside the literal subset
      ends its branch.

    Either way each base is found as mmengine finds it: beside the file as named (a linked
    base's own bases beside the link, links not resolved), from the file mmengine is given (a
    linked top file: its target, :func:`read_config_file`); each is listed as the file it is.
    A file whose ``_base_`` cannot be read (a syntax error, not UTF-8, no list of names) ends
    its branch: the reader of the file (mmengine, :func:`literal_config`) names what is wrong."""
    bases = _literal_bases if literal else config_bases
    files, todo = [], [_config_source(path)]
    while todo:
        file = todo.pop(0)
        real = Path(os.path.realpath(file))
        if real in files or not file.is_file():
            continue
        files.append(real)
        try:
            todo += bases(file)
        except (UnicodeDecodeError, SyntaxError, ValueError, OSError, AttributeError):
            continue
    return files


def _config_source(path) -> Path:
    """The file mmengine is given for ``path`` (:func:`read_config_file`): a link's target,
    else the path made absolute (not resolved: its bases are found beside it)."""
    return Path(os.path.realpath(path) if Path(path).is_symlink() else os.path.abspath(path))


def _own_top_level(file: Path) -> dict:
    """The literal top-level assignments of one config file, without its bases, for the checks
    of a config mmengine runs anyway (:func:`literal_assignments` with ``strict=False``: a value
    it cannot read is left out)."""
    return dict(_own_values(str(file), Path(file).read_bytes()))


@functools.lru_cache(maxsize=1024)
def _own_values(file: str, content: bytes) -> dict:
    """:func:`_own_top_level` once per file and content (the every-config checks read each
    shared base file many times)."""
    return {name: value for name, value in literal_assignments(Path(file), strict=False).items()
            if _fully_read(value)}


class Unread:
    """A config value that is not read WITHOUT running code (:data:`LITERAL_SUBSET`: a call of
    a builtin, an attribute, a lambda inside a value, a value too large to compute here, or a
    value computed from one of them): ``where`` says at which file:line and what
    (``'x.py:5, a call of range'``). A row check that needs such a value refuses naming it
    (``protocol.results``); any other is named in a note. ``UNREAD``: one without a place (the
    checks of a config mmengine runs anyway, :func:`literal_assignments` with ``strict=False``)."""

    def __init__(self, what: str = '', line=None, file=None):
        self.what, self.line, self.file = what, line, file

    @property
    def where(self) -> str:
        place = f'{self.file}:{self.line}' if self.file else f'line {self.line}'
        return f'{place}, {self.what}' if self.what else place

    def __repr__(self) -> str:
        return f'<not read without running the config: {self.where}>' if self.what \
            else '<not a literal>'

    def __deepcopy__(self, memo):  # one object: the copies of a config name the same place
        return self

    def __copy__(self):
        return self


UNREAD = Unread()


def _fully_read(value) -> bool:
    if isinstance(value, dict):
        return all(_fully_read(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_fully_read(v) for v in value)
    return not isinstance(value, Unread)


class NeedsUnread(ValueError):
    """A check needs a config value that is not read without running code (:class:`Unread`)."""


def require_read(cfg, key: str, why: str) -> None:
    """:class:`NeedsUnread` naming ``key`` (dotted), the value on its way that is not read
    (file:line, construct) and ``why`` the check needs it; a key that is absent or under a
    value that is no dict is left to the check."""
    value, parts = cfg, key.split('.')
    for depth in range(len(parts) + 1):
        if isinstance(value, Unread):
            name = '.'.join(parts[:depth])
            raise NeedsUnread(f'{name} is not read without running the config '
                              f'({value.where}){f", so neither is {key}" * (name != key)}, '
                              f'which {why}; write it as a literal, or keep the config in the '
                              "repository's configs/ folder")
        if depth == len(parts) or not hasattr(value, 'get'):
            return
        value = value.get(parts[depth])


def merge_over_unread(child: dict, base) -> dict:
    """``child`` (a config's own values, or its options as nested dicts) with each dict it sets
    over a base value that is not read (:class:`Unread`) replaced by that value: mmengine
    merges the dict into whatever the run computes, unknown here (``_delete_=True``: the dict
    itself)."""
    out = {}
    for key, value in child.items():
        below = base.get(key) if isinstance(base, dict) else None
        if isinstance(value, dict) and not value.get('_delete_'):
            value = below if isinstance(below, Unread) else merge_over_unread(value, below)
        out[key] = value
    return out


def options_over_unread(cfg, options: dict) -> dict:
    """``options`` (dotted keys, mmengine's ``merge_from_dict``) without those set inside a
    value of ``cfg`` that is not read or merged into one (:func:`merge_over_unread`): that
    value stays :class:`Unread`."""
    kept = {}
    for key, value in options.items():
        parts, node = key.split('.'), cfg
        for part in parts[:-1]:
            node = node.get(part) if hasattr(node, 'get') else node[int(part)] \
                if isinstance(node, list) and part.isdigit() and int(part) < len(node) else None
            if isinstance(node, Unread):
                break
        below = node.get(parts[-1]) if hasattr(node, 'get') else None
        if not isinstance(node, Unread) and not (
                isinstance(below, Unread) and isinstance(value, dict)
                and not value.get('_delete_')):
            kept[key] = value
    return kept


def unread_values(value, prefix: str = '') -> list:
    """(dotted key, :class:`Unread`) of every value of ``value`` (a config's dict) not read
    without running code, outermost first: ``[('custom_hooks', <...>)]``."""
    if isinstance(value, Unread):
        return [(prefix, value)]
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, (list, tuple)) else ()
    return [found for key, item in items
            for found in unread_values(item, f'{prefix}.{key}' if prefix else str(key))]


# The subset of Python a config outside the repository's configs/ folder is read in, WITHOUT
# running its code (results rows name configs of other people's machines). docs/protocol.md
# ("Which configs a results file can name") lists it for users.
LITERAL_SUBSET = (
    'top-level statements: name = value (x = y = value, x, y = a, b), name: type = value (a '
    'type: a name, a text, list[...]-style or X | None), name += value (-= *= /= //=) on a '
    'number or text, the one _base_ = [...] and docstrings; values, computed as Python '
    'computes them (what Python refuses is refused with its words): literals, lists, tuples, '
    'sets, dicts, comprehensions, dict(...)/list(...)/tuple(...), names assigned earlier in '
    'the file, _base_.x.y, {{_base_.x}} as a whole value, f-strings, operators, comparisons, '
    'and/or, conditions, subscripts, .items()/.keys()/.get()/.split()... of texts, lists and '
    'dicts; not computed, so left unread (a check that needs the value refuses naming it, '
    'a note names the others): a call of a builtin such as range() or len(), an attribute, a '
    'lambda inside a value, a value too large to compute here, and what is computed from '
    'one (a top-level lambda is left out, as mmengine leaves it); anything else (another '
    'call, an import, if/for/try, a store into an object) is refused, never guessed')


def literal_assignments(file: Path, base: dict | None = None, strict: bool = True) -> dict:
    """The top-level assignments of one config file (its bases not merged) read WITHOUT running
    its code, in :data:`LITERAL_SUBSET`: ``base`` is its bases' merged values (``_base_.x``,
    ``{{_base_.x}}``). A value is computed as Python computes it (what Python refuses is
    refused), or :class:`Unread` naming its line and construct (a call of a builtin, an
    attribute...). Anything else (another statement, a call that may change anything, a store
    into an object, an import, a name not assigned earlier, ``{{$ENV:default}}``) is refused:
    ``ValueError`` naming file, line and the construct. ``strict=False`` (the checks of a
    config mmengine runs anyway): such a statement makes the names it stores :data:`UNREAD`
    instead, and every name set so far too when it may change them (:func:`_stores_only_names`).
    A .json / .yaml file is read with the safe parsers (no tag builds an object)."""
    import ast
    file = Path(file)
    try:
        text, placeholders = config_text(file)
    except ValueError:
        if strict:
            raise
        return {}  # {{$NAME:default}}: nothing of the file is known without the run
    base = base or {}
    names: dict = {} if file.suffix == '.py' else _safe_mapping(file, text)
    tree = _parse_config(file, text, placeholders) if file.suffix == '.py' else None
    _ITEMS_LEFT[0] = SIZE_BOUND  # one bound for the whole file: its statements cannot add up
    for node in tree.body if tree else ():
        try:
            _read_statement(node, names, base)
        except ValueError as error:
            if strict:
                line = getattr(error, 'line', None) or node.lineno
                refused = isinstance(error, _Refused)
                for key, name in placeholders.items():  # mmengine's text of {{_base_.x}}
                    error = str(error).replace(repr(key), f'{{{{_base_.{name}}}}}')
                if refused:  # computed as the run computes it: the run stops there
                    raise ValueError(f'{file}:{line}: {error}; mmengine stops there too (the '
                                     'config does not run): expected a config that runs'
                                     ) from None
                raise ValueError(f'{file}:{line}: {error}; a config outside the '
                                 "repository's configs/ folder is read without running its "
                                 f'code, in this subset: {LITERAL_SUBSET}. Write the value as '
                                 "a literal, or keep the config in the repository's configs/ "
                                 'folder') from None
            stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                      and not isinstance(n.ctx, ast.Load)}
            if _stores_only_names(node):
                names.update(dict.fromkeys(stored, UNREAD))  # e.g. an `if` of assignments
            else:  # a call, a store into an object, an import...: any name may have changed
                names = {name: UNREAD for name in {*names, *stored}}
    names = {name: value for name, value in names.items()  # what mmengine keeps of them
             if name != '_base_' and name != '_deprecation_' and not name.startswith('__')
             and value is not FUNCTION}
    for _, unread in unread_values(names):  # the values not read: at their file's line
        unread.file = unread.file or (file if unread.what else None)
    from mmengine.config.config import RESERVED_KEYS
    reserved = sorted(set(names) & set(RESERVED_KEYS))
    if reserved:  # mmengine: KeyError "filename is reserved for config file"
        raise ValueError(f'{file}: {reserved[0]} is a name mmengine keeps for the config itself '
                         f'({", ".join(RESERVED_KEYS)}); expected another name')
    return _with_placeholders(file, names, placeholders, base, strict, (text, tree))


def _stores_only_names(node) -> bool:
    """A statement outside :data:`LITERAL_SUBSET` that can change no name but those it stores
    as plain names (an ``if``/``for``/``while`` of assignments without calls): the names set
    before it keep their values (``strict=False``)."""
    import ast
    binders = (ast.Call, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Try,
               ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Match,
               ast.With, ast.AsyncWith, ast.ExceptHandler)
    return not any(isinstance(part, binders) or isinstance(part, (ast.Attribute, ast.Subscript))
                   and not isinstance(part.ctx, ast.Load) for part in ast.walk(node))


def _parse_config(file: Path, text: str, placeholders=None):
    """``ast.parse`` of a config's text (``placeholders``: mmengine's ``{{_base_.x}}`` were
    replaced in it, :func:`config_text`); what does not parse is refused naming the file."""
    import ast
    if '\0' in text:  # Python: "source code string cannot contain null bytes" (no line)
        line = text[:text.index('\0')].count('\n') + 1
        raise ValueError(f'{file}: line {line}: a NUL character; expected a config file of text '
                         '(Python refuses null bytes in source code)')
    try:
        return ast.parse(text, str(file))
    except SyntaxError as error:
        line = f'line {error.lineno}: ' if error.lineno else ''
        how = (' once mmengine has replaced its {{_base_.x}} placeholders (it writes each as a '
               'quoted text, also inside a string or a comment)' if placeholders else '')
        raw = Path(file).read_text(encoding='utf-8')
        if PREDEFINED_VARIABLE.search(raw) and _parses(raw):  # the filled text breaks
            how = (' once mmengine has filled in {{ fileDirname }} and its other predefined '
                   f'variables (the file {os.path.abspath(file)!r}: a quote or a backslash in '
                   'its folder or name changes the text they are written into); expected a '
                   'folder and file name without them, or the path written out')
        raise ValueError(f'{file}: {line}{error.msg}; the config file does not parse as '
                         f'Python{how}') from None
    except (ValueError, RecursionError, MemoryError) as error:
        raise ValueError(f'{file}: does not parse as Python ({error})') from None


def _parses(text: str) -> bool:
    import ast
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _read_statement(node, names: dict, base: dict) -> None:
    """One top-level statement of :data:`LITERAL_SUBSET` into ``names`` (``ValueError``
    saying why when it is outside)."""
    import ast
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return  # a docstring
    if isinstance(node, ast.Assign):
        if getattr(node.targets[0], 'id', None) == '_base_':
            return  # the base list (literal_config): mmengine removes the statement (every target)
        value = _statement_value(node.value, names, base)
        for target in node.targets:
            _bind_literal(target, value, names)
        return
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) \
            and getattr(node.target, 'id', None) == '_base_':
        _bind_literal(node.target, None, names)  # refused: no base is read from it
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        _check_annotation(node.annotation, names)
        if node.value is not None:
            names[node.target.id] = _statement_value(node.value, names, base)
        return
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        if node.target.id not in names:  # the run: NameError
            raise ValueError(f'{node.target.id} is not assigned earlier in the file')
        current = names[node.target.id]
        if isinstance(current, (list, dict)):
            raise ValueError(f'{node.target.id} {_SYMBOLS.get(type(node.op).__name__, "?")}= on a '
                             f'{type(current).__name__}, which changes it in place')
        names[node.target.id] = _literal_arithmetic(node, current,
                                                    _literal(node.value, names, base))
        return
    raise ValueError(f'a statement outside the subset ({type(node).__name__})')


def _check_annotation(node, names: dict) -> None:
    """A top-level annotation is evaluated when the config runs (``x: f() = 1`` calls ``f``,
    ``x: [][0] = 1`` stops it): only a type is read, i.e. a text, a name assigned earlier or a
    builtin type, ``None``, ``X[...]`` of those (and ``...``) on a builtin type and ``X | Y``
    of builtin types, such ``X[...]`` or ``None`` (not both ``None``); anything else is
    refused."""
    import ast
    import builtins

    def builtin_type(part) -> bool:
        return isinstance(part, ast.Name) and part.id not in names \
            and isinstance(getattr(builtins, part.id, None), type)

    def generic(part) -> bool:  # list[int], tuple[int, ...], dict[str, list[int]]
        items = part.slice.elts if isinstance(part.slice, ast.Tuple) else [part.slice]
        return isinstance(part.value, ast.Name) and part.value.id in GENERIC_TYPES \
            and builtin_type(part.value) and all(
                plain(item) or isinstance(item, ast.Constant) and item.value is Ellipsis
                for item in items)

    def union_side(side) -> bool:  # what Python's `|` of types takes: a type, a union, None
        return builtin_type(side) or isinstance(side, ast.Subscript) and generic(side) \
            or isinstance(side, ast.BinOp) and plain(side) or none(side)

    def none(side) -> bool:
        return isinstance(side, ast.Constant) and side.value is None

    def plain(part) -> bool:
        if isinstance(part, ast.Constant):
            return part.value is None or isinstance(part.value, str)
        if isinstance(part, ast.Name):
            return part.id in names or builtin_type(part)
        if isinstance(part, ast.Subscript):
            return generic(part)
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.BitOr):
            sides = (part.left, part.right)  # None | None: Python refuses it
            return all(map(union_side, sides)) and not all(map(none, sides))
        return False

    if not plain(node):
        raise ValueError(f'an annotation ({ast.unparse(node)[:60]}) that is not a plain type: '
                         'Python evaluates a top-level annotation when the config runs, so it '
                         'may stop or change the run; expected a type (x: int = 6) or none')


GENERIC_TYPES = ('list', 'dict', 'tuple', 'set', 'frozenset', 'type')  # list[int] and alike
FUNCTION = object()  # a top-level lambda: mmengine drops function values from a config


def _statement_value(node, names: dict, base: dict):
    """The value a top-level assignment gives its names: :data:`FUNCTION` for a lambda (or a
    name holding one), which mmengine leaves out of the config (:func:`literal_assignments`
    drops it); else :func:`_literal`."""
    import ast
    if isinstance(node, ast.Lambda) or isinstance(node, ast.Name) \
            and names.get(node.id) is FUNCTION:
        _check_pure(node, names)
        return FUNCTION
    return _literal(node, names, base)


def _bind_literal(target, value, names: dict) -> None:
    """``names[target] = value`` for a name, element by element for a tuple/list of names
    given a tuple/list value of its length (an unread value: each name unread); any other
    target (``x[0] = ...``, ``x.a = ...``, ``*rest``, ``_base_``) is refused."""
    import ast
    if isinstance(target, ast.Name) and target.id == '_base_':
        raise ValueError('_base_ assigned with another name or in another form (mmengine reads '
                         'bases only from _base_ = [...] on its own, and none from this '
                         "statement); expected _base_ = ['<config>', ...] on its own")
    if isinstance(target, ast.Name):
        names[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)) and all(
            isinstance(item, (ast.Name, ast.Tuple, ast.List)) for item in target.elts):
        if isinstance(value, Unread):
            parts = [value] * len(target.elts)
        elif isinstance(value, (list, tuple)) and len(value) == len(target.elts):
            parts = value
        else:
            raise ValueError(f'{len(target.elts)} names assigned from {value!r}')
        for item, part in zip(target.elts, parts):
            _bind_literal(item, part, names)
    else:
        raise ValueError(f'a store into an object or a starred name ({ast.unparse(target)[:60]})')


CONSTRUCTORS = {'dict': dict, 'list': list, 'tuple': tuple}  # the calls of the subset
# builtins that change nothing when called on values (no attribute passed): their calls are
# not computed, the value is left unread (any other call may run any code: refused)
PURE_BUILTINS = frozenset((
    'abs', 'all', 'any', 'bin', 'bool', 'chr', 'complex', 'divmod', 'enumerate', 'filter',
    'float', 'format', 'frozenset', 'hex', 'int', 'isinstance', 'len', 'map', 'max', 'min',
    'oct', 'ord', 'pow', 'range', 'repr', 'reversed', 'round', 'set', 'sorted', 'str', 'sum',
    'zip'))
# methods of texts, lists and dicts that change nothing and make nothing large: computed
READ_METHODS = frozenset((
    'items', 'keys', 'values', 'get', 'copy', 'count', 'index', 'upper', 'lower', 'strip',
    'lstrip', 'rstrip', 'split', 'rsplit', 'join', 'startswith', 'endswith', 'title',
    'capitalize'))
SPREAD = object()  # the key of a ``**value`` item of a dict display
TEXTS = (str, int, float, complex, bool, type(None), bytes)  # what an f-string prints as read
SIZE_BOUND = 10 ** 5  # longer texts / lists and comprehensions of more items are not computed
_ITEMS_LEFT = [SIZE_BOUND]  # the items the comprehensions of the file read may still make
DIGITS_BOUND = 4300  # Python's limit for writing an int as text (sys.get_int_max_str_digits)


class _Refused(ValueError):
    """What Python refuses when it computes an expression (its own words)."""


def _literal(node, names: dict, base: dict):
    """The value of expression ``node`` read WITHOUT running code (:data:`LITERAL_SUBSET`),
    computed as Python computes it on the values read: what Python refuses (``1 / 0``,
    ``'abc'[5]``, ``'a' % 1``) is ``ValueError`` with its words; an :class:`Unread` for what
    it does not compute (a call of a builtin, an attribute, a lambda inside a value, a value
    too large, or a value computed from an unread one); ``ValueError`` for what may change or
    run anything (another call, a walrus) and a name not assigned earlier."""
    try:
        value = _literal_value(node, names, base)
    except _Refused as error:
        if getattr(error, 'line', None) is None:
            error.line = getattr(node, 'lineno', None)
        raise
    if isinstance(value, int) and not isinstance(value, bool) \
            and value.bit_length() > DIGITS_BOUND * 3:
        try:
            str(value)
        except ValueError as error:
            raise _python_refuses(node, error, 'mmengine writes the config as text when it '
                                               'runs') from None
    return value


def _python_refuses(node, error, why: str = '') -> ValueError:
    import ast
    refused = _Refused(f'{_construct(node)} ({ast.unparse(node)[:60]}): Python refuses it '
                       f'({type(error).__name__}: {error}' + (f'; {why}' if why else '') + ')')
    refused.line = getattr(node, 'lineno', None)
    return refused


def _python(node, function, *args):
    """``function(*args)`` as Python computes it; what Python refuses is refused naming
    ``node``."""
    try:
        return function(*args)
    except (TypeError, ValueError, ArithmeticError, LookupError, RecursionError,
            AttributeError) as error:
        raise _python_refuses(node, error) from None


def _not_computed(node, what: str) -> Unread:
    return Unread(what, getattr(node, 'lineno', None))


def _first_unread(*values):
    return next((value for value in values if isinstance(value, Unread)), None)


def _literal_value(node, names: dict, base: dict):
    import ast
    import operator
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = _literal_items(node.elts, names, base)
        if isinstance(items, Unread) or isinstance(node, ast.List):
            return items
        if isinstance(node, ast.Set) and _first_unread(*items):
            return _first_unread(*items)
        return tuple(items) if isinstance(node, ast.Tuple) else _python(node, set, items)
    if isinstance(node, ast.Dict):
        return _literal_dict(node, [(SPREAD if key is None else _literal(key, names, base),
                                     _literal(value, names, base))
                                    for key, value in zip(node.keys, node.values)])
    if isinstance(node, ast.Call):
        return _literal_call(node, names, base)
    if isinstance(node, ast.BinOp):
        return _literal_arithmetic(node, _literal(node.left, names, base),
                                   _literal(node.right, names, base))
    if isinstance(node, ast.Name):
        if node.id == '_base_' and node.id not in names:  # mmengine: all the bases' values
            return _not_computed(node, '_base_ alone (the values of all its bases; one of them '
                                       'is read as _base_.x)')
        if node.id not in names:
            raise ValueError(f'{node.id} is not assigned earlier in the file')
        if names[node.id] is FUNCTION:
            return _not_computed(node, f'a function ({node.id}) inside a value')
        return names[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _literal(node.operand, names, base)
        ops = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
               ast.Invert: operator.invert}
        return value if isinstance(value, Unread) else _python(node, ops[type(node.op)], value)
    if isinstance(node, ast.BoolOp):  # Python's: the first false (and) / true (or) operand
        for part in node.values:
            value = _literal(part, names, base)
            if isinstance(value, Unread) or part is node.values[-1] \
                    or _python(node, bool, value) == isinstance(node.op, ast.Or):
                return value
    if isinstance(node, ast.Compare):
        return _literal_compare(node, names, base)
    if isinstance(node, ast.IfExp):  # only the branch taken is computed, as Python does
        test = _literal(node.test, names, base)
        if isinstance(test, Unread):
            _check_pure(node, names)
            return test
        return _literal(node.body if _python(node, bool, test) else node.orelse, names, base)
    if isinstance(node, ast.Subscript):
        value, index = _literal(node.value, names, base), _literal(node.slice, names, base)
        return _first_unread(value, index) or _python(node, operator.getitem, value, index)
    if isinstance(node, ast.Slice):
        parts = [None if part is None else _literal(part, names, base)
                 for part in (node.lower, node.upper, node.step)]
        return _first_unread(*parts) or slice(*parts)
    if isinstance(node, ast.Attribute) and _root_name(node) == '_base_':
        return _base_value(node, base)
    if isinstance(node, ast.JoinedStr):
        return _literal_fstring(node, names, base)
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp)):
        return _literal_comprehension(node, names, base)
    if isinstance(node, ast.GeneratorExp):  # mmengine cannot copy one into a config
        _check_pure(node, names)
        raise ValueError('a generator expression as a value (mmengine refuses it: it cannot '
                         'copy a generator); expected a list [...]')
    _check_pure(node, names)  # an attribute, a lambda inside a value: read by the run only
    if isinstance(node, (ast.Attribute, ast.Lambda)):
        return _not_computed(node, f'{_construct(node)} ({ast.unparse(node)[:40]})')
    raise ValueError(f'{_construct(node)} ({ast.unparse(node)[:60]}), outside the subset')


def _literal_items(elements: list, names: dict, base: dict):
    """The items of a list / tuple / set display (``*x`` spread as Python spreads it); an
    :class:`Unread` when a spread value is not read."""
    import ast
    items = []
    for element in elements:
        if not isinstance(element, ast.Starred):
            items.append(_literal(element, names, base))
            continue
        value = _literal(element.value, names, base)
        if isinstance(value, Unread):
            return value
        items += _python(element, list, value)
    return items


def _literal_compare(node, names: dict, base: dict):
    """``a < b < c`` as Python computes it (each operand once, stopping at the first false)."""
    import ast
    import operator
    ops = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_,
           ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
           ast.NotIn: lambda a, b: a not in b}
    left = _literal(node.left, names, base)
    result = True
    for op, right_node in zip(node.ops, node.comparators):
        right = _literal(right_node, names, base)
        if _first_unread(left, right):
            _check_pure(node, names)
            return _first_unread(left, right)
        if isinstance(op, (ast.Is, ast.IsNot)) and not all(
                value is None or isinstance(value, bool) for value in (left, right)):
            return _not_computed(node, f'an identity comparison ({ast.unparse(node)[:40]})')
        result = _python(node, ops[type(op)], left, right)
        if not _python(node, bool, result):
            return result
        left = right
    return result


def _literal_comprehension(node, names: dict, base: dict):
    """A list / set / dict comprehension computed as Python computes it over values read (the
    first iterable in the file's names, the rest in the comprehension's own); an
    :class:`Unread` when an iterable or a condition is not read or it runs over more than
    :data:`SIZE_BOUND` items."""
    import ast
    import collections
    out = []

    class Unknown(Exception):
        pass

    def run(generators, scope):
        generator = generators[0]
        iterable = _literal(generator.iter, scope, base)
        if isinstance(iterable, Unread):
            raise Unknown(iterable)
        for item in _python(node, list, iterable):
            _ITEMS_LEFT[0] -= 1
            if _ITEMS_LEFT[0] < 0:  # one bound for the file's comprehensions together
                raise Unknown(_not_computed(node, f'a comprehension of more than {SIZE_BOUND} '
                                                  'items (not computed here)'))
            inner = collections.ChainMap({}, scope)  # the comprehension's own names
            _bind_literal(generator.target, item, inner)
            for condition in generator.ifs:
                test = _literal(condition, inner, base)
                if isinstance(test, Unread):
                    raise Unknown(test)
                if not _python(condition, bool, test):
                    break
            else:
                if len(generators) > 1:
                    run(generators[1:], inner)
                elif isinstance(node, ast.DictComp):
                    out.append((_literal(node.key, inner, base), _literal(node.value, inner, base)))
                else:
                    out.append(_literal(node.elt, inner, base))

    try:
        run(node.generators, names)
    except Unknown as unknown:
        _check_pure(node, names)
        return unknown.args[0]
    if isinstance(node, ast.ListComp):
        return out
    if isinstance(node, ast.SetComp):
        return _first_unread(*out) or _python(node, set, out)
    return _literal_dict(node, out)


def _literal_fstring(node, names: dict, base: dict) -> str:
    """An f-string of texts and numbers (with a conversion or a format, as Python formats
    them); one printing another value (a container) is :class:`Unread`."""
    import ast
    parts = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            parts.append(part.value)
            continue
        value = _literal(part.value, names, base)
        spec = '' if part.format_spec is None else _literal(part.format_spec, names, base)
        if _first_unread(value, spec):
            return _first_unread(value, spec)
        if not isinstance(value, TEXTS):
            _check_pure(node, names)
            return _not_computed(node, f'an f-string printing {ast.unparse(part.value)[:40]}, '
                                       f'a {type(value).__name__}')
        if re.search(r'\d{7}', spec):
            return _not_computed(node, f'an f-string of width {spec} (not computed here)')
        conversion = {-1: lambda v: v, 115: str, 114: repr, 97: ascii}[part.conversion]
        parts.append(_python(node, format, conversion(value), spec))
    return ''.join(map(str, parts))


def _construct(node) -> str:
    import ast
    words = {ast.Subscript: 'a subscript', ast.ListComp: 'a comprehension',
             ast.SetComp: 'a comprehension', ast.DictComp: 'a comprehension',
             ast.IfExp: 'a condition', ast.Compare: 'a comparison', ast.BoolOp: 'and/or',
             ast.UnaryOp: 'a unary operation', ast.Set: 'a set', ast.Starred: 'a starred item',
             ast.Attribute: 'an attribute', ast.Lambda: 'a lambda inside a value',
             ast.Call: 'a call', ast.JoinedStr: 'an f-string', ast.BinOp: 'an operation',
             ast.Dict: 'a dict', ast.Slice: 'a slice', ast.Tuple: 'a tuple', ast.List: 'a list'}
    return words.get(type(node), f'an expression ({type(node).__name__})')


def _root_name(node):
    """``x`` of ``x.a.b`` (None when the chain starts elsewhere)."""
    import ast
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _base_value(node, base: dict):
    """``_base_.a.b``: the bases' merged value (mmengine: AttributeError when it is not
    there, refused alike)."""
    import ast
    chain = []
    while isinstance(node, ast.Attribute):
        chain.insert(0, node.attr)
        node = node.value
    from mmengine.config import ConfigDict
    value = base
    for depth, attr in enumerate(chain):
        if isinstance(value, Unread):
            return value
        if isinstance(value, dict) and hasattr(ConfigDict, attr):  # _base_.values, .copy...
            return Unread(f'_base_.{".".join(chain[:depth + 1])}, which mmengine reads as the '
                          f'dict method {attr}() (a key of that name is read as '
                          f'{{{{_base_.{".".join(chain[:depth + 1])}}}}})',
                          getattr(node, 'lineno', None))
        if not isinstance(value, dict) or attr not in value:
            raise ValueError(f'_base_.{".".join(chain[:depth + 1])} is no value of its _base_ '
                             'files')
        value = value[attr]
    return value


def _check_pure(node, names: dict) -> None:
    """``ValueError`` unless expression ``node`` cannot change anything: no call but the
    constructors and :data:`PURE_BUILTINS` (given no attribute), no walrus, every name
    assigned earlier or bound inside it."""
    import ast
    inner = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
             and not isinstance(n.ctx, ast.Load)}
    inner |= {a.arg for n in ast.walk(node) if isinstance(n, ast.Lambda)
              for a in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs,
                        *filter(None, (n.args.vararg, n.args.kwarg))]}
    called = set()  # the constructors' own names
    for part in ast.walk(node):
        if isinstance(part, ast.Call):
            _check_callable(part, names)
            called.add(id(part.func))
        if isinstance(part, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)):
            raise ValueError(f'a {type(part).__name__} expression, which sets or runs code')
        if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Load) \
                and id(part) not in called and part.id not in names and part.id not in inner \
                and part.id != '_base_':
            raise ValueError(f'{part.id} is not assigned earlier in the file')


def _check_callable(node, names: dict) -> None:
    """``ValueError`` unless call ``node`` changes nothing: a constructor or one of
    :data:`PURE_BUILTINS` not rebound by the file, or a top-level lambda, given no attribute
    (a method such as ``x.append`` passed to ``map`` changes ``x``)."""
    import ast
    if isinstance(node.func, ast.Attribute) and node.func.attr in READ_METHODS:
        return
    name = node.func.id if isinstance(node.func, ast.Name) else None
    if name in names and names[name] is not FUNCTION:
        raise ValueError(f'a call of {name}, a {type(names[name]).__name__} (Python refuses '
                         'it: not callable)')
    if name not in names and name not in {*CONSTRUCTORS, *PURE_BUILTINS}:
        raise ValueError(f'a call ({ast.unparse(node.func)[:60]}), which may run any code')
    parts = [part for argument in [*node.args, *node.keywords] for part in ast.walk(argument)]
    called = {id(part.func) for part in parts if isinstance(part, ast.Call)}  # list(d.items()):
    passed = [part for part in parts  # an inner call is checked as a call of its own
              if isinstance(part, ast.Attribute) and _root_name(part) != '_base_'
              and id(part) not in called]
    if passed:
        raise ValueError(f'a call of {name} given an attribute ({ast.unparse(passed[0])[:40]}), '
                         'which may run any code')


def _literal_call(node, names: dict, base: dict):
    """``dict(...)``, ``list(x)``, ``tuple(x)`` (builtins the file did not rebind) of values
    read, called as Python calls them (a call Python refuses is refused with its words); a
    call of one of :data:`PURE_BUILTINS` or a top-level lambda is :class:`Unread` (its
    arguments are computed first); any other call is refused: it may run any code."""
    import ast
    _check_callable(node, names)
    method = isinstance(node.func, ast.Attribute)
    name = node.func.attr if method else node.func.id
    owner = _literal(node.func.value, names, base) if method else None
    args = _literal_items(node.args, names, base)
    keywords = {}
    for item in node.keywords:
        value = _literal(item.value, names, base)
        if isinstance(value, Unread) and item.arg is None:
            args = value
            continue
        if item.arg is None and not isinstance(value, dict):
            raise _python_refuses(node, TypeError(f'{name}(**{value!r}): not a mapping'))
        for key, part in (value.items() if item.arg is None else [(item.arg, value)]):
            if not isinstance(key, str) or key in keywords:
                raise _Refused(f'{name}() gets the key {key!r} '
                               + ('twice' if key in keywords else 'through ** (not a text)')
                               + ' (Python refuses this call): expected each key once, '
                               'as a text')
            keywords[key] = part
    if method:  # a method of READ_METHODS on a text, list or dict read: computed
        unread = _first_unread(owner, args) or next(
            (found for _, found in unread_values([args, keywords])), None)
        if unread:
            return unread
        function = _python(node, getattr, owner, name)  # (5).split: Python refuses it
        if type(owner) not in (str, bytes, list, tuple, dict, set):
            return _not_computed(node, f'a call of .{name} of a {type(owner).__name__}')
        if name == 'join' and args and isinstance(args[0], (list, tuple)) \
                and len(owner) * len(args[0]) > SIZE_BOUND:  # 'a' * 10**6 between 10**6 items
            return _not_computed(node, f'a call of .{name}, too large to compute here')
        return _python(node, function, *args, **keywords)
    if name not in CONSTRUCTORS or name in names:
        return _not_computed(node, f'a call of {name}')
    if isinstance(args, Unread):
        return args
    unread = next((found for _, found in unread_values(args)), None) \
        if name == 'dict' else _first_unread(*args)
    if unread:
        return unread
    try:
        return CONSTRUCTORS[name](*args, **keywords)
    except (TypeError, ValueError) as error:
        raise _Refused(f'{ast.unparse(node)[:60]} (Python refuses it: {error})') from None


def config_text(file: Path) -> tuple:
    """(text, placeholders) of a config file as mmengine evaluates it: its predefined variables
    (``{{ fileDirname }}``, ``{{ fileExtname }}``, ...) filled in and each ``{{_base_.x}}``
    replaced by a placeholder text, by mmengine's own substitutions (``placeholders``: text ->
    ``'x'``, :func:`_with_placeholders`). A ``{{$NAME:default}}`` (an environment variable of
    the run, unknown here) is refused naming the line. Not UTF-8: refused naming the line."""
    import tempfile
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmengine.config import Config
    check_utf8(Path(file))
    with tempfile.TemporaryDirectory() as folder:
        filled = str(Path(folder) / Path(file).name)
        Config._substitute_predefined_vars(str(file), filled)
        text = Path(filled).read_text(encoding='utf-8')
        found = next((match for match in ENVIRONMENT_PLACEHOLDER.finditer(text)
                      if _in_values(match, _value_spans(Path(file), text))), None)
        if found:  # one in a comment or a docstring changes no value: left as mmengine leaves it
            line = text[:found.start()].count('\n') + 1
            raise ValueError(f'{file}: line {line}: {found.group(0)} takes its value from the '
                             f'environment variable {found.group(1)} of the run, which a '
                             "results row does not record; a config outside the repository's "
                             'configs/ folder is read without running it: expected the value '
                             'itself')
        placeholders = Config._pre_substitute_base_vars(filled, filled)
        return Path(filled).read_text(encoding='utf-8'), placeholders


def _value_spans(file: Path, text: str):
    """(start, end) character spans of ``text`` that can be values of the config: its tokens
    but comments and (.py) docstrings; None when it does not tokenize (all of it counts)."""
    import ast
    import io
    import tokenize
    import yaml
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    try:
        if file.suffix != '.py':
            return [(token.start_mark.index, token.end_mark.index) for token in yaml.scan(text)]
        docstrings = {line for node in ast.parse(text).body if isinstance(node, ast.Expr)
                      and isinstance(node.value, ast.Constant)
                      for line in range(node.lineno, node.end_lineno + 1)}
        return [(starts[token.start[0] - 1] + token.start[1],
                 starts[token.end[0] - 1] + token.end[1])
                for token in tokenize.generate_tokens(io.StringIO(text).readline)
                if token.type != tokenize.COMMENT
                and not (token.type == tokenize.STRING and token.start[0] in docstrings)]
    except (SyntaxError, ValueError, tokenize.TokenError, yaml.YAMLError, IndexError):
        return None


def _in_values(match, spans) -> bool:
    return spans is None or any(start < match.end() and match.start() < end
                                for start, end in spans)


# mmengine's {{$NAME:default}} (Config._substitute_env_variables)
ENVIRONMENT_PLACEHOLDER = re.compile(r'\{\{[\'"]?\s*\$(\w+)\s*:\s*(\S*?)\s*[\'"]?\}\}')


def _with_placeholders(file: Path, values: dict, placeholders: dict, base: dict,
                       strict: bool, source=('', None)) -> dict:
    """``values`` with each whole placeholder value replaced by its ``_base_`` value, each
    value copied apart (mmengine's ``Config._substitute_base_vars``); a placeholder left inside
    a text (``'{{_base_.x}}/y'``, ``{{_base_.x}} * 2``: mmengine's run gets that text) is
    refused naming the line (``source``: the text read and its parsed tree, None for a
    mapping file; ``strict=False``: unread)."""
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmengine.config import Config
    if not strict:
        return {name: UNREAD if _holds_placeholder(value, placeholders) else value
                for name, value in values.items()}
    try:  # also with no placeholder: mmengine copies each value apart there (two names bound
        # to one dict are two dicts when merged, `_delete_` read for each)
        values = Config._substitute_base_vars(values, placeholders, base)
    except (KeyError, TypeError) as error:
        missing = next((name for name in placeholders.values()
                        if not _has_base_value(base, name)), None)
        names = missing or ', '.join(sorted(set(placeholders.values())))
        line = _placeholder_line(file, missing) if missing else None
        raise ValueError(f'{file}{f":{line}" if line else ""}: {{{{_base_.{names}}}}}: no such '
                         f'value in its _base_ files ({error})') from None
    for name, value in values.items():
        if _holds_placeholder(value, placeholders):
            held = [key for key in placeholders if _holds_placeholder(value, {key: None})]
            first, last = _last_statement_lines(source[1], name)
            line = next((number for number, written in enumerate(
                source[0].splitlines()[first - 1:last], first)
                if any(key in written for key in held)), None)
            raise ValueError(f'{file}{f":{line}" if line else ""}: {name}: uses '
                             f'{{{{_base_.{placeholders[held[0]]}}}}} inside a text or an '
                             'expression, where mmengine leaves its placeholder text (it '
                             'replaces only a whole value): expected _base_.x')
    return values


def _last_statement_lines(tree, name: str) -> tuple:
    """(first, last) line of the last top-level statement of ``tree`` that sets ``name``;
    (1, None), the whole text, without one (a mapping file: no tree)."""
    import ast
    spans = [(node.lineno, node.end_lineno) for node in (tree.body if tree else ())
             if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
                    for n in ast.walk(node))]
    return spans[-1] if spans else (1, None)


def _has_base_value(base: dict, name: str) -> bool:
    """``{{_base_.name}}`` (dotted) names a value of ``base``."""
    value = base
    for part in name.split('.'):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def _placeholder_line(file: Path, name: str):
    """The first line of ``file`` that writes ``{{_base_.name}}`` (None: not found)."""
    pattern = re.compile(r'\{\{\s*_base_\.' + re.escape(name) + r'\s*\}\}')
    lines = Path(file).read_text(encoding='utf-8').splitlines()
    return next((number for number, text in enumerate(lines, 1) if pattern.search(text)), None)


def _holds_placeholder(value, placeholders: dict) -> bool:
    if isinstance(value, str):
        return any(key in value for key in placeholders)
    items = [*value, *value.values()] if isinstance(value, dict) else value \
        if isinstance(value, (list, tuple)) else ()
    return any(_holds_placeholder(item, placeholders) for item in items)


def _safe_mapping(file: Path, text: str | None = None) -> dict:
    """A .json / .yaml config's mapping read with ``json`` / ``yaml.safe_load`` (no tag builds
    an object); one that does not parse or holds no mapping is refused naming the file, and
    so are a key given twice and a YAML 1.1 number not in plain digits (``06``, ``0x6``), as
    for a config of configs/ (:func:`check_mapping_file`)."""
    import json
    import yaml
    text = config_text(file)[0] if text is None else text
    try:  # a key twice, a YAML number not in plain digits: refused as check_mapping_file does
        loaded = json.loads(text, object_pairs_hook=unique_keys(file, 'config')) \
            if file.suffix == '.json' else yaml.safe_load(text)
        if file.suffix != '.json':
            check_yaml_numbers(file, text)
    except (json.JSONDecodeError, yaml.YAMLError, RecursionError) as error:
        raise ValueError(f'{file}: does not parse as {file.suffix[1:].upper()} without '
                         f'running code ({" ".join(str(error).split())}); a YAML tag that '
                         "builds an object (!!python/...) is not read outside the repository's "
                         'configs/ folder') from None
    if not isinstance(loaded, dict):
        raise ValueError(f'{file}: holds {type(loaded).__name__}; expected a mapping of config '
                         'keys')
    odd = [key for key in loaded if not isinstance(key, str)]
    if odd:  # mmengine: "'int' object has no attribute 'startswith'"
        raise ValueError(f'{file}: the top-level key {odd[0]!r} is {type(odd[0]).__name__}; '
                         'expected text keys (mmengine refuses others)')
    return loaded


_SYMBOLS = {'Add': '+', 'Sub': '-', 'Mult': '*', 'Div': '/', 'FloorDiv': '//', 'Mod': '%',
            'Pow': '**', 'LShift': '<<', 'RShift': '>>', 'BitOr': '|', 'BitXor': '^',
            'BitAnd': '&', 'MatMult': '@', 'USub': '-', 'UAdd': '+'}
BITS_BOUND = 10 ** 5  # an int of more bits has over 4300 digits: not computed, refused


def _literal_arithmetic(node, left, right):
    """``left op right`` of :class:`ast.BinOp` (or ``ast.AugAssign``) ``node`` as Python
    computes it on values read; what Python refuses (``1 / 0``, ``'a' % 1``) is refused
    with its words, an int of over 4300 digits too (Python does not write it as text, as
    mmengine does with the config); a text or list longer than :data:`SIZE_BOUND` is
    :class:`Unread`."""
    import ast
    import operator
    unread = _first_unread(left, right)
    if unread:
        return unread
    name = type(node.op).__name__
    symbol = f'{type(left).__name__} {_SYMBOLS[name]} {type(right).__name__}'
    written = (f'{ast.unparse(node.target)} {_SYMBOLS[name]}= {ast.unparse(node.value)}'
               if isinstance(node, ast.AugAssign) else ast.unparse(node))[:60]
    sizes = [len(value) if isinstance(value, (str, bytes, list, tuple)) else None
             for value in (left, right)]
    counts = [value if type(value) is int else None for value in (left, right)]
    if (name == 'Add' and None not in sizes and sum(sizes) > SIZE_BOUND
            or name == 'Mult' and any(size is not None and count is not None and size * count
                                      > SIZE_BOUND for size, count in zip(sizes, counts[::-1]))
            or name == 'Mod' and isinstance(left, (str, bytes))
            and re.search(rb'\d{7}|\*' if isinstance(left, bytes) else r'\d{7}|\*', left)):
        return _not_computed(node, f'{symbol} ({written}), too large to compute here')
    grown = max(sizes[0] or 0, sizes[1] or 0) * (max(counts[0] or 1, counts[1] or 1)
                                                 if name == 'Mult' else 2)
    _ITEMS_LEFT[0] -= grown if name in ('Add', 'Mult') and sizes != [None, None] else 0
    if _ITEMS_LEFT[0] < 0:  # texts / lists the file builds together
        return _not_computed(node, f'{symbol} ({written}), too large to compute here')
    if None not in counts and _int_bits(name, *counts) > BITS_BOUND:
        raise _Refused(f'{symbol} ({written}): Python refuses it (a number of more than '
                       f'{DIGITS_BOUND} digits, which Python does not write as text, and '
                       'mmengine writes the config as text when it runs)')
    ops = {'Add': operator.add, 'Sub': operator.sub, 'Mult': operator.mul,
           'Div': operator.truediv, 'FloorDiv': operator.floordiv, 'Mod': operator.mod,
           'Pow': operator.pow, 'LShift': operator.lshift, 'RShift': operator.rshift,
           'BitOr': operator.or_, 'BitXor': operator.xor, 'BitAnd': operator.and_,
           'MatMult': operator.matmul}
    try:
        return ops[name](left, right)
    except (ArithmeticError, TypeError, ValueError) as error:  # 1 / 0, 'a' % 1, 1 << -1
        raise _Refused(f'{symbol} ({written}): Python refuses it ({type(error).__name__}: '
                       f'{error})') from None


def _int_bits(name: str, left: int, right: int) -> int:
    """A lower bound of the bits of ``left op right`` for the operations that grow ints."""
    if name == 'Mult' and left and right:
        return left.bit_length() + right.bit_length() - 1
    if name == 'Pow' and right > 0 and abs(left) > 1:
        return (abs(left).bit_length() - 1) * right + 1
    if name == 'LShift' and left and right > 0:
        return left.bit_length() + right
    return 0


def _literal_dict(node, items: list):
    """A dict of (key, value) pairs built as Python builds a dict display; key :data:`SPREAD`
    = ``**value``. What Python refuses (an unhashable key, ``**`` of no mapping) is refused;
    a key or a ``**`` value not read makes it :class:`Unread`."""
    out = {}
    for key, value in items:
        unread = _first_unread(key, value if key is SPREAD else None)
        if unread:
            return unread
        if key is SPREAD and not isinstance(value, dict):
            raise _Refused(f'{{**{value!r}}} (Python refuses it: a {type(value).__name__} is '
                           'not a mapping)')
        try:
            out.update(value) if key is SPREAD else out.__setitem__(key, value)
        except TypeError as error:  # {[1]: 2}
            raise _Refused(f'the dict key {key!r} (Python refuses it: {error})') from None
    return out


def literal_config(path, chain: tuple = ()) -> dict:
    """A config file's values as mmengine merges them (its ``_base_`` files first, each base
    setting its own keys, then the file's own over them, ``_delete_`` honoured), read WITHOUT
    running any of its code (:func:`literal_assignments`: a config outside
    :data:`LITERAL_SUBSET` is refused naming file, line and construct). Each ``_base_`` file
    is found beside the file as named, as mmengine finds it (a linked base's own bases beside
    the link). A base of a package (``mmaction::...``) is refused: it is not read without
    running code."""
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmengine.config import Config
    path = Path(path)
    if Path(os.path.realpath(path)) in chain:
        raise ValueError(f'{path}: its _base_ files inherit from each other in a cycle: '
                         f'{" -> ".join(map(str, (*chain, path)))}; expected a chain that ends')
    base, source = {}, {}
    for file in _literal_bases(path):
        check_file(file, f'_base_ file of {path}')
        if file.suffix not in CONFIG_SUFFIXES:  # mmengine: "Only py/yml/yaml/json type ..."
            suffix = file.suffix or 'no'
            raise ValueError(f'{path}: its _base_ file {file} has {suffix} extension, which '
                             'mmengine does not read; expected a config '
                             f'({", ".join(CONFIG_SUFFIXES)})')
        values = literal_config(file, (*chain, Path(os.path.realpath(path))))
        twice = sorted(set(values) & set(base))
        if twice:  # mmengine: "Duplicate key is not allowed among bases"
            raise ValueError(f'{path}: its _base_ files {source[twice[0]]} and {file} both set '
                             f'{twice[0]!r} (keys set by two bases: {twice}); expected each key '
                             'in one base (mmengine refuses this config)')
        base.update(values)
        source.update((key, file) for key in values)
    try:
        return Config._merge_a_into_b(merge_over_unread(literal_assignments(path, base), base),
                                      base)
    except TypeError as error:  # mmengine: a dict set over a base's non-dict
        raise ValueError(f'{path}: {inherit_error_text(error)}; expected a dict over a base '
                         "dict, or `_delete_=True` in the dict to replace the base's value") \
            from None


def _literal_bases(path: Path) -> list:
    """The ``_base_`` files of ``path`` as mmengine reads them (from its text with the
    predefined variables filled, joined to the file's folder as named); a ``_base_`` that is
    not a text or list of texts of :data:`LITERAL_SUBSET` is refused naming the line."""
    import ast
    text, placeholders = config_text(path)
    if path.suffix == '.py':
        tree = _parse_config(path, text, placeholders)
        with contextlib.suppress(SyntaxError):  # the filled text parses: {{_base_.x}} in it
            literal_base_files(path)  # _base_ assigned twice: refused naming the lines
        node = next((n for n in tree.body if isinstance(n, ast.Assign)
                     and getattr(n.targets[0], 'id', None) == '_base_'), None)
        try:
            names = [] if node is None else _literal(node.value, {}, {})
        except ValueError as error:
            raise ValueError(f'{path}:{node.lineno}: _base_: {error}; expected the file name of '
                             "a config, or a list of them (e.g. _base_ = ['../b.py'])") from None
        line = f':{node.lineno}' if node is not None else ''
    else:
        names, line = _safe_mapping(path, text).get('_base_', []), ''
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ValueError(f'{path}{line}: _base_ = {names!r}; expected the file name of a config, '
                         "or a list of them (e.g. _base_ = ['../_base_/datasets/crosstask.py'])")
    found = []
    for name in names:
        if '::' in name:  # mmengine: a config of an installed package (mmaction::...)
            raise ValueError(f'{path}{line}: its _base_ file {name!r} is a config of an '
                             'installed package, which is not read without running code; '
                             "expected a config file, or keep the config in the repository's "
                             'configs/ folder')
        written = os.path.join(os.path.dirname(path), name)
        if name != name.strip() and not os.path.lexists(written):
            raise FileNotFoundError(f'{path}{line}: its _base_ file {name!r} does not exist (its '
                                    'name ends or starts with a space); expected the name of a '
                                    'config file')
        if not os.path.lexists(written) and os.path.lexists(os.path.abspath(written)):
            raise FileNotFoundError(f'{path}{line}: its _base_ file {name!r} does not exist as '
                                    f'written ({written}: mmengine opens that path, where each '
                                    "folder before a '..' must exist); expected the path of a "
                                    f'config, e.g. {os.path.relpath(os.path.abspath(written), os.path.dirname(os.path.abspath(path)))!r}')
        found.append(Path(os.path.abspath(written)))  # as mmengine: beside the file as named
    return found


REPOSITORY_CONFIGS = REPO_ROOT / 'configs'  # the configs whose code a reader may run


def row_config_path(path) -> str:
    """The config path a results row records (part of its identity; ``llm_eval.py``'s local
    model folder too): relative to the repository for its files (``configs/x.py``, however it
    was typed and from whatever working directory), else absolute; ``..``, ``.`` and a
    trailing ``/`` folded, links kept."""
    absolute = Path(os.path.normpath(os.path.abspath(path)))
    try:
        return str(absolute.relative_to(REPO_ROOT))
    except ValueError:
        return str(absolute)


def row_options(cfg_options):
    """``--cfg-options`` as a results row records them (part of its identity): each text
    naming an existing file or folder written as :func:`row_config_path` writes it
    (``tiny/../tiny/x.json``, ``./x.json`` and its absolute path are one option), in lists
    and dicts too; any other value as given."""
    if isinstance(cfg_options, dict):
        return {key: row_options(value) for key, value in cfg_options.items()}
    if isinstance(cfg_options, (list, tuple)):
        return type(cfg_options)(row_options(value) for value in cfg_options)
    if isinstance(cfg_options, str) and cfg_options.strip() and os.path.exists(cfg_options):
        return row_config_path(cfg_options)
    return cfg_options


def read_config_safely(path):
    """A config's values for a reader of someone else's files (a results row names its config):
    a config that, with every ``_base_`` file, lies in this repository's ``configs/`` is read
    by mmengine (:func:`read_config_file`, its code run); any other is read WITHOUT running its
    code, in :data:`LITERAL_SUBSET` (:func:`literal_config`: a config outside it is refused
    naming file, line and construct; a value it does not compute is :class:`Unread`), so a
    results file from elsewhere runs no code of a config it names. A ``mmengine.Config``."""
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmengine.config import Config
    check_config_file(path)
    check_no_base_cycle(path)
    # the file as read_config_file gives it to mmengine (a link: its target), and each base as
    # mmengine finds it from there (a folder link then `..` leaves the folder the link is in)
    source = _config_source(path)
    if all(file.is_relative_to(REPOSITORY_CONFIGS)
           for file in config_chain(source, literal=True)):
        return read_config_file(path)
    return Config(literal_config(source), filename=str(path))


def _check_test_horizon(cfg, horizon: int, test_horizon: int) -> None:
    """A test horizon the config's planner cannot plan is a config error, raised before
    anything is built (``BasePlanner`` planners; the same rule as at predict time)."""
    if test_horizon == horizon or cfg.get('model') is None:
        return
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmaction.registry import MODELS
    cls = MODELS.get(cfg.model.get('type')) if cfg.model.get('type') else None
    # a planner states its rule (BasePlanner.horizon_mismatch); this floor knows no planner
    rule = getattr(cls, 'horizon_mismatch', None) if isinstance(cls, type) else None
    if rule is None:
        return
    error = rule(cfg.model.get('cross_horizon'), horizon, test_horizon)
    if error:
        raise ValueError(f'{cfg.filename}: test_horizon={test_horizon} with horizon={horizon}: '
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
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmaction.registry import MODELS
    cls = MODELS.get(model.get('type')) if model.get('type') else None
    if cls is None:
        return True
    params = inspect.signature(cls.__init__).parameters
    return 'horizon' in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _check_list_indices(path, cfg, cfg_options: dict) -> None:
    """A ``--cfg-options`` key indexing past the end of a list of the config
    (``model.pkg.perturbations.0.type=UniformGraph`` on ``perturbations=[]``) is refused naming
    the key and the list's length (mmengine: "Index 0 exceeds the length of list []")."""
    for key in cfg_options:
        node, walked = cfg, []
        for part in str(key).split('.')[:-1]:
            if isinstance(node, (list, tuple)) and not part.isdigit():  # custom_hooks.-1.x
                raise ValueError(
                    f'{path}: --cfg-options {key}: {".".join(walked)} is a list of {len(node)} '
                    f'entries and {part!r} is no entry number; expected '
                    f'{".".join(walked)}.<n>.<key> with n in 0..{len(node) - 1} (counted from 0)')
            if isinstance(node, (list, tuple)) and part.isdigit():
                if int(part) >= len(node):
                    raise ValueError(
                        f'{path}: --cfg-options {key}: {".".join(walked)} is a list of '
                        f'{len(node)} entries, so entry {part} does not exist; set the whole '
                        f'list instead ({".".join(walked)}=[...] for plain values, or a config '
                        "file of your own for dicts: _base_ = ['<config>'])")
                node = node[int(part)]
            elif hasattr(node, 'get') and part in node:
                node = node[part]
            else:
                break
            walked.append(part)


def _refuse_dicts_given_as_text(path, cfg, cfg_options: dict) -> None:
    """A ``--cfg-options`` value replacing a dict of the config with text
    (``train_dataloader.dataset={}``: mmengine reads ``{...}`` as text) is refused naming the
    key: the run stopped later in Python's "'str' object has no attribute 'get'". A default
    hook (``default_hooks.timer='abc'``) is left to the runner's check, which says that it may
    also be None (off)."""
    for key, value in cfg_options.items():
        if re.fullmatch(r'default_hooks\.[^.]+', str(key)):
            continue
        node = cfg
        for part in str(key).split('.'):
            if isinstance(node, (list, tuple)) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif hasattr(node, 'get') and not isinstance(node, (list, tuple)) and part in node:
                node = node[part]
            else:
                node = None
                break
        if isinstance(node, dict) and isinstance(value, str):
            raise ValueError(f'{path}: --cfg-options {key}={value!r}; expected a dict (the '
                             f'config\'s {key} holds {", ".join(map(str, list(node)[:4]))}'
                             f'{" ..." * (len(node) > 4)}; --cfg-options cannot give a dict, '
                             'mmengine reads {...} as text: set one field at a time, '
                             f'{key}.<field>=<value>)')


def load_config(path, cfg_options=None, *, data_root=None, feature_dir=None, horizon=None,
                test_horizon=None):
    """The mmengine ``Config`` of ``path`` with ``cfg_options`` merged, the horizon applied and
    the data locations resolved to absolute paths (:func:`resolve_paths`; rules: module
    docstring)."""
    if cfg_options is not None and not isinstance(cfg_options, dict):  # 'a=1' read as keys
        raise TypeError(f'{path}: cfg_options={cfg_options!r}; expected a dict of dotted keys '
                        "and values, e.g. {'model.dropout': 0.2} (or None)")
    for name, value in (('data_root', data_root), ('feature_dir', feature_dir)):
        if value is not None and (not isinstance(value, (str, os.PathLike)) or not str(value)):
            raise ValueError(f'load_config() argument {name}={value!r}; expected a folder path '
                             "(or None for the config's own): an empty one was read as not "
                             'given')
    cfg = read_config_file(path)
    check_config_keys(cfg, cfg_options)  # a misspelled key (horizn=4) is refused
    check_flags_agree(cfg_options, {'--data-root': ('data_root', data_root),
                                    '--feature-dir': ('feature_dir', feature_dir),
                                    '--horizon': ('horizon', horizon)},
                      where=str(path), paths=('data_root', 'feature_dir'))
    declared = {name: cfg[name] for name in PATH_VARIABLES if cfg.get(name) is not None}
    if cfg_options:
        _refuse_undefined_variables(path, cfg, cfg_options)
        _refuse_derived_horizons(path, cfg_options)
        _check_list_indices(path, cfg, cfg_options)
        _refuse_dicts_given_as_text(path, cfg, cfg_options)
        try:
            cfg.merge_from_dict(cfg_options)
        except TypeError as error:  # a KEY.SUB=VALUE under a key the config sets to None
            if 'cannot inherit from base' not in str(error):
                raise
            raise ValueError(f'--cfg-options of {path}: {inherit_error_text(error)}, so its '
                             'keys cannot be set one by one; expected the override in a config '
                             f"file of your own (_base_ = ['{path}'] and the dict with "
                             '_delete_=True)') from None
        _refuse_inert_variables(path, cfg, cfg_options)
        if any(key.split('.')[0] == 'custom_imports' for key in cfg_options):
            import_custom_modules(path, cfg.custom_imports)
    refuse_inert_file_variables(cfg)
    refuse_inert_helpers(cfg)
    from vpn_plugin.runner_keys import check_runner_kinds
    check_runner_kinds(cfg, str(path))  # read below (horizon, data_root, the loaders)
    apply_horizon(cfg, horizon, test_horizon)
    return resolve_paths(cfg, data_root=data_root, feature_dir=feature_dir, declared=declared)


def import_custom_modules(path, custom_imports) -> None:
    """Import the modules of an overridden ``custom_imports`` (mmengine imports a config
    file's own when it reads the file; one given by ``--cfg-options`` was never imported,
    whatever it held: ``imports=['my_module']``, ``0`` or ``'abc'``)."""
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmengine.utils import import_modules_from_strings
    imports = (custom_imports or {}).get('imports') if hasattr(custom_imports, 'get') else None
    allow_failed = (custom_imports or {}).get('allow_failed_imports', False) \
        if hasattr(custom_imports, 'get') else None
    if not (isinstance(imports, (list, tuple)) and all(isinstance(m, str) for m in imports)) \
            or not isinstance(allow_failed, bool):
        raise ValueError(f'{path}: custom_imports={custom_imports!r}; expected '
                         "dict(imports=['module', ...], allow_failed_imports=False)")
    try:
        import_modules_from_strings(list(imports), allow_failed_imports=allow_failed)
    except ImportError as error:
        raise ValueError(f'{path}: custom_imports: {error}') from None


def check_flags_agree(cfg_options, flags: dict, where: str = '', paths=()) -> None:
    """A tool flag and the ``--cfg-options`` key it sets, given both with different values
    (``--horizon 4 --cfg-options horizon=3``): the flag would win and the option be dropped
    without a word; ``ValueError`` naming both (after ``where``, e.g. the config file).
    ``flags``: ``{flag: (key, value or None)}``; the values of the keys in ``paths`` are
    compared as absolute paths, the others as text."""
    for flag, (key, value) in flags.items():
        if value is None or key not in (cfg_options or {}):
            continue
        option = cfg_options[key]
        same = (os.path.abspath(str(option)) == os.path.abspath(str(value)) if key in paths
                else str(option) == str(value))
        if not same:
            prefix = f'{where}: ' if where else ''
            raise ValueError(f'{prefix}{flag} {value} and --cfg-options {key}={option} '
                             'contradict each other; give one of the two')


CONFIG_SUFFIXES = ('.py', '.json', '.yaml', '.yml')  # what mmengine's Config reads


def inherit_error_text(error: TypeError) -> str:
    """mmengine's "X=... in child config cannot inherit from base because X is a dict in the
    child config but is of type <class 'NoneType'> in base config" as 'X=... is a dict, but the
    base config sets X to NoneType'."""
    match = re.match(r"(.*?) in child config cannot inherit from base because (\S+) is a dict "
                     r"in the child config but is of type <class '(\w+)'> in base config",
                     str(error), re.S)
    if not match:
        return str(error)
    value, key, kind = match.groups()
    return (f'{value[:200]} is a dict, but the base config sets {key} to '
            f'{"None" if kind == "NoneType" else "a " + kind}')


def config_files(config: str) -> list:
    """``[(file, bytes)]`` of ``config`` and of every file of its ``_base_`` chain (absolute
    paths as named, ``config`` first, each once; a base that does not exist left out: its
    reader names it). Only the bytes are read each time; a file's bases are parsed once per
    content of that file (:func:`_base_files`)."""
    found, todo, seen = [], [os.path.abspath(config)], set()
    while todo:
        file = todo.pop(0)
        if file in seen or (seen and not os.path.isfile(file)):  # (config itself: its error)
            continue
        seen.add(file)
        with open(file, 'rb') as handle:
            data = handle.read()
        found.append((file, data))
        todo += _base_files(file, hashlib.sha256(data).hexdigest())
    return found


def config_content(config: str, files=None) -> str:
    """A digest of the bytes of ``config`` and of every file of its ``_base_`` chain
    (:func:`config_files`, or ``files`` when given): the key of what is remembered of a
    config, not a file's time stamp and size (a config or base edited during a long run, or
    rewritten keeping its size and time, is read anew)."""
    digest = hashlib.sha256()
    for file, data in config_files(config) if files is None else files:
        digest.update(file.encode() + b'\0' + data + b'\0')
    return digest.hexdigest()


@functools.lru_cache(maxsize=1024)
def _base_files(file: str, content: str) -> list:
    """The ``_base_`` files of ``file`` (of that ``content``) as a run reads them
    (:func:`config_bases`); [] when they cannot be read (its reader names what is wrong)."""
    try:
        return [str(base) for base in config_bases(Path(file))]
    except (UnicodeDecodeError, SyntaxError, ValueError, OSError, AttributeError):
        return []


def read_config_file(path):
    """``mmengine.Config.fromfile(path)`` with its failures naming the file: ``path`` not a
    regular file, a syntax error (in it or in one of its ``_base_`` files: which one, line),
    a ``_base_`` file that does not exist. A symbolic link is read as the file it points to
    (its ``_base_`` paths are relative to that file, as :func:`config_chain` reads them).

    A config of this repository (it and every ``_base_`` file in :data:`REPOSITORY_CONFIGS`,
    no ``{{$ENV}}`` reference: its result is a function of those bytes and paths) is parsed
    once per content of its chain (:func:`config_content`, ``path`` as given): a protocol,
    its dry run, a test suite read the same configs again (~50 ms CPU each, ~1 ms so); each
    caller gets its own copy."""
    check_config_file(path)  # (a regular file of a config's kind, before its chain is read)
    source = os.path.realpath(path) if Path(path).is_symlink() else str(path)
    try:
        files = config_files(source)
    except OSError:  # unreadable: the reader below names it
        files = []
    if files and all(Path(os.path.realpath(file)).is_relative_to(REPOSITORY_CONFIGS)
                     and not ENVIRONMENT_PLACEHOLDER.search(data.decode('utf-8', 'replace'))
                     for file, data in files):
        return copy.deepcopy(_repository_config(str(path), config_content(source, files)))
    return _read_config_file(path)


@functools.lru_cache(maxsize=256)
def _repository_config(path: str, content: str):
    """:func:`_read_config_file` of ``path`` once per ``content`` (callers copy it)."""
    return _read_config_file(path)


def _read_config_file(path):
    """:func:`read_config_file`, read now (``path`` checked by it)."""
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmengine.config import Config
    for file in config_chain(path):  # mmengine reads each file as UTF-8
        check_utf8(file)
        check_quoted_base_references(file)
        check_mapping_file(file)
        check_base_names(file)
    check_no_base_cycle(path)
    from mmengine.config.utils import ConfigParsingError
    # a link to a config elsewhere: mmengine would look for its _base_ files beside the link
    source = os.path.realpath(path) if Path(path).is_symlink() else str(path)
    try:
        loaded = Config.fromfile(source)
    except NameError as error:  # e.g. YAML text ("_base_: [a.py]") in a .py file
        raise ValueError(f'{not_python_reason(error) or path}: {error}; the config file does '
                         'not run as Python (a .py config sets keys with `key = value` and '
                         'quotes its strings; YAML text needs a .yaml name)') from None
    except SyntaxError as error:
        where = config_with_syntax_error(Path(path)) or Path(path)
        raise SyntaxError(f'{where}: line {error.lineno}: {error.msg}; the config file does not '
                          'parse as Python') from None
    except FileNotFoundError as error:
        missing = getattr(error, 'filename', None)
        named = re.fullmatch(r'file "(.*)" does not exist', str(error), re.S)
        if missing is None and named:  # mmengine's check_file_exist: no filename attribute
            missing = named.group(1)
            if missing != missing.strip():
                raise FileNotFoundError(f'{path}: the file {missing!r} it inherits (_base_) '
                                        'does not exist (its name ends or starts with a space); '
                                        'expected the name of a config file') from None
        if missing and Path(missing).resolve() != Path(path).resolve():
            raise FileNotFoundError(f'{path}: the file {missing} it inherits (_base_) or reads '
                                    'does not exist') from None
        raise
    except TypeError as error:  # mmengine: a dict set over a base's non-dict
        if 'cannot inherit from base' not in str(error):
            raise
        raise ValueError(f'{path}: {inherit_error_text(error)}; expected a dict over a base '
                         'dict, or `_delete_=True` in the dict to replace the base\'s value '
                         '(e.g. text_embeddings=dict(_delete_=True, file=...))') from None
    except ConfigParsingError as error:  # mmengine's words for an `import` beside `_base_`
        if 'lazy_import' not in str(error):
            raise
        where = _top_level_import(Path(path)) or str(path)
        raise ValueError(f'{where}: an import statement before `_base_ = [...]`: mmengine '
                         'then reads the file as a "lazy import" config, which cannot inherit '
                         'with _base_; expected _base_ first, or no import (plugin modules go '
                         "in custom_imports = dict(imports=['my_module']))") from None
    except KeyError as error:  # mmengine's words for keys its bases both set
        if 'Duplicate key is not allowed among bases' not in str(error):
            raise
        raise ValueError(f'{path}: its _base_ files {Config._get_base_files(str(path))} set '
                         f'the same keys ({str(error).split("Duplicate keys:")[-1].strip()[:200]}'
                         '); mmengine merges bases only when they set different keys: inherit '
                         'one of them (each configs/ file is a whole config)') from None
    return loaded


def check_config_file(path) -> None:
    """``path`` is a regular file with a config's extension (:data:`CONFIG_SUFFIXES`)."""
    check_file(path, 'config file')
    if Path(path).suffix not in CONFIG_SUFFIXES:  # mmengine: "Only py/yml/yaml/json type ..."
        raise ValueError(f'config file {path}: a {Path(path).suffix or "name without"} '
                         f'extension; expected a config ({", ".join(CONFIG_SUFFIXES)}), e.g. '
                         'configs/vpn_niv_t3.py')


def check_no_base_cycle(path) -> None:
    """mmengine recurses on ``_base_`` files that inherit from each other for seconds, then
    ends in a RecursionError naming no file: refused naming the chain (:func:`base_cycle`)."""
    cycle = base_cycle(_config_source(path))
    if cycle:
        raise ValueError(f'{path}: its _base_ files inherit from each other in a cycle: '
                         f'{" -> ".join(map(str, cycle))}; expected a chain that ends')


def _top_level_import(path: Path, seen=None) -> str:
    """``file: line N`` of the first top-level import statement of ``path`` or of its
    ``_base_`` files (read as literals), '' when none is found."""
    import ast
    seen = set() if seen is None else seen
    if path in seen or path.suffix != '.py' or not path.is_file():
        return ''
    seen.add(path)
    try:
        tree = ast.parse(path.read_text(), str(path))
        bases = literal_base_files(path)
    except (SyntaxError, ValueError):
        return ''
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return f'{path}: line {node.lineno}'
    return next((found for found in (_top_level_import(b, seen) for b in bases) if found), '')


def check_base_names(file: Path) -> None:
    """A .py config whose ``_base_`` names no files (``_base_ = 5``: mmengine's "'int' object is
    not iterable") is refused naming it (:func:`literal_base_files`); one that does not parse
    or is not UTF-8 is left to the checks that name those."""
    if file.suffix == '.py':
        with contextlib.suppress(SyntaxError, UnicodeDecodeError):
            literal_base_files(file)


QUOTED_BASE_REFERENCE = r'([\'"])[^\'"\n]*\{\{\s*_base_\.[\w.]+\s*\}\}[^\'"\n]*\1'


def check_quoted_base_references(file: Path) -> None:
    """``x = '{{_base_.horizon}}'``: mmengine substitutes a ``{{_base_.x}}`` reference only as a
    whole unquoted value (it writes a quoted random name in its place, then the base's value
    for that name), so inside quotes the value became the text ``'"_horizon_53ad00"'``, named
    later as that text; refused naming the line and the reference."""
    text = file.read_text(encoding='utf-8')
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith('#'):
            continue
        found = re.search(QUOTED_BASE_REFERENCE, line)
        if found:
            reference = re.search(r'\{\{\s*_base_\.[\w.]+\s*\}\}', found.group(0)).group(0)
            raise ValueError(f'{file}: line {number}: {found.group(0)} quotes the base reference '
                             f'{reference}; mmengine substitutes it only as a whole value '
                             f'without quotes (quoted, the value is a text of a random name); '
                             f'expected {reference} unquoted')


def _references_replaced(file: Path) -> str:
    return re.sub(r'\{\{[^{}\n]*\}\}', '"_reference_"', file.read_text(encoding='utf-8'))


def mapping_config(file: Path):
    """A .json / .yaml config's content as mmengine parses it: each ``{{...}}`` reference (a
    base's value, a predefined variable) replaced by a quoted name first, as mmengine does
    (``h: {{_base_.horizon}}`` is a valid YAML config); a file that does not parse is refused
    naming it, with the parser's words."""
    import io

    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    import mmengine
    text = _references_replaced(file)
    try:
        return mmengine.load(io.StringIO(text), file_format=file.suffix[1:].lower())
    except Exception as error:  # noqa: BLE001 - the parser's own words, with the file named
        raise ValueError(f'{file}: does not parse as {file.suffix[1:].upper()} ({error})') \
            from None


def check_mapping_file(file: Path) -> None:
    """A .json / .yaml config must hold a mapping of keys (an empty YAML file reads as None:
    mmengine failed with "'NoneType' object has no attribute 'get'")."""
    if file.suffix == '.py':
        return
    loaded = mapping_config(file)
    if not isinstance(loaded, dict):
        raise ValueError(f'{file}: holds {type(loaded).__name__} {str(loaded)[:60]!r}; expected '
                         'a mapping of config keys (e.g. _base_: [configs/vpn_niv_t3.py] and '
                         'the keys it changes); an empty file is no config')
    text = _references_replaced(file)
    if file.suffix == '.json':  # a key twice: json keeps the last (errors.unique_keys)
        json.loads(text, object_pairs_hook=unique_keys(file, 'config'))
    else:
        check_yaml_numbers(file, text)


# YAML 1.1 (PyYAML, which mmengine reads .yaml configs with) reads 010 as 8, 1:20 as 80, 0x7,
# 1_0 as numbers, and 1e-3 (no dot) as text: the forms --cfg-options refuses (other digits)
YAML_DECIMAL = {'int': r'[-+]?(0|[1-9][0-9]*)',
                'float': r'[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)'
                         r'|\.(nan|NaN|NAN)'}
YAML_EXPONENT_TEXT = r'[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+'


def check_yaml_numbers(file: Path, text: str) -> None:
    """Every unquoted YAML number of a config in plain decimal digits, and no key twice in one
    mapping (YAML keeps the last); else refused naming the file, line, text and its reading."""
    import yaml
    pending = [yaml.compose(text, Loader=yaml.SafeLoader)]
    while pending:
        node = pending.pop()
        line = f'{file}: line {node.start_mark.line + 1 if node else "?"}'
        if isinstance(node, yaml.MappingNode):
            keys = [key for key, _ in node.value if isinstance(key, yaml.ScalarNode)]
            twice = next((key for i, key in enumerate(keys)  # its second place
                          if key.value in [k.value for k in keys[:i]]), None)
            if twice is not None:
                raise ValueError(f'{file}: line {twice.start_mark.line + 1}: the key '
                                 f'{twice.value!r} is given twice in one mapping; YAML would '
                                 'keep only the last: expected each key once')
            pending.extend(item for pair in node.value for item in pair)
        elif isinstance(node, yaml.SequenceNode):
            pending.extend(node.value)
        elif isinstance(node, yaml.ScalarNode) and node.style is None:
            kind = node.tag.rsplit(':', 1)[-1]
            if kind in YAML_DECIMAL and not re.fullmatch(YAML_DECIMAL[kind], node.value):
                value = yaml.safe_load(node.value)
                raise ValueError(f'{line}: {node.value} is read by YAML 1.1 as the {kind} '
                                 f'{value!r}; expected a number in plain decimal digits (write '
                                 f'{value!r} if that is meant, or quote text)')
            if kind == 'str' and re.fullmatch(YAML_EXPONENT_TEXT, node.value):
                raise ValueError(f'{line}: {node.value} is read by YAML 1.1 as the text '
                                 f'{node.value!r}, not a number (an exponent needs a dot before '
                                 f'it there: write {float(node.value)!r}, or quote text)')


def check_utf8(file: Path) -> None:
    """A config file that is not UTF-8 text (mmengine's UnicodeDecodeError named no file)."""
    try:
        file.read_bytes().decode('utf-8')
    except UnicodeDecodeError as error:
        line = error.object[:error.start].count(b'\n') + 1
        raise ValueError(f'{file}: line {line}: byte {error.object[error.start:error.start + 1]!r}'
                         f' is not UTF-8 ({error.reason}); expected a config file saved as '
                         'UTF-8') from None


def config_with_syntax_error(path: Path, seen=None):
    """The file of ``path`` or of its ``_base_`` files (read as literals) that does not parse
    (None when each parses, or a base cannot be named)."""
    seen = set() if seen is None else seen
    if path in seen or not path.is_file():
        return None
    seen.add(path)
    try:
        bases = literal_base_files(path)
    except SyntaxError:
        return path
    for base in bases:
        found = config_with_syntax_error(base, seen)
        if found:
            return found
    return None


def literal_base_files(path: Path) -> list:
    """The ``_base_`` files a .py config ``path`` names as literals, resolved against its
    folder (a name built at run time is not listed); ``SyntaxError`` when it does not parse."""
    import ast
    tree = ast.parse(path.read_text(), str(path))
    found = []
    assigned = [node for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, 'id', None) == '_base_' for t in node.targets)]
    if len(assigned) > 1:  # mmengine reads the first, Python would keep the last
        raise ValueError(f'{path}: lines {", ".join(str(n.lineno) for n in assigned)}: _base_ is '
                         f'assigned {len(assigned)} times; mmengine reads only the first '
                         f'({ast.get_source_segment(path.read_text(), assigned[0].value)}); '
                         'expected one _base_ = [...] listing every base file')
    for node in assigned:
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            continue
        names = [value] if isinstance(value, str) else value
        # a tuple too is refused: mmengine reads only a str or a list (a tuple ended in
        # "join() argument must be str ..., not 'tuple'")
        if not isinstance(names, list) or not all(isinstance(b, str) for b in names):
            raise ValueError(f'{path}: line {node.lineno}: _base_ = {value!r}; expected the '
                             'file name of a config, or a list of them (e.g. _base_ = '
                             "['../_base_/datasets/crosstask.py'])")
        found += [Path(os.path.realpath(path.parent / b)) for b in names]  # a loop: not raised
    return found


def base_cycle(path: Path, chain=()) -> list:
    """The ``_base_`` files of ``path`` that inherit from each other in a cycle, as the chain
    ``[a, b, a]`` (mmengine recurses without end on it), or [] when none is found. Each base
    is found as mmengine finds it (:func:`_literal_bases`: beside the file as named); two
    names are one file when they lead to it (a link, ``x/..``)."""
    same = [os.path.realpath(file) for file in chain]
    if os.path.realpath(path) in same:
        return [*chain[same.index(os.path.realpath(path)):], path]
    if not path.is_file():
        return []
    try:
        bases = _literal_bases(path)
    except Exception:  # noqa: BLE001 - a file that does not parse: its reader names why
        return []
    for base in bases:
        cycle = base_cycle(base, (*chain, path))
        if cycle:
            return cycle
    return []


def not_python_reason(error: NameError) -> str:
    """``file: line N`` of the config line whose name is not defined (the innermost frame of
    a config file: mmengine compiles each with its own file name), '' when none is found."""
    where = ''
    traceback = error.__traceback__
    while traceback is not None:
        code = traceback.tb_frame.f_code
        if code.co_name == '<module>' and code.co_filename.endswith('.py'):
            where = f'{code.co_filename}: line {traceback.tb_lineno}'
        traceback = traceback.tb_next
    return where


def known_config_keys() -> set:
    """Top-level keys a config may set: the Runner's arguments, :data:`MMENGINE_KEYS` and
    :data:`PLUGIN_KEYS` (names starting with ``_`` are free helper variables)."""
    import inspect
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmengine.runner import Runner
    return (set(inspect.signature(Runner.__init__).parameters) - {'self', 'cfg'}
            | set(MMENGINE_KEYS) | set(PLUGIN_KEYS))


def check_config_keys(cfg, overrides=None) -> None:
    """Refuse a misspelled top-level key (``horizn = 4``): a key of ``cfg`` that is not known
    (:func:`known_config_keys`) but close to a known one, and a ``--cfg-options`` key
    (``overrides``, before they are merged) that neither the config nor the Runner has."""
    known = known_config_keys()
    where = cfg.filename or 'config'
    if 'protocol' in cfg and 'runs' in cfg and 'train_dataloader' not in cfg:
        raise ValueError(f'{where} is a protocol config (protocol={cfg.protocol!r}: runs of '
                         'several methods), not a training or dataset config: run it with '
                         'tools/run_protocol.py, or give this tool the config of one of its '
                         'runs (its runs[i].config, e.g. configs/vpn_niv_t3.py)')
    if '_delete_' in cfg:  # mmengine reads _delete_ inside a dict only: at the top, nothing
        raise ValueError(f'{where}: a top-level _delete_ = {cfg["_delete_"]!r} deletes nothing '
                         '(mmengine reads _delete_=True inside a dict, e.g. model = dict('
                         "_delete_=True, type=...)); expected it inside the entry to replace, or a "
                         'config without _base_ to start from nothing')
    check_misspelled([k for k in cfg.keys() if not k.startswith('_')], known,
                     f'{where}: top-level config key')
    for key in sorted({str(k).split('.')[0] for k in overrides or {}}):
        if key not in cfg and key not in known:
            raise ValueError(f'{where}: --cfg-options {key}: no top-level config key {key!r} '
                             f'in the config or the Runner{close_match_hint(key, known)} '
                             '(a new key would be ignored)')
    for key, value in (overrides or {}).items():
        if looks_like_code(value):
            raise ValueError(f'{where}: --cfg-options {key}={value}: this looks like Python code; '
                             'option values are read as literals (numbers, strings, lists, '
                             'dicts) and never run: give the value itself')


CODE_NAMES = ('__import__', 'eval', 'exec', 'compile', 'open', 'getattr', 'globals', 'lambda')


def looks_like_code(value) -> bool:
    """A ``--cfg-options`` string that would be code if it ran (it never does): a call of
    ``__import__`` / ``eval`` / ... or a dunder attribute. Paths and names never are."""
    import ast
    if not isinstance(value, str):
        return False
    try:
        tree = ast.parse(value.strip(), mode='eval')
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda):
            return True
        if isinstance(node, ast.Attribute) and node.attr.startswith('__'):
            return True
        if isinstance(node, ast.Call) and getattr(node.func, 'id', None) in CODE_NAMES:
            return True
    return False



def resolve_paths(cfg, *, data_root=None, feature_dir=None, declared=None):
    """Resolve the location variables of ``cfg`` and every path built from them; returns ``cfg``.

    ``declared``: the variables' values in the config FILE (before any override); ``None``
    re-reads ``cfg.filename`` (MMAction2's tools merge ``--cfg-options`` before
    ``PlanningRunner.from_cfg`` sees the config). A path is built from a variable by the
    placeholder ``'{data_root}/niv'`` (also inside another variable:
    ``feature_dir = '{data_root}/my_dataset/features'``) or by starting with the variable's
    file value (``'../shared/data/niv/...'``). Applying it twice is the same as once.

    Raises ``ValueError`` when a flag names a variable the config lacks, a moved variable
    is used by no path (it would be silently ignored), a placeholder names an undefined
    variable, or the train/val/test datasets read different locations.
    """
    if declared is None:
        declared = _declared_in_file(cfg)
    flags = dict(data_root=data_root, feature_dir=feature_dir)
    for name, flag in flags.items():
        if flag is not None and cfg.get(name) is None:
            raise ValueError(f'{_name(cfg)}: --{name.replace("_", "-")} needs a config that '
                             f'defines the variable {name!r} (inherit a dataset base from '
                             'configs/_base_/datasets/)')
    targets, file_targets, moved = {}, {}, []
    for name in PATH_VARIABLES:
        if name in declared and declared[name] is not None:
            file_targets[name] = _absolute(_fill(str(declared[name]), file_targets), REPO_ROOT)
        if cfg.get(name) is None:
            continue
        current = _fill(str(cfg[name]), targets)
        from_file = name in declared and str(cfg[name]) == str(declared[name])
        resolved_before = _absolute(current, Path.cwd()) == file_targets.get(name)
        if flags.get(name) is not None or (name in declared and not from_file
                                           and not resolved_before):
            moved.append(name)  # a flag, --cfg-options or a caller's value
        # a config file's relative paths are read from the repository root, others from the CWD
        targets[name] = _absolute(flags.get(name) or current,
                                  REPO_ROOT if from_file and flags.get(name) is None
                                  else Path.cwd())
    literals = {name: str(declared[name]) for name in targets
                if name in declared and '{' not in str(declared[name])}
    unset = [name for name in PATH_VARIABLES if name in cfg and cfg[name] is None]
    _relocate(cfg, targets, literals, unset)
    for name in moved:
        _require_use(cfg, name, targets[name])
    if flags['data_root'] is not None:
        _require_datasets_moved(cfg, targets['data_root'])
    check_split_locations(cfg)
    return cfg


def _require_datasets_moved(cfg, root: str) -> None:
    """``--data-root`` moved ``data_root``: a train/val/test dataset whose ``data_root`` is
    not built from it (an absolute path elsewhere) would stay where it is while the paths built
    from the variable (the model's text features) move: refused, naming it. A path that is
    inside the new root, as written or through links, is left alone."""
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        dataset = (cfg.get(loader) or {}).get('dataset') if hasattr(cfg.get(loader), 'get') \
            else None
        value = dataset.get('data_root') if hasattr(dataset, 'get') else None
        if not isinstance(value, str) or '{' in value:
            continue
        if not any(_at_or_below(spell(value), spell(root))  # a dataset folder that is a
                   for spell in (os.path.abspath, os.path.realpath)):  # link: passT H07
            raise ValueError(f'{_name(cfg)}: --data-root {root}: {loader}.dataset.data_root='
                             f'{value!r} is not built from the variable data_root, so it would '
                             'stay where it is while the paths built from data_root move; '
                             "expected it written as '{data_root}/<dataset>' (as "
                             'configs/_base_/datasets/ do), or set it with --cfg-options '
                             f'{loader}.dataset.data_root=DIR')


def _at_or_below(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _name(cfg) -> str:
    return getattr(cfg, 'filename', None) or 'config'


def check_resolved(**paths) -> None:
    """A dataset given a path with an unfilled ``{data_root}``-style placeholder was built from a
    config nobody resolved: say how to load it."""
    for name, value in paths.items():
        if any('{' + var + '}' in str(value) for var in PATH_VARIABLES):
            raise ValueError(f'{name}={value!r} still holds a location placeholder: the config '
                             'was not resolved; load it with vpn_plugin.data_paths.load_config '
                             '(or build datasets with vpn_plugin.apis.build_split_dataset, '
                             'runners with the config\'s PlanningRunner)')


def _declared_in_file(cfg) -> dict:
    """The location variables as the config file ``cfg.filename`` sets them ({} without one)."""
    from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
    from mmengine.config import Config
    filename = getattr(cfg, 'filename', None)
    if not filename or not Path(filename).is_file():
        return {}
    raw = Config.fromfile(filename)
    return {name: raw[name] for name in PATH_VARIABLES if raw.get(name) is not None}


def _fill(text: str, targets: dict) -> str:
    for name, value in targets.items():
        text = text.replace('{' + name + '}', value)
    return text


def _absolute(path: str, base: Path) -> str:
    """``path`` made absolute against ``base``, normalised without following links."""
    return os.path.abspath(os.path.join(base, os.path.expanduser(path)))


def _relocate(cfg, targets: dict, literals: dict, unset=()) -> None:
    """Fill the placeholders and move the literal prefixes (longest first) of every string;
    ``unset``: the variables defined as None (named when a path is built from one)."""
    order = sorted(literals, key=lambda n: -len(literals[n]))
    unresolved = []

    def move(key: str, text: str) -> str:
        text = _fill(text, targets)
        for name in order:
            old, new = literals[name].rstrip('/'), targets[name].rstrip('/')
            if new.startswith(old + '/') and (text == new or text.startswith(new + '/')):
                break  # already at a target below the file's root: moved again, it nested
                # (--data-root ROOT/sub named ROOT/sub/sub/sub/..., a valid root refused)
            if text == literals[name] or text.startswith(old + '/'):
                text = targets[name] + text[len(old):]
                break
        if any('{' + name + '}' in text for name in PATH_VARIABLES):
            unresolved.append(f'{key} = {text!r}')
        return text

    _map_strings(cfg._cfg_dict, move)
    for name, value in targets.items():
        cfg[name] = value
    named_unset = [name for name in unset if any('{' + name + '}' in u for u in unresolved)]
    if named_unset:
        raise ValueError(f'{_name(cfg)}: {"; ".join(unresolved)} is built from '
                         f'{", ".join(named_unset)}, which is None (e.g. --cfg-options '
                         f'{named_unset[0]}=None); expected a folder path')
    if unresolved:
        raise ValueError(f'{_name(cfg)}: {"; ".join(unresolved)} names a location variable '
                         f'the config does not define (expected one of {PATH_VARIABLES}; '
                         'inherit a dataset base from configs/_base_/datasets/)')


def _map_strings(node, move, prefix: str = '') -> None:
    """Replace every string ``s`` under ``node`` (dicts/lists) by ``move(key path, s)``."""
    items = node.items() if hasattr(node, 'items') else enumerate(node)
    for key, value in list(items):
        where = f'{prefix}.{key}' if prefix else str(key)
        if isinstance(value, str):
            node[key] = move(where, value)
        elif isinstance(value, (dict, list)) or hasattr(value, 'items'):
            _map_strings(value, move, where)


def _require_use(cfg, name: str, target: str) -> None:
    """A moved location must be read by some path of the config, or the move does nothing.
    A helper variable (``paths = dict(feature_dir='{feature_dir}')``, a ``_name``) reads
    nothing itself: a dataset whose own absolute path ignores the move is not a use."""
    used = []

    def find(key: str, text: str) -> str:
        top = key.split('.')[0]
        helper = top.startswith('_') or top in PLUGIN_KEYS
        if not helper and (text == target or text.startswith(target.rstrip('/') + '/')):
            used.append(key)
        return text

    _map_strings(cfg._cfg_dict, find)
    if not used:
        raise ValueError(f'{_name(cfg)}: {name} was set to {target}, but no path of the '
                         f"config is built from it, so it would change nothing; build the "
                         f"dataset paths from it ('{{{name}}}/...', as configs/_base_/datasets/ "
                         'do) or set the paths themselves')


def check_split_locations(cfg) -> None:
    """The train/val/test datasets must read the same data root, features and cache: a split
    moved alone (``--cfg-options train_dataloader.dataset.feature_dir=X``) is refused."""
    for key in PATH_VARIABLES:
        values = {}
        for split in ('train', 'val', 'test'):
            dataset = (cfg.get(f'{split}_dataloader') or {}).get('dataset') or {}
            if hasattr(dataset, 'get') and dataset.get(key) is not None:
                values[f'{split}_dataloader.dataset.{key}'] = str(dataset[key])
        if len({os.path.realpath(value) for value in values.values()}) > 1:  # a link to the
            # same folder is the same folder (P4: a symlinked test feature_dir was refused)
            listed = ', '.join(f'{where}={value!r}' for where, value in values.items())
            raise ValueError(f'{_name(cfg)}: the splits read different {key}s: {listed}. '
                             'Move them together with the top-level variable: --cfg-options '
                             f'{key}=DIR' + (f' (or --{key.replace("_", "-")} DIR)'
                                             if key != 'cache_dir' else ''))


# top-level variables of configs/_base_/datasets/planning_dataset.py that are copied into the
# dataset dicts when the config file is parsed: --cfg-options after parsing does not reach them
DATASET_VARIABLES = ('observation', 'window_policy', 'device_resident')
# top-level variables the dataset base copies into its loaders / datasets when it is read
# ({variable: (helper dict that copies it, the place it lands)}): a later change of the
# variable alone reaches none of them
COPIED_VARIABLES = {**{key: ('dataset', f'dataset.{key}') for key in DATASET_VARIABLES},
                    'batch_size': ('loader', 'batch_size')}


def _copies_kept(cfg, key: str, value) -> tuple:
    """({'<split>_dataloader.<place>': value held}, the same as text) of the loaders whose
    copy of the top-level variable ``key`` is not ``value``."""
    kept = {}
    place = COPIED_VARIABLES[key][1]
    for split in ('train', 'val', 'test'):
        node = cfg.get(f'{split}_dataloader') or {}
        for part in place.split('.')[:-1]:
            node = node.get(part) if hasattr(node, 'get') else None
        last = place.split('.')[-1]
        if hasattr(node, 'get') and last in node and node[last] != value:
            kept[f'{split}_dataloader.{place}'] = node[last]
    return kept, ', '.join(f'{where}={held!r}' for where, held in kept.items())


def _refuse_undefined_variables(path, cfg, cfg_options: dict) -> None:
    """``--cfg-options data_root=... / feature_dir=... / cache_dir=...`` on a config that defines
    no such variable (its datasets hold their own paths), or ``test_horizon=T`` on one without
    ``horizon`` (``apply_horizon`` leaves it unchanged), changed nothing without a word, and the
    run recorded the option: ``ValueError`` naming the key and what to set instead."""
    for key in ('test_horizon', *PATH_VARIABLES):
        if key not in cfg_options or cfg.get(key) is not None:
            continue
        if key == 'test_horizon':
            if cfg.get('horizon') is not None or 'horizon' in cfg_options:
                continue
            instead = ('give horizon=T with it (the horizons are then written into the '
                       'datasets), or edit the datasets of the config')
        else:
            instead = "edit the datasets' own paths in the config"
        raise ValueError(f'{path}: --cfg-options {key}={cfg_options[key]!r}: the config defines '
                         f'no {key} variable (its datasets set their own), so the option would '
                         f'change nothing; {instead}')


def _refuse_inert_variables(path, cfg, cfg_options: dict) -> None:
    """``--cfg-options observation=concat3`` (or ``batch_size=7``) changes the top-level
    variable only: the datasets and loaders keep the value the file gave them (a test of
    'authors' observations said nothing): ``ValueError`` naming the keys to set instead."""
    for key in COPIED_VARIABLES:
        if key not in cfg_options:
            continue
        kept, listed = _copies_kept(cfg, key, cfg_options[key])
        if kept:
            raise ValueError(
                f'{path}: --cfg-options {key}={cfg_options[key]!r} changes the top-level '
                'variable only, which the config copied into its datasets when it was read: '
                f'they keep {listed}; set those keys instead (--cfg-options '
                + ' '.join(f'{where}={cfg_options[key]}' for where in kept) + ')')


def refuse_inert_file_variables(cfg) -> None:
    """A config file that sets ``observation = 'mean3'`` (or ``window_policy``,
    ``device_resident``, ``batch_size``) under a base that already copied the variable into
    its datasets and loaders changes nothing (the run trained on the base's values without a
    word): ``ValueError`` naming the file, the variable and the keys to set instead. The file
    that copies it (the one that also defines the ``dataset`` / ``loader`` helper) is exempt."""
    path = cfg.filename
    if not path or not Path(path).is_file():
        return
    for file in config_chain(path):
        own, assigned = _own_top_level(file), _assigned_names(file)
        for key, (helper, place) in COPIED_VARIABLES.items():
            if key not in own or helper in assigned:
                continue
            kept, listed = _copies_kept(cfg, key, own[key])
            if kept:
                raise ValueError(
                    f'{file}: {key} = {own[key]!r} changes the top-level variable only: its '
                    f'base copied {key} into the loaders when it was read, and they keep '
                    f'{listed}; set those keys in this file instead (e.g. '
                    f'train_dataloader = {_nested_dict(place, own[key])}, one per split), or '
                    'remove the variable')


def refuse_inert_helpers(cfg) -> None:
    """A config file with a ``_base_`` that assigns a helper of the base files
    (``dataset = 'crosstask'``; ``runner_keys.CONFIG_HELPERS``) and never reads it: the bases
    used their own when they were read, so the value reaches no key (a NIV run without a
    word). ``dataset_variant`` is read by the protocol and left out."""
    import ast
    from vpn_plugin.runner_keys import CONFIG_HELPERS
    path = Path(cfg.filename) if cfg.filename else None
    if path is None or not path.is_file():
        return
    assigned = _assigned_names(path)
    read = ({node.id for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
            if path.suffix == '.py' else set())  # a .yaml / .json key reads no other key
    for name in CONFIG_HELPERS:
        if name != 'dataset_variant' and '_base_' in assigned and name in assigned \
                and name not in read:
            raise ValueError(f'{path}: {name} = ... sets a helper variable of its base files, '
                             'which they used when they were read; here nothing reads it, so '
                             'it changes no key of the run; set the keys it fed instead (e.g. '
                             'train_dataloader = dict(dataset=dict(...))), or inherit the '
                             "config of the dataset you mean (_base_ = ['configs/...'])")


def _nested_dict(place: str, value) -> str:
    """``'dataset.observation'``, 'mean3' -> ``"dict(dataset=dict(observation='mean3'))"``."""
    text = repr(value)
    for part in reversed(place.split('.')):
        text = f'dict({part}={text})'
    return text


def _assigned_names(file: Path) -> set:
    """The names one config file assigns at top level (any value, without its bases)."""
    import ast
    if file.suffix != '.py':  # its keys as written, _base_ included (the literal reader drops it)
        return set(_safe_mapping(file))
    return {target.id for node in ast.parse(file.read_text()).body
            if isinstance(node, ast.Assign) for target in node.targets
            if isinstance(target, ast.Name)}


def _refuse_derived_horizons(path, cfg_options: dict) -> None:
    """``model.horizon=4`` etc. would be overwritten by :func:`apply_horizon`: refuse it."""
    derived = sorted(key for key in cfg_options if key.endswith('.horizon'))
    if derived:
        raise ValueError(f'{path}: --cfg-options {", ".join(derived)}: the horizon is set in '
                         'one place; give horizon=T (train.py / test.py: --horizon T), and '
                         'test_horizon=T for a different test horizon')

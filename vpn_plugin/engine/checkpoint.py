"""Checkpoints in and out of a planner: strict loading, atomic saving.

* :func:`load_weights` is the one way a checkpoint's tensors reach a model: ``PlanningRunner``
  (``load_from`` and ``--resume`` of ``tools/train.py``, ``tools/test.py``, MMAction2's own
  tools, the protocol runner) and ``vpn_plugin.apis.init_planner`` call it. Every tensor of
  the model (parameters and persistent buffers, the PKG ``log_transitions`` / ``pkg_ready``
  included) must come from the checkpoint with its shape, and the checkpoint may hold no other
  tensor; otherwise the run stops naming the missing and unexpected keys and the shapes
  (mmengine only warns and scores whatever was left initialised). Partial loading
  (fine-tuning from another model) is an explicit opt-in: the config's ``load_partial = True``
  (``--cfg-options load_partial=True``) or ``init_planner(..., partial=True)``; it loads the
  tensors that fit and logs the rest. Resuming is always strict.
  Tensors that fit are not enough: a checkpoint's ``meta.dataset_meta`` (what training
  records: the training set's ``horizon``, ``num_actions``, ``num_tasks``, ``feature_dim``,
  action and task names) must agree with the model built from the config (its ``horizon``)
  and with the metainfo of the data it is run on (counts, feature size, names)
  (:func:`meta_mismatches`): a SCHEMA or PDPP checkpoint of T=3 has the tensors of T=4 and
  would otherwise score T=4 windows. The text features a planner holds (ViterbiPlanNet,
  SCHEMA, CompactPlanNet, CEFITO: ``BasePlanner.text_features_identity``, SHA-256 of their
  values) must be those of ``meta.text_features``, which ``PKGHook`` records at training
  (a test with ``model.text_embeddings.file`` swapped is refused). A planner's checkpoint that
  records neither (a bare state dict, ``meta`` or ``meta.dataset_meta`` removed, a converted
  one without them) is refused too: nothing could tell another taxonomy's checkpoint from the
  right one. The opt-in ``unchecked_checkpoint = True`` (:data:`UNCHECKED_KEY`,
  ``init_planner(..., unchecked=True)``) scores it, logs a warning and marks the output
  (``tools/test.py``'s metrics ``checkpoint/unchecked``, the protocol row's variant).
* A run reads, writes and deletes checkpoints only inside its own work dir. mmengine records
  absolute paths (``<work_dir>/last_checkpoint``, the best checkpoint in the message hub,
  which ``CheckpointHook`` deletes when a better one comes): in a work dir copied or moved
  from another run they name the other run's files. :func:`latest_checkpoint_in` and
  :func:`record_inside` resolve such a record to the file of the same name inside the work
  dir, or refuse it naming both paths (``PlanningRunner`` and ``tools/train.py`` use them).
* :func:`save_atomically`: a checkpoint is written to a temporary name and renamed into place,
  so a full disk or a read-only work dir never leaves a partial ``epoch_N.pth`` that
  ``--resume`` or ``tools/test.py`` could take; the error says so in one message.
  :func:`write_last_checkpoint` replaces ``last_checkpoint`` the same way, after the new
  checkpoint and before any deletion (``engine.checkpoint_hook``: a kill at any instant leaves
  a resumable work dir).
* Resuming copes with what a killed run (or an older version) left: :func:`latest_checkpoint_in`
  falls back to the newest complete checkpoint of the work dir when ``last_checkpoint`` is
  missing, empty or names a deleted file (and says so), and :func:`remove_partial_files`
  removes a dead writer's ``.<name>.<pid>.partial`` files.
* An EMA checkpoint stores each tensor once: mmengine's ``EMAHook`` writes the EMA weights as
  ``state_dict`` and the model's own as ``ema_state_dict`` (``module.<key>``), which repeats
  every tensor the two share (a frozen pre-stage such as KEPP's step model, the whole model
  while the EMA only copies it: a smoke run). :func:`share_ema_tensors` (PDPP's and CEFITO's
  EMA hooks) leaves those out of ``ema_state_dict`` and lists them under
  :data:`SHARED_EMA_KEY`; :func:`read_checkpoint` puts them back, so every reader (a resume
  included) sees mmengine's layout.
"""
from __future__ import annotations

import functools
import inspect
import logging
import math
import os
import pickle
import re
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple, Optional

import torch

from ..errors import check_file, replace_atomically, what_the_file_is
from ..core.viterbi import check_rows_normalised, row_sum_tolerance
from .rank_agreement import TRAIN_DATA_KEY

PARTIAL_LOAD_KEY = 'load_partial'  # top-level config variable: the opt-in for partial loading
UNCHECKED_KEY = 'unchecked_checkpoint'  # top-level config variable: score a checkpoint that
#                                         records no dataset meta / text features (warned, marked)
MODULE_PREFIX = r'^module\.'       # what model wrappers (DDP) add to every key
SHARED_EMA_KEY = 'ema_state_dict_shared'  # state_dict keys left out of ema_state_dict (equal)
SHOWN = 8                          # keys listed per kind of mismatch


class CheckpointMismatchError(ValueError):
    """A checkpoint's tensors do not fit the model built from the config; ``problems``: what
    does not fit, without the advice (for a caller that gives its own)."""

    def __init__(self, message: str, problems: str = ''):
        super().__init__(message)
        self.problems = problems or message


class CheckpointSaveError(OSError):
    """A checkpoint could not be written (disk full, read-only or missing work dir)."""


def read_checkpoint(filename, map_location='cpu', logger='current') -> dict:
    """The checkpoint dict of ``filename`` (mmengine's loader: local path or URL, torch's
    ``weights_only`` with vpn_plugin.compat's allow-list); a missing, truncated or foreign
    file raises an error naming it."""
    from mmengine.runner.checkpoint import _load_checkpoint
    name = str(filename)
    if '://' not in name:
        if not os.path.lexists(name):
            raise FileNotFoundError(f'checkpoint {name} does not exist')
        check_file(name, 'checkpoint')  # a folder, a FIFO, /dev/zero: named as such
    try:
        checkpoint = _load_checkpoint(name, map_location=map_location, logger=logger)
    except pickle.UnpicklingError:  # vpn_plugin.compat's messages: refused globals, not a pickle
        raise
    except Exception as error:  # torch's zip, pickle and OS errors (KeyError of a text file)
        found = what_the_file_is(name) if '://' not in name else 'a remote file'
        raise ValueError(f'cannot read checkpoint {name}: {found} ({error!r}); expected a '
                         'complete torch checkpoint (.pth written by torch.save or an mmengine '
                         'Runner)') from error
    if not isinstance(checkpoint, dict):
        raise ValueError(f'checkpoint {name} holds a {type(checkpoint).__name__}; expected a '
                         "dict (an mmengine checkpoint with 'state_dict', or a state dict)")
    if not isinstance(checkpoint.get('meta', {}), dict):
        raise ValueError(f'checkpoint {name}: "meta" is a {type(checkpoint["meta"]).__name__}; '
                         'expected a dict (what tools/train.py records: dataset_meta, ...)')
    check_ema_run(checkpoint, name, logger)
    restore_shared_ema(checkpoint, name)
    return checkpoint


RUN_KEY = 'run_id'  # meta[RUN_KEY] and ema_state_dict[RUN_KEY]: the training run that wrote them


def new_run_id() -> str:
    """A training run's id: drawn from the operating system (``uuid4``), never from the
    seeded random streams (two runs of one seed get two ids)."""
    return uuid.uuid4().hex


def bind_ema_to_run(checkpoint: dict, run_id: str) -> None:
    """Record ``run_id`` in a checkpoint being saved: in its ``meta`` and, when an EMA hook
    wrote one, inside its ``ema_state_dict``; :func:`check_ema_run` compares the two."""
    checkpoint.setdefault('meta', {})[RUN_KEY] = run_id
    if isinstance(checkpoint.get('ema_state_dict'), dict):
        checkpoint['ema_state_dict'][RUN_KEY] = run_id


def check_ema_run(checkpoint: dict, source: str, logger='current') -> None:
    """Refuse a checkpoint whose ``ema_state_dict`` was written by another training run than
    its weights and meta (:func:`bind_ema_to_run`): the complete EMA state of another run of
    the same model fits every tensor, so nothing else could tell. Both ids absent (a
    checkpoint of a version before they were recorded): loaded, and logged."""
    ema = checkpoint.get('ema_state_dict')
    if not isinstance(ema, dict):
        return
    meta = checkpoint.get('meta') or {}
    ours, theirs = meta.get(RUN_KEY), ema.get(RUN_KEY)
    if ours is None and theirs is None:
        from mmengine.logging import print_log
        print_log(f'checkpoint {source} records no run id (written by a version before '
                  'checkpoints recorded one): its EMA state (ema_state_dict) could not be tied '
                  'to the run that wrote its weights', logger=logger, level=logging.INFO)
        return
    if ours != theirs:
        raise ValueError(
            f'checkpoint {source}: its ema_state_dict was written by training run '
            f'{theirs or "(none recorded)"}, its weights and meta by run '
            f'{ours or "(none recorded)"}: an EMA state taken from another checkpoint (a resume '
            'would train that other run\'s model on under this run\'s EMA weights; the file is '
            'no longer one run\'s). Use the checkpoint as tools/train.py wrote it, or another '
            'checkpoint of this run; to keep its weights (state_dict, the EMA weights) and '
            f'drop the EMA state, delete its ema_state_dict and {SHARED_EMA_KEY} entries (a '
            'resume then trains on from the EMA weights)')


def share_ema_tensors(checkpoint: dict) -> None:
    """Leave out of ``checkpoint['ema_state_dict']`` every ``module.<key>`` tensor equal to
    ``state_dict[key]`` (same dtype, shape and values), listing the keys under
    :data:`SHARED_EMA_KEY` (module docstring)."""
    state, ema = checkpoint.get('state_dict'), checkpoint.get('ema_state_dict')
    if not isinstance(state, dict) or not isinstance(ema, dict):
        return
    shared = [key for key, value in state.items()
              if torch.is_tensor(value) and same_tensor(ema.get(f'module.{key}'), value)]
    for key in shared:
        del ema[f'module.{key}']
    if shared:
        checkpoint[SHARED_EMA_KEY] = shared


def same_tensor(a, b) -> bool:
    return (torch.is_tensor(a) and torch.is_tensor(b) and a.dtype == b.dtype
            and a.shape == b.shape and torch.equal(a, b))


def restore_shared_ema(checkpoint: dict, source: str) -> None:
    """Put the tensors :func:`share_ema_tensors` left out back into ``ema_state_dict`` (one
    found there, put back by hand, is kept; without an ``ema_state_dict`` there is nothing to
    restore)."""
    shared = checkpoint.pop(SHARED_EMA_KEY, None)
    state, ema = checkpoint.get('state_dict'), checkpoint.get('ema_state_dict')
    if ema is None:
        return
    if shared is not None:
        if not isinstance(state, dict) or not isinstance(ema, dict) or not isinstance(
                shared, list) or not all(isinstance(key, str) and key in state
                                         for key in shared):
            raise ValueError(f'checkpoint {source}: ema_state_dict_shared must list keys of '
                             'its state_dict beside an ema_state_dict (the tensors the two '
                             'share); a damaged or hand-edited file')
        for key in shared:
            ema.setdefault(f'module.{key}', state[key])
    check_ema_complete(state, ema, source)


EMA_STEPS_KEY = 'steps'  # the EMA's update count (mmengine's averaged model): its schedule


def check_ema_complete(state, ema, source: str) -> None:
    """An ``ema_state_dict`` (its shared tensors put back) must hold ``module.<key>`` for
    every tensor of ``state_dict``, its ``steps`` and nothing else: mmengine's EMA hooks load
    it with ``strict=False``, so a tensor missing there (the list of shared keys removed or
    cut short by a tool that keeps only what it knows) would resume at the model's initial
    weights, and a missing ``steps`` would restart the EMA's schedule (its next update a plain
    copy of the model), without a word; a key of no state_dict tensor stops mmengine's swap
    with a bare KeyError."""
    if not isinstance(state, dict) or not isinstance(ema, dict):
        return
    missing = [key for key, value in state.items()
               if torch.is_tensor(value) and f'module.{key}' not in ema]
    if missing:
        raise ValueError(f'checkpoint {source}: ema_state_dict lacks {len(missing)} of the '
                         f'{len(state)} state_dict tensors (e.g. module.{missing[0]}) and '
                         f'{SHARED_EMA_KEY} does not list them as shared; expected the file '
                         'tools/train.py wrote (a damaged or hand-edited file: a resumed EMA '
                         'would start those tensors from the initial weights)')
    if EMA_STEPS_KEY not in ema:
        raise ValueError(f'checkpoint {source}: ema_state_dict holds no "{EMA_STEPS_KEY}" (the '
                         'EMA\'s update count); expected the file tools/train.py wrote (a '
                         'damaged or hand-edited file: a resumed EMA would restart its '
                         'schedule, its next update a copy of the model)')
    unknown = [key for key in ema if key not in (EMA_STEPS_KEY, RUN_KEY) and not (
        key.startswith('module.') and key[len('module.'):] in state)]
    if unknown:
        raise ValueError(f'checkpoint {source}: ema_state_dict holds {len(unknown)} key(s) of '
                         f'no state_dict tensor ({_listed(unknown)}); expected "{EMA_STEPS_KEY}" '
                         'and module.<key> for each state_dict key (a damaged or hand-edited '
                         'file, or the EMA of another model)')


def state_dict_of(checkpoint: dict, source: str = 'checkpoint') -> 'OrderedDict[str, object]':
    """The checkpoint's ``state_dict`` (or the dict itself) with a wrapper's ``module.``
    prefix removed, its ``_metadata`` kept (as mmengine's loader)."""
    state = checkpoint.get('state_dict', checkpoint)
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ValueError(f'{source}: "state_dict" is a {type(state).__name__}; expected a dict '
                         'of tensor names to tensors')
    metadata = getattr(state, '_metadata', OrderedDict())
    state = OrderedDict((re.sub(MODULE_PREFIX, '', key), value) for key, value in state.items())
    state._metadata = metadata
    return state


# dataset_meta keys compared with the model: its horizon is the training set's (its task
# count need not be the taxonomy's: a subset's planner has fewer tasks)
MODEL_META = ('horizon',)
DATA_META = ('num_actions', 'num_tasks', 'feature_dim', 'action_names', 'task_names')


def meta_mismatches(checkpoint: dict, model, data_meta: Optional[dict] = None) -> list:
    """'key=checkpoint value vs config value' for each field of the checkpoint's
    ``meta.dataset_meta`` that disagrees with ``model`` (:data:`MODEL_META`) or with the
    ``data_meta`` (a dataset's ``metainfo``: :data:`DATA_META`; the horizon of the data may
    differ, a model's ``cross_horizon`` rules decide). [] when nothing is recorded."""
    meta = checkpoint.get('meta')
    recorded = meta.get('dataset_meta') if isinstance(meta, dict) else None
    if not isinstance(recorded, dict):
        return []
    wrong = {}
    for key in MODEL_META:
        ours = getattr(model, key, None)
        if key in recorded and ours is not None and recorded[key] != ours:
            wrong[key] = (f'{key}={recorded[key]!r} in the checkpoint, {ours!r} in the '
                          "config's model" + (horizon_hint(model, recorded[key], ours)
                                              if key == 'horizon' else ''))
    for key in DATA_META:
        if key in wrong or key not in recorded or key not in (data_meta or {}):
            continue
        difference = _difference(recorded[key], data_meta[key])
        if difference:
            wrong[key] = f"{key}: {difference} in the checkpoint and the config's data"
    return list(wrong.values())


def horizon_hint(model, trained, wanted) -> str:
    """How a checkpoint of ``model``'s class trained for horizon ``trained`` is tested on
    ``wanted``-step windows: with the config it was trained with and ``test_horizon`` (a
    planner that follows the data's horizon), plus ``model.cross_horizon`` (a model with a
    rule for shorter windows, ViterbiPlanNet), or not at all (the hint named test_horizon
    alone for every model: a VPN test following it was refused for the missing
    cross_horizon, and one on LONGER windows, which the model cannot plan, refused again)."""
    if not all(isinstance(h, int) and not isinstance(h, bool) for h in (trained, wanted)):
        return ''
    modes = [m for m in getattr(model, 'cross_horizon_modes', (None,)) if m is not None]
    if getattr(model, 'follows_data_horizon', False):
        option, given = '', ''
    elif wanted < trained and modes:
        option, given = f" and model.cross_horizon={modes[0]!r}", f' model.cross_horizon={modes[0]}'
    else:
        return (f' (this model plans the horizon it was trained for'
                + (' or a shorter one (model.cross_horizon)' if modes else '')
                + f': T={wanted} windows need a model trained for T={wanted})')
    return (f' (a test of it on T={wanted} windows: the config it was trained with'
            + (f', test_horizon={wanted}{option}' if option else f' and test_horizon={wanted}')
            + f', e.g. --cfg-options test_horizon={wanted}{given}, as '
            'configs/vpn_niv_t6_eval_t3.py does)')


def _run_config(trained_cfg_text):
    """A checkpoint's ``meta['cfg']`` (mmengine's config text) parsed once per load: the PKG,
    resume and test-override checks each read it; None when it is no readable config (a
    dict or list there as well: no cache key). Read only: the parsed Config is shared."""
    return _parsed_config(trained_cfg_text) if isinstance(trained_cfg_text, str) else None


@functools.lru_cache(maxsize=4)
def _parsed_config(trained_cfg_text: str):
    from mmengine.config import Config
    try:
        return Config.fromstring(trained_cfg_text, '.py')
    except Exception:  # noqa: BLE001  (a config text of another version: nothing to compare)
        return None


def _plain(value):
    """A config value as plain Python (ConfigDicts as dicts, at any depth in lists): what
    the option comparisons below compare and print."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value.to_dict() if hasattr(value, 'to_dict') else value


def model_option_differences(trained_cfg_text, model_cfg, locations: bool = True) -> list:
    """'key: X in training, Y here' for each option of ``model_cfg`` that differs from the
    ``model`` of ``trained_cfg_text`` (a checkpoint's ``meta['cfg']``, mmengine's config
    text); [] when it holds no readable config. Without ``locations``, options that differ
    only in file locations (a moved data root; what the files hold is checked by content)
    are left out."""
    found = _model_option_values(trained_cfg_text, model_cfg)
    if found is None:
        return []
    keys, before, now = found
    lines = [f'model.{key}: {before[key]!r} in training, {now[key]!r} here'
             for key in keys if before[key] != now[key]]
    return lines if locations else [line for line in lines if not _path_only(line)]


def _model_option_values(trained_cfg_text, model_cfg) -> Optional[tuple]:
    """(keys, {key: value in training}, {key: value here}) of the ``model`` options of
    ``trained_cfg_text`` and ``model_cfg``, defaults filled and resolved as the class
    resolves them; None when either holds no model config."""
    run = _run_config(trained_cfg_text)
    trained = run.get('model') if run is not None else None
    if not isinstance(model_cfg, dict) or not isinstance(trained, dict):
        return None
    # a key one side leaves out holds its class's default (dvl_layers=1 given at test to a
    # run that left it out was 'None in training, 1 here': a change that is none), and a value
    # the class resolves from another option is compared resolved (KEPP's step_n_timesteps
    # None: the plan's n_timesteps)
    cls = _model_class(trained.get('type')) if trained.get('type') == model_cfg.get('type') \
        else None
    defaults = _option_defaults(cls)
    keys = sorted(set(trained) | set(model_cfg))

    def values(options) -> dict:
        found = {key: _plain(options[key]) if key in options else defaults.get(key)
                 for key in keys}
        if 'pkg' in found and (found['pkg'] is None or isinstance(found['pkg'], dict)):
            found['pkg'] = _pkg_options(found['pkg'])
        resolve = getattr(cls, 'resolved_options', None)
        return resolve(found) if callable(resolve) else found
    return keys, values(trained), values(model_cfg)


def _pkg_options(pkg: Optional[dict]) -> dict:
    """``model.pkg`` with PKGBuilder's defaults filled, without ``recount``: whether a test
    counts the graph again is no training option (PKGHook names a recount that gave another
    graph than the checkpoint's: ``pkg_hook.mark_recount``)."""
    from ..models.pkg_builder import changes_nothing
    options = {**pkg_defaults(), 'type': 'PKGBuilder', **(pkg or {})}
    options.pop('recount', None)
    # a perturbation at its identity (LabelNoise(0.0), a sweep's 0 point) counts the graph
    # counted without it: refused / named as "another graph" though the graph and every number
    # were the training's; the seed acts only through the perturbations left
    perturbations = options.get('perturbations')
    if isinstance(perturbations, (list, tuple)):
        options['perturbations'] = [p for p in perturbations if not changes_nothing(_plain(p))]
        if not options['perturbations']:
            options['seed'] = pkg_defaults()['seed']
    return options


def _model_class(model_type):
    """The registered model class of ``model_type`` (None when it is not registered)."""
    from mmaction.registry import MODELS
    cls = MODELS.get(model_type) if isinstance(model_type, str) else None
    return cls if isinstance(cls, type) else None


def _option_defaults(cls) -> dict:
    """{option: default} of the ``__init__`` of the model class ``cls`` ({} for None)."""
    from ..config_types import option_defaults
    return {} if cls is None else option_defaults(cls)


FEATURE_STATS_KEY = 'feature_statistics'  # meta: the training features' mean / std
# a test's features are named when their mean moves by more than this many training standard
# deviations or their standard deviation differs by more than this factor: the same features
# of another split move by hundredths; another scale (x10) or extractor by far more
FEATURE_MEAN_SHIFT, FEATURE_STD_RATIO = 0.5, 1.5


def feature_statistics_note(checkpoint: dict, filename: str, tested: Optional[dict],
                            what: str = 'test features') -> str:
    """'' when the statistics of the features tested or planned from (``what``;
    ``datasets.planning_dataset.observation_statistics``) are those of the checkpoint's training
    features (its ``meta[FEATURE_STATS_KEY]``) at the scale of :data:`FEATURE_MEAN_SHIFT` /
    :data:`FEATURE_STD_RATIO`, or either is unknown (a record of no finite mean and std is
    :func:`not_compared`'s); else the line that names both."""
    trained = (checkpoint.get('meta') or {}).get(FEATURE_STATS_KEY)
    if not isinstance(trained, dict) or not isinstance(tested, dict) or \
            not tested.get('values'):
        return ''
    try:
        mean, std = float(trained['mean']), float(trained['std'])
        test_mean, test_std = float(tested['mean']), float(tested['std'])
    except (KeyError, TypeError, ValueError):
        return ''
    if not _comparable('feature_statistics', trained):  # a NaN record: not_compared says so
        return ''
    ratio = max(test_std, 1e-12) / max(std, 1e-12)
    if abs(test_mean - mean) <= FEATURE_MEAN_SHIFT * max(std, 1e-12) and \
            1 / FEATURE_STD_RATIO <= ratio <= FEATURE_STD_RATIO:
        return ''
    return (f'the {what} have mean {test_mean:.4g}, std {test_std:.4g}; {filename} '
            f'was trained on features of mean {mean:.4g}, std {std:.4g} (features of another '
            'scale or extractor?)')


FEATURES_FOLDER_KEY = 'features_folder'  # meta: the training feature folder, file by file
# meta: '<file>: <note>' of each training feature file that records a damaged video
TRAINING_DAMAGE_KEY = 'damaged_features'
FILE_DIGEST_CHARS = 16  # hex digits of each feature file's sha256 a checkpoint records


def features_folder_record(feature_dir, dataset=None) -> Optional[dict]:
    """What a checkpoint's ``meta[FEATURES_FOLDER_KEY]`` records of its training features:
    ``{'folder', 'fingerprint', 'files', 'bytes'}`` of the feature folder (what the notes show:
    ``datasets.provenance.folder_fingerprint``) and, for every feature file of the folder, what
    a test compares: ``'digests'``, ``{file name: first FILE_DIGEST_CHARS hex of its sha256}``,
    and ``'frames'``, ``{file stem: its frames array's digests}``
    (``datasets.features.frames_digest``: the same features in another file format or dtype),
    through ``dataset.feature_digests`` (the planning dataset reading the folder: the
    observation cache's memos, a folder hashed before costs nothing) when given; for a union's
    ``{source name: folder}``, ``{'sources': {name: record}}``; None without a folder."""
    from ..datasets.provenance import feature_files, folder_fingerprint
    if isinstance(feature_dir, dict):
        parts = getattr(dataset, 'parts', None) or {}
        sources = {name: features_folder_record(folder, parts.get(name))
                   for name, folder in feature_dir.items()}
        return dict(sources=sources) if sources and all(sources.values()) else None
    if not feature_dir or not isinstance(feature_dir, (str, os.PathLike)) or \
            not Path(feature_dir).is_dir():
        return None
    files = feature_files(feature_dir)
    hashing = getattr(dataset, 'feature_digests', None)
    digests, frames = _digests(files, hashing), _digests(files, hashing, frames=True)
    return dict(folder=str(Path(feature_dir).resolve()), **folder_fingerprint(feature_dir),
                digests={path.name: digest[:FILE_DIGEST_CHARS]
                         for path, digest in zip(files, digests)},
                frames={path.stem: pair for path, pair in zip(files, frames) if ' ' in pair})


def features_folder_note(checkpoint: dict, filename: str, feature_dir,
                         what: str = 'test features', dataset=None) -> str:
    """'' when the features are read from the checkpoint's training feature files (its
    ``meta[FEATURES_FOLDER_KEY]``), or either is unknown; else the line that names both
    (features of another synthetic seed, negated ones: same mean and std, other files).
    ``feature_dir``: the folder read (a union's ``{source name: folder}``, each compared with
    the training folder of that source). The files ``dataset`` reads
    (``dataset.feature_files_read``; without a dataset, every feature file of the folder) are
    compared with the record's per-file digests (:func:`_files_not_trained_on`): a file of
    another content, or one the training folder did not have (a file the dataset reads), is
    named; a copy elsewhere, a
    subset or a superset of the training files, the same frames in another file format are
    not. A record without per-file digests is compared with nothing (``not_compared`` says
    so)."""
    trained = (checkpoint.get('meta') or {}).get(FEATURES_FOLDER_KEY)
    if not isinstance(trained, dict):
        return ''
    if isinstance(feature_dir, dict) and isinstance(trained.get('sources'), dict):
        parts = getattr(dataset, 'parts', None) or {}
        return '; '.join(note for note in (
            features_folder_note({'meta': {FEATURES_FOLDER_KEY: trained['sources'][name]}},
                                 filename, folder, f'{what} of {name}', parts.get(name))
            for name, folder in feature_dir.items() if name in trained['sources']) if note)
    if isinstance(trained.get('sources'), dict) and trained['sources'] and \
            not isinstance(feature_dir, dict):  # a union's checkpoint tested on one folder
        notes = [features_folder_note({'meta': {FEATURES_FOLDER_KEY: source}}, filename,
                                      feature_dir, what, dataset)
                 for source in trained['sources'].values() if isinstance(source, dict)]
        return '' if not notes or '' in notes else notes[0]
    if not isinstance(trained.get('digests'), dict) or not feature_dir or \
            not isinstance(feature_dir, (str, os.PathLike)) or not Path(feature_dir).is_dir():
        return ''
    differs = _files_not_trained_on(trained, feature_dir, dataset)
    if not differs:
        return ''
    from ..datasets.provenance import folder_fingerprint
    now = folder_fingerprint(feature_dir)  # shown only
    return (f'the {what} are read from {Path(feature_dir).resolve()} (fingerprint '
            f'{now["fingerprint"]}, {now["files"]} files); {filename} was trained on the '
            f'features of {trained.get("folder")} (fingerprint {trained.get("fingerprint")}, '
            f'{trained.get("files")} files): {differs}')


def _files_not_trained_on(trained: dict, folder, dataset) -> str:
    """'' when every feature file ``dataset`` reads (``feature_files_read``) is a training file
    (:func:`files_unlike_training`); else what differs, the first files named. Without a
    dataset every feature file of ``folder`` is compared, and a file the training folder did
    not have is not named (nothing says it is read: another video added since)."""
    from ..datasets.provenance import feature_files
    reads = callable(getattr(dataset, 'feature_files_read', None))
    read = dataset.feature_files_read() if reads else feature_files(folder)
    other, absent, half, unknown, rounded = files_unlike_training(
        trained, read, getattr(dataset, 'feature_digests', None))
    absent = absent if reads else []
    return '; '.join(filter(None, (
        other and f'{len(other)} of the {len(read)} files read differ from the training files '
                  f'of the same name ({_listed(other)}): other features (another seed or '
                  'extractor?)',
        absent and f'{len(absent)} of the {len(read)} files read were not in the training '
                   f'folder ({_listed(absent)})',
        half and f'{len(half)} of the {len(read)} files read {half_text(half)}',
        rounded and f'{len(rounded)} of the {len(read)} files read {rounded_text(rounded)}',
        unknown and f'{len(unknown)} of the {len(read)} files read {unknown_text(unknown)}')))


def half_text(names) -> str:
    """What a file equal to its training file at float16 precision only holds."""
    return (f'equal the training features at float16 precision only ({_listed(names)}): the '
            'same features in another dtype (one side stored as float16: about 3 significant '
            'digits)')


def rounded_text(names) -> str:
    """What a file holding its training file's values rounded to float16 (stored in a wider
    float) is."""
    return (f'are the training features rounded to float16 ({_listed(names)}): every value '
            'the float16 rounding of the training file\'s (about 3 significant digits), '
            'stored as a wider float')


def files_unlike_training(trained: dict, read, hashing=None) -> tuple:
    """(other, absent, half, unknown, rounded): the names of the files ``read`` whose content
    is not the training file's of their name (``trained['digests']``, a checkpoint's
    :func:`features_folder_record`) nor, in another file format, the frames array of the
    training file of their stem (``trained['frames']``); those of no training file's name or
    stem; those equal to their training file's frames at float16 precision only (another
    dtype: :func:`_same_at_float16`); those whose bytes are not the training file's of their
    name or stem and whose stem the record has no frames digest of (a partial or edited
    record: the same features in another dtype or format cannot be told from others, so
    they are called neither); those equal to their training file's frames at float16
    precision whose every value is a float16 value, stored in a wider float (the training
    features rounded to float16: read again to tell them from values changed below float16
    precision, which stay ``other``). ``hashing``: a planning dataset's ``feature_digests`` (its
    memos). The frames arrays are read only of the files whose bytes are no training file's."""
    from ..datasets.file_digests import MISSING, NOT_A_FILE
    digests, frames = trained['digests'], trained.get('frames')
    frames = frames if isinstance(frames, dict) else {}
    found = _digests(read, hashing)
    other, absent, unmatched, unknown = [], [], [], []
    trained_stems = {Path(str(name)).stem for name in digests}
    for path, digest in zip(map(Path, read), found):
        if digest in (MISSING, NOT_A_FILE):  # the dataset's reader names these
            continue
        if digests.get(path.name) == digest[:FILE_DIGEST_CHARS]:
            continue
        if path.stem in frames:
            unmatched.append(path)
        elif path.name in digests or path.stem in trained_stems:  # frames unrecorded
            unknown.append(path.name)
        else:
            absent.append(path.name)
    arrays = _digests(unmatched, hashing, frames=True) if unmatched else []
    half, rounded = [], []
    for path, pair in zip(unmatched, arrays):
        recorded, found = str(frames[path.stem]).split(' '), pair.split(' ')
        if found[0] == recorded[0]:
            continue  # the training frames, in another file format
        if _same_at_float16(recorded, found):
            half.append(path.name)
        elif len(found) > 1 and len(recorded) > 1 and found[1] == recorded[1] and \
                holds_float16_values(path):  # float16(found) = float16(training), found exact
            rounded.append(path.name)
        else:
            other.append(path.name)
    return other, absent, half, unknown, rounded


def unknown_text(names) -> str:
    """What a file of another content than its training file's, whose frames the record
    lacks, is (:func:`files_unlike_training`'s ``unknown``)."""
    return (f'are not the training files of the same name byte for byte, and the checkpoint '
            f'records no frames digest of them ({_listed(names)}): whether their features '
            'differ (or are the same in another format or dtype) is not compared')


def _digests(paths, hashing=None, frames: bool = False) -> list:
    """``file_digests`` of ``paths`` (with ``frames``, of their frames arrays:
    ``datasets.features.frames_digest``), through ``hashing`` when given (a planning
    dataset's ``feature_digests``: its memos)."""
    from ..datasets.file_digests import file_digests
    from ..datasets.features import frames_digest
    if callable(hashing):
        return hashing(paths, frames=True) if frames else hashing(paths)
    return file_digests(paths, digest_of=frames_digest) if frames else file_digests(paths)


def holds_float16_values(path) -> bool:
    """Whether every value of the frames array of the feature file ``path`` is a float16
    value (its float16 rounding changes nothing); False when it cannot be read."""
    import numpy as np
    from ..datasets.features import read_feature_record
    try:
        frames = np.asarray(read_feature_record(path, frames_only=True)['frames_features'],
                            dtype=np.float32)
    except Exception:  # noqa: BLE001  (unreadable here: the dataset names it when it reads it)
        return False
    with np.errstate(over='ignore', invalid='ignore'):
        return bool(np.array_equal(frames, frames.astype(np.float16).astype(np.float32)))


def _same_at_float16(recorded: list, found: list) -> bool:
    """Whether two frames digests (``datasets.features.frames_digest``, split) of arrays
    that differ as read are the same features with one side stored as float16: equal at
    float16 precision and one stored dtype float16 (a record without dtypes, written before
    they were recorded: equal at float16 precision). Two float32 (or float64) files equal at
    float16 precision only hold other values: changed below float16 precision, not another
    dtype."""
    if len(recorded) < 2 or len(found) < 2 or found[1] != recorded[1]:
        return False
    dtypes = recorded[2:3] + found[2:3]
    return len(dtypes) < 2 or 'float16' in dtypes


# what a checkpoint's meta must record for a test, init_planner or plan.py to compare its
# training with this run: record -> (meta key, what is then not compared)
TRAINING_RECORDS = {
    'cfg': ('cfg', 'training options (no training config, meta[\'cfg\'])'),
    'feature_statistics': (FEATURE_STATS_KEY,
                           'feature scale (no training feature statistics, '
                           f'meta[\'{FEATURE_STATS_KEY}\'])'),
    'features_folder': (FEATURES_FOLDER_KEY,
                        'training feature files (no per-file digests of the training feature '
                        f'folder, meta[\'{FEATURES_FOLDER_KEY}\'])'),
    # compared at resume only (engine.rank_agreement.check_resume_data)
    'train_data': (TRAIN_DATA_KEY,
                   f"training data (no training data digest, meta['{TRAIN_DATA_KEY}'])"),
}
TESTED_RECORDS = ('cfg', 'feature_statistics', 'features_folder')  # what a test compares
RESUMED_RECORDS = ('cfg', 'train_data')  # what a resume compares


def not_compared(checkpoint: dict, records=TESTED_RECORDS) -> list:
    """One short string per record of :data:`TRAINING_RECORDS` (``records``: those the caller
    compares) that ``checkpoint`` lacks, so that its training cannot be compared with this run
    (converted authors' checkpoints and bare state dicts record no config; checkpoints older
    than the feature statistics or the per-file digests lack those); [] when all are there.
    Written as ``not_compared`` in test_metrics.json and said in one line by every caller."""
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    missing = []
    for record in records:
        key, text = TRAINING_RECORDS[record]
        value = meta.get(key)
        if record == 'cfg':
            value = _run_config(value)
        if not value or not _comparable(record, value):
            missing.append(text)
    return missing


def _comparable(record: str, value) -> bool:
    """Whether a recorded ``value`` of ``record`` is one the comparisons can read: a feature
    statistics record with a finite mean and std, a feature folder record with per-file digests
    (a union's: each source's); a record of another shape was compared with nothing."""
    if record == 'feature_statistics':
        try:
            return all(math.isfinite(float(value[key])) for key in ('mean', 'std'))
        except (KeyError, TypeError, ValueError):
            return False
    if record == 'features_folder':
        if not isinstance(value, dict):
            return False
        if 'sources' in value:
            sources = value['sources']
            return isinstance(sources, dict) and bool(sources) and all(
                _comparable(record, source) for source in sources.values())
        return isinstance(value.get('digests'), dict)
    return True


def not_compared_line(filename: str, missing: list, what: str = 'this test') -> str:
    """The one line that says what ``filename``'s training could not be compared by."""
    return (f'{filename} records too little to compare its training with {what}; not '
            f'compared: {"; ".join(missing)}')


def pkg_defaults() -> dict:
    """PKGBuilder's option defaults (``config_types.option_defaults``), what decides the graph
    (a new dict each call): ``recount`` left out (whether a test counts the graph again is no
    option of the graph), sequences as lists (a config's ``extra_datasets=[]`` is the
    default ``()``)."""
    from ..config_types import option_defaults
    from ..models.pkg_builder import PKGBuilder
    return {key: list(value) if isinstance(value, tuple) else value
            for key, value in option_defaults(PKGBuilder).items() if key != 'recount'}


PKG_LOCATION_KEYS = ('data_root', 'feature_dir', 'cache_dir', 'device_resident')


def check_loaded_pkg(checkpoint: dict, filename: str, model_cfg) -> None:
    """A checkpoint that carries its PKG is decoded (tested, resumed, fine-tuned) with that
    graph unless ``model.pkg.recount``: a config whose ``model.pkg`` asks for another graph
    (``UniformGraph``, ``smoothing=1``, an extra dataset) was scored with the checkpoint's
    and the row read as the config's. ``ValueError`` naming both unless they agree (the
    checkpoint's ``meta['cfg']`` says what its training counted; without it nothing is
    compared). A planner whose plans never read the PKG is not compared (its rows are the
    same under either graph)."""
    pkg = (model_cfg or {}).get('pkg') if isinstance(model_cfg, dict) else None
    state = checkpoint.get('state_dict') if isinstance(checkpoint.get('state_dict'), dict) \
        else checkpoint
    ready = [v for k, v in state.items() if str(k).endswith('pkg_ready')]
    if not isinstance(pkg, dict) or pkg.get('recount') is True or not ready or \
            not bool(ready[0]):
        return
    from ..models.base_planner import plans_read_pkg
    if not plans_read_pkg(model_cfg):  # PDPP (argmax), CEFITO: the graph is never decoded
        return
    run = _run_config((checkpoint.get('meta') or {}).get('cfg'))
    trained = run.get('model') if run is not None else None
    if not isinstance(trained, dict):
        return
    defaults = pkg_defaults()
    given, counted = _pkg_options(pkg), _pkg_options(trained.get('pkg'))
    for options in (given, counted):  # where the extra datasets lie may change, not which
        options['extra_datasets'] = [
            {k: v for k, v in _plain(d).items() if k not in PKG_LOCATION_KEYS}
            if hasattr(d, 'items') else d for d in options['extra_datasets'] or []]
    keys = [k for k in defaults if k != 'seed' or given['perturbations']
            or counted['perturbations']]
    differ = [f'{k}: {_plain(counted[k])!r} in training, {_plain(given[k])!r} here'
              for k in keys if _plain(counted[k]) != _plain(given[k])]
    if differ:
        raise ValueError(f'{filename} carries the PKG its training counted, and this config\'s '
                         f'model.pkg asks for another graph ({"; ".join(differ)}): it would be '
                         'decoded with the checkpoint\'s graph, not the config\'s. Set '
                         'model.pkg.recount=True to count the config\'s graph from the training '
                         'split, or give the model.pkg the checkpoint was trained with')


SAME, NAMED, IRRELEVANT = 'same', 'named', 'irrelevant'

# The one table of what a training run fixes that changes a measurement when a resume or a
# test of its checkpoint sets it otherwise: key -> (at resume, at test). SAME refuses, naming
# the key, the run's value, the value here and the checkpoint; NAMED is a warning and a mark
# of the result (test_metrics.json's 'changed_from_training'); IRRELEVANT passes: the option
# does not act there. 'model.*' is each model option (file locations left out: a moved run;
# what the files hold is checked by digest and meta), 'dataset.<key>' the training split's
# dataset against the resumed training split's (resume) or the test split's (test), with
# PlanningDataset's defaults. Options not listed act on neither: file locations, max_epochs (a
# run may be extended: rank_agreement.check_resume_epoch), the evaluator; model.pkg is
# check_loaded_pkg's, the EMA tested engine.ema's, the training data's content
# check_resume_data's (a digest). save_best / rule matter only when both runs validate.
TRAINING_OPTIONS = {
    'model.*': (SAME, NAMED),
    'optim_wrapper.optimizer.*': (SAME, IRRELEVANT),  # mmengine restores the optimiser's lr
    'optim_wrapper.clip_grad': (SAME, IRRELEVANT),
    'optim_wrapper.accumulative_counts': (SAME, IRRELEVANT),
    'param_scheduler': (SAME, IRRELEVANT),  # mmengine restores each scheduler's state
    'train_dataloader.batch_size': (SAME, IRRELEVANT),
    # the windows an epoch draws (a shortened run's): the training data's digest differed,
    # refused as "other training data" naming val_fraction / subset / limit (confirm1 O_nbpe3)
    'train_dataloader.num_batch_per_epoch': (SAME, IRRELEVANT),
    # the order of the resumed epochs' windows (shuffle, seed, another sampler type) and the
    # optimiser's parameter groups (a resume with other groups failed in torch's own words)
    'train_dataloader.sampler': (SAME, IRRELEVANT),
    'optim_wrapper.paramwise_cfg': (SAME, IRRELEVANT),
    # --auto-scale-lr scales the config's lr, which the restored optimiser state replaces
    'auto_scale_lr': (SAME, IRRELEVANT),
    # mmengine restores the run's; a test draws nothing with it (PDPP / KEPP sample with
    # per-window seeds, model.sampling_seed: a model option)
    'randomness.seed': (SAME, IRRELEVANT),
    'custom_hooks.<EMA>.*': (SAME, IRRELEVANT),
    'default_hooks.checkpoint.save_best': (SAME, IRRELEVANT),
    'default_hooks.checkpoint.rule': (SAME, IRRELEVANT),
    # how the run chose its checkpoint: a test of a unified run under selection='authors'
    # logged "model selection: authors" without a word (confirm5 T16)
    'selection': (SAME, NAMED),
    'dataset.horizon': (SAME, NAMED),  # a cross-horizon test is allowed, and named
    'dataset.observation': (SAME, NAMED),  # 'concat3' on an 'authors' run: same 1536 dims
    'dataset.observed_steps': (SAME, NAMED),  # 1 at test of a run of 0: SR 12.59 -> 17.41
    'dataset.window_policy': (SAME, NAMED),
    'dataset.frame_dim': (SAME, NAMED),
    'dataset.val_fraction': (SAME, IRRELEVANT),  # which training videos validate
    'dataset.split_seed': (SAME, IRRELEVANT),
    'dataset.subset_fraction': (SAME, IRRELEVANT),
    'dataset.subset_seed': (SAME, IRRELEVANT),
    # a validation on fewer windows from the resumed epoch on had its scores compared with the
    # run's best (save_best); the training split's are its data digest's too
    'dataset.limit': (SAME, IRRELEVANT),
    'dataset.limit_seed': (SAME, IRRELEVANT),
}
PURPOSES = ('resume', 'test')
# what an option of the table means when a config leaves it unset (None): `selection=
# 'unified'` at a test of a run trained with it unset was named "None in training, 'unified'
# here" (and refused at a resume), the same selection (tools/test.py logs the unset one so)
OPTION_DEFAULTS = {'selection': 'unified'}
# the mmengine registry of the class each configured section builds (its ``type``): an argument
# the section leaves out holds that class's default (a resume given `sampler.round_up=True`,
# AdamW's `betas=(0.9, 0.999)`, StepLR's `begin=0` or `accumulative_counts=1`, each the
# default, was refused as "None in the run, <value> here": the same run)
SECTION_REGISTRIES = {'optim_wrapper': 'OPTIM_WRAPPERS', 'optim_wrapper.optimizer': 'OPTIMIZERS',
                      'param_scheduler': 'PARAM_SCHEDULERS',
                      'train_dataloader.sampler': 'DATA_SAMPLERS'}


# the dataset options that only select a split's windows (which videos, which windows, in which
# order): the split's data digest (``rank_agreement.dataset_digest``) says what they selected
SPLIT_SELECTION = ('val_fraction', 'split_seed', 'subset_fraction', 'subset_seed', 'limit',
                   'limit_seed')


def selecting_the_same(lines: list, same_loaders) -> list:
    """``lines`` ('key: X in the run, Y here') without those of a :data:`SPLIT_SELECTION`
    option of a loader in ``same_loaders`` (whose split's data digest is the run's: the same
    windows in the same order; a resume given ``limit=10000`` over a 262-window split,
    which keeps every window, was refused as another run)."""
    return [line for line in lines if not any(
        line.startswith(f'{loader}.dataset.{key}: ') for loader in same_loaders
        for key in SPLIT_SELECTION)]


class OptionDifferences(NamedTuple):
    """'key: X in training, Y here' lines of :func:`training_option_differences`, by class."""
    refused: list
    named: list


def training_option_differences(trained_cfg_text, cfg, purpose: str) -> OptionDifferences:
    """Each option of :data:`TRAINING_OPTIONS` that ``cfg`` sets otherwise than the run of
    ``trained_cfg_text`` (a checkpoint's ``meta['cfg']``), sorted by its class for
    ``purpose`` ('resume' or 'test'); nothing when no readable config is recorded."""
    column = PURPOSES.index(purpose)
    trained = _run_config(trained_cfg_text)
    found = OptionDifferences([], [])
    if trained is None:
        return found
    where = ' in the run, ' if purpose == 'resume' else ' in training, '
    for rule, line in _option_lines(trained_cfg_text, trained, cfg, purpose):
        verdict = TRAINING_OPTIONS[rule][column]
        if verdict != IRRELEVANT:
            target = found.refused if verdict == SAME else found.named
            target.append(line.replace(' in training, ', where))
    return found


def check_test_options(trained_cfg_text, cfg, source, use: str,
                       state_dict: Optional[dict] = None) -> list:
    """The 'key: X in training, Y here' lines a test or plan from the run of
    ``trained_cfg_text`` (a checkpoint's ``meta['cfg']``) names (:data:`TRAINING_OPTIONS`,
    NAMED at test), after refusing those it cannot honour (SAME): ``ValueError`` naming
    ``source`` (the checkpoint) and what to ``use`` it for ('test it', 'plan'). Model options
    that the checkpoint's ``state_dict`` makes unread (the model class's
    ``options_unread_with(state_dict)``: KEPP's ``step_checkpoint`` beside a trained step
    model) are not named: the test does not use them."""
    found = training_option_differences(trained_cfg_text, cfg, 'test')
    if found.refused:
        raise ValueError(f'{source} was trained with other options than this config: '
                         f'{"; ".join(found.refused)}; {use} with the options it was trained '
                         'with')
    unread = _options_unread_with(cfg.get('model'), state_dict)
    named = [line for line in found.named
             if not any(line.startswith(f'model.{key}: ') for key in unread)]
    return _weights_against_cfg(named, trained_cfg_text, cfg.get('model'), state_dict)


def _weights_against_cfg(named: list, trained_cfg_text, model_cfg, state_dict) -> list:
    """``named`` with the line of each model option that the checkpoint's weights show
    (the class's ``options_shown_by(state_dict)``: PDPP's diffusion steps, the length of its
    schedule) otherwise than its ``meta['cfg']`` claims (a forged or hand-edited record)
    worded so: the value of each, and the one this test uses (its model's, which loads
    those weights)."""
    cls = _model_class(model_cfg.get('type')) if isinstance(model_cfg, dict) else None
    shown_by = getattr(cls, 'options_shown_by', None)
    shown = shown_by(state_dict) if callable(shown_by) and isinstance(state_dict, dict) else {}
    found = _model_option_values(trained_cfg_text, model_cfg) if shown else None
    if found is None:
        return named
    _, before, now = found
    lines = []
    for line in named:
        key = line.split(': ', 1)[0][len('model.'):] if line.startswith('model.') else None
        if key in shown and before.get(key) != shown[key][0]:
            value, what = shown[key]
            line = (f"model.{key}: {before[key]!r} in the checkpoint's meta['cfg'] (its "
                    f'training config), but its weights show {value!r} ({what}); '
                    f'{now[key]!r} here is used'
                    + (', as the weights show' if now[key] == value else ''))
        lines.append(line)
    return lines


def _options_unread_with(model_cfg, state_dict) -> tuple:
    """The model options that a model of ``model_cfg`` loading ``state_dict`` does not read
    (its class's ``options_unread_with``); () without either."""
    cls = _model_class(model_cfg.get('type')) if isinstance(model_cfg, dict) else None
    unread = getattr(cls, 'options_unread_with', None)
    return tuple(unread(state_dict)) if callable(unread) and isinstance(state_dict, dict) else ()


# what an option a test names (a line of check_test_options, by its start) does at the test
OPTION_KINDS = (
    ('test_dataloader.dataset.', "the test split's options change what is tested (its "
                                 'windows and what they observe)'),
    ('selection', 'selection says how the run chose its checkpoint: the test scores the '
                  'checkpoint given'),
    ('model.', 'a model option changes the plans where the model reads it at test (decoding, '
               'sampling, search: decode, top_k, sampling_seed, sampler) and nothing where '
               'only training reads it (a loss weight, a pre-stage\'s schedule)'),
)


def named_options_text(named) -> str:
    """What the options of ``named`` (:func:`check_test_options`' lines) do at a test, one
    clause per kind present (:data:`OPTION_KINDS`)."""
    return '; '.join(text for start, text in OPTION_KINDS
                     if any(line.startswith(start) for line in named))


def _option_lines(trained_cfg_text, trained, cfg, purpose: str) -> list:
    """(table key, 'key: X in training, Y here') for each option of :data:`TRAINING_OPTIONS`
    that differs (``trained``: the parsed ``trained_cfg_text``); the EMA and checkpoint ones
    only where the table may act on them."""
    lines = [('model.*', line) for line in
             model_option_differences(trained_cfg_text, cfg.get('model'), locations=False)]
    lines += [('optim_wrapper.optimizer.*', line) for line in _section_lines(
        'optim_wrapper.optimizer', _configured(trained, 'optim_wrapper.optimizer'),
        _configured(cfg, 'optim_wrapper.optimizer'))]
    if purpose == 'resume':
        lines += [('custom_hooks.<EMA>.*', line) for line in
                  ema_hook_differences(trained.get('custom_hooks'), cfg.get('custom_hooks'))]
    for key in TRAINING_OPTIONS:
        if key.endswith('*') or key.startswith('dataset.'):
            continue
        if key.startswith('default_hooks.checkpoint.') and (
                trained.get('val_cfg') is None or cfg.get('val_cfg') is None):
            continue
        before, now = (_configured(config, key) for config in (trained, cfg))
        if key == 'param_scheduler':
            before, now = _ends_left_unset(trained, cfg, before, now)
        if before != now:  # shown as each config gives it (its class's defaults compared)
            before, now = (_plain(_dotted(config, key)) if _dotted(config, key) is not None
                           else value for config, value in ((trained, before), (cfg, now)))
            lines.append((key, f'{key}: {before!r} in training, {now!r} here'))
    return lines + _dataset_lines(trained, cfg, purpose)


def _configured(config, key: str):
    """The value at a dotted ``key`` of a config as the run builds it: a section of
    :data:`SECTION_REGISTRIES` (or each entry of a list of them) with its class's defaults
    filled in; an option a section leaves unset, that class's default; else
    :data:`OPTION_DEFAULTS` for an unset value."""
    value = _with_class_defaults(_plain(_dotted(config, key)), SECTION_REGISTRIES.get(key))
    value = _with_runner_defaults(config, key, value)
    section, _, option = key.rpartition('.')
    if value is None and section in SECTION_REGISTRIES:
        built = _with_class_defaults(_plain(_dotted(config, section)),
                                     SECTION_REGISTRIES[section])
        value = built.get(option) if isinstance(built, dict) else None
    return OPTION_DEFAULTS.get(key) if value is None else value


def _with_runner_defaults(config, key: str, value):
    """``value`` (:func:`_configured`'s section at ``key``) with the arguments mmengine's
    runner gives the class it builds where the config leaves them out, which are not the
    class's defaults: the training sampler's ``seed`` (the run's ``randomness.seed``; an
    explicit ``seed=None`` draws a random one: a resume given it was accepted as "the class
    default" and shuffled its epochs otherwise, and one given the run's seed was refused), a
    parameter scheduler's ``convert_to_iter_based`` (False, popped by the registry's builder)
    and its default ``end`` (the config's max_epochs, or max_iters for ``by_epoch=False``:
    ``end=10`` given to a resume of a 10-epoch run was refused; two runs that both leave it
    unset are compared without it, :func:`_ends_left_unset`)."""
    given = _plain(_dotted(config, key))
    if key == 'train_dataloader.sampler' and isinstance(value, dict) and \
            isinstance(given, dict) and 'seed' not in given:
        randomness = _plain(config.get('randomness')) or {}
        value = dict(value, seed=None if randomness.get('diff_rank_seed')
                     else randomness.get('seed'))
    if key == 'param_scheduler':
        items, givens = ((value, given) if isinstance(value, list) else ([value], [given]))
        train_cfg = _plain(config.get('train_cfg')) or {}
        filled = []
        for item, raw in zip(items, givens if isinstance(givens, list) else [givens]):
            if isinstance(item, dict) and isinstance(raw, dict):
                item = dict(item, convert_to_iter_based=raw.get('convert_to_iter_based', False))
                if 'end' not in raw:
                    item['end'] = train_cfg.get('max_epochs' if raw.get('by_epoch', True)
                                                else 'max_iters', item.get('end'))
            filled.append(item)
        value = filled if isinstance(value, list) else filled[0]
    return value


def _ends_left_unset(trained, cfg, before, now) -> tuple:
    """The configured ``param_scheduler`` of two runs (``before``, ``now``) without the
    ``end`` of each scheduler that both configs leave unset: a run extended at resume (a
    larger max_epochs) keeps the schedule restored from its checkpoint (warned:
    :func:`extended_schedule_note`)."""
    raws = [_plain(_dotted(config, 'param_scheduler')) for config in (trained, cfg)]
    raws = [raw if isinstance(raw, list) else [raw] for raw in raws]
    values = [value if isinstance(value, list) else [value] for value in (before, now)]
    if len(values[0]) != len(values[1]) or len(raws[0]) != len(raws[1]):
        return before, now
    for index, (old, new) in enumerate(zip(*raws)):
        if isinstance(old, dict) and isinstance(new, dict) and 'end' not in old and \
                'end' not in new:
            for side in values:
                if isinstance(side[index], dict):
                    side[index] = {k: v for k, v in side[index].items() if k != 'end'}
    return values[0], values[1]


def extended_schedule_note(trained_cfg_text, cfg, filename) -> str:
    """'' unless a resume extends its run (a larger ``train_cfg.max_epochs`` / ``max_iters``
    than the run of ``trained_cfg_text``, a checkpoint's ``meta['cfg']``) while a parameter
    scheduler leaves its ``end`` unset: mmengine restores the scheduler with the run's end
    (its max_epochs then), so the lr changes no more after it; a StepLR(2, 0.5) run of 4
    epochs resumed to 8 trained epochs 5-8 at the lr of epoch 4 (a straight 8-epoch run
    halves it twice more) without a word. The line says so."""
    trained = _run_config(trained_cfg_text)
    if trained is None:
        return ''
    lines = []
    schedulers = _plain(cfg.get('param_scheduler'))
    for index, item in enumerate(schedulers if isinstance(schedulers, list) else [schedulers]):
        if not isinstance(item, dict) or 'end' in item:
            continue
        length = 'max_epochs' if item.get('by_epoch', True) else 'max_iters'
        before = (_plain(trained.get('train_cfg')) or {}).get(length)
        now = (_plain(cfg.get('train_cfg')) or {}).get(length)
        if isinstance(before, int) and isinstance(now, int) and now > before:
            lines.append(f'param_scheduler[{index}] ({item.get("type")}) ends at {before} '
                         f'(its end was the run\'s train_cfg.{length}={before}, restored from '
                         f'{filename}), not at {now}')
    if not lines or _same_lr_path(schedulers, trained, cfg):
        return ''
    return ('this resume extends the run: ' + '; '.join(lines) + ': the resumed steps keep the '
            'learning rate its schedule had reached (a straight run of this config would go on '
            "changing it); set the scheduler's end explicitly to say so, or start a new run")


def _same_lr_path(schedulers, trained, cfg) -> bool:
    """Whether the epoch-based learning-rate ``schedulers`` (a config's ``param_scheduler``)
    give the same lr at every epoch of ``cfg``'s max_epochs with each unset ``end`` at
    ``trained``'s max_epochs (the restored run) as at ``cfg``'s (a straight run): a
    MultiStepLR whose last milestone is behind the run's end changes nothing when extended.
    False when they cannot be replayed here (iteration-based, not an LR schedule, unknown)."""
    import warnings
    import numpy as np
    import torch
    import mmengine.optim  # noqa: F401  (registers mmengine's schedulers)
    from mmengine.registry import PARAM_SCHEDULERS
    items = schedulers if isinstance(schedulers, list) else [schedulers]
    before = (_plain(trained.get('train_cfg')) or {}).get('max_epochs')
    now = (_plain(cfg.get('train_cfg')) or {}).get('max_epochs')
    if not all(isinstance(item, dict) and item.get('by_epoch', True) is True and
               str(item.get('type', '')).endswith('LR') for item in items):
        return False

    def path(end: int) -> list:
        weight = torch.nn.Parameter(torch.zeros(1))
        optimizer = torch.optim.SGD([weight], lr=1.0)
        built = [PARAM_SCHEDULERS.build(
            {**{k: v for k, v in item.items() if k != 'convert_to_iter_based'},
             'end': item.get('end', end)}, default_args=dict(optimizer=optimizer))
            for item in items]
        rates = []
        for _ in range(now):
            rates.append(optimizer.param_groups[0]['lr'])
            for scheduler in built:
                scheduler.step()
        return rates
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # "scheduler.step() before optimizer.step()"
            return bool(np.allclose(path(before), path(now), rtol=1e-12, atol=0))
    except Exception:  # noqa: BLE001  (a scheduler this replay cannot build: say it)
        return False


def _with_class_defaults(value, registry: Optional[str]):
    """``value`` (a config section: a dict with a ``type``, or a list of them) with each
    argument its registered class (mmaction's ``registry``, falling back to mmengine's) has a
    default for and the section leaves out filled in, as plain values (tuples as lists, as
    :func:`_plain` gives them); ``value`` itself without a registry or a known class."""
    if registry is None:
        return value
    if isinstance(value, list):
        return [_with_class_defaults(item, registry) for item in value]
    if not isinstance(value, dict) or not isinstance(value.get('type'), str):
        return value
    import mmaction.registry
    cls = getattr(mmaction.registry, registry).get(value['type'])
    if cls is None:
        return value
    from ..config_types import option_defaults
    defaults = {}
    for base in reversed(cls.__mro__):  # a mixin's __init__(*args, **kwargs) passes them on
        if '__init__' in vars(base) and base is not object:  # (StepLR: StepParamScheduler's)
            try:
                defaults.update(option_defaults(vars(base)['__init__']))
            except (TypeError, ValueError):  # no signature to read
                continue
    return _plain_deep({**defaults, **value})


def _plain_deep(value):
    """``value`` with tuples as lists at any depth (a config's ``betas=(0.9, 0.999)`` and the
    same pair read back from a saved config, or a class default, compare equal)."""
    if isinstance(value, dict):
        return {key: _plain_deep(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_deep(item) for item in value]
    return value


def _section_lines(name, before, now) -> list:
    """'name.key: X in training, Y here' for each key of two config sections that differs."""
    before, now = _plain(before) or {}, _plain(now) or {}
    return [f'{name}.{key}: {before.get(key)!r} in training, {now.get(key)!r} here'
            for key in sorted(set(before) | set(now)) if before.get(key) != now.get(key)]


def _dataset_lines(trained, cfg, purpose: str) -> list:
    """('dataset.<key>', line) for the dataset options of the table that differ: at a test,
    the training split of ``trained`` against this config's test split; at a resume, each
    training and validation split against this config's (a validation observed otherwise
    from the resumed epoch on had its scores compared with the run's best: save_best)."""
    pairs = [('train_dataloader', 'test_dataloader')] if purpose == 'test' else \
        [('train_dataloader', 'train_dataloader')] + (
            [('val_dataloader', 'val_dataloader')] if trained.get('val_cfg') is not None
            and cfg.get('val_cfg') is not None else [])
    lines = []
    for trained_loader, loader in pairs:
        before = _plain(_dotted(trained, f'{trained_loader}.dataset')) or {}
        now = _plain(_dotted(cfg, f'{loader}.dataset')) or {}
        if before and now and before.get('type') == now.get('type'):
            lines += _dataset_option_lines(before, now, loader)
    return lines


def training_split_differences(trained_cfg_text, cfg) -> list:
    """'train_dataloader.dataset.<key>: X in training, Y here' for each dataset option of
    :data:`TRAINING_OPTIONS` (``val_fraction``, ``split_seed``, ``subset_fraction``, ``limit``,
    ...) that ``cfg``'s training split sets otherwise than the run of ``trained_cfg_text``:
    why a graph recounted at test time (``model.pkg.recount``) is another; [] when no readable
    config is recorded or the splits are datasets of another type."""
    trained = _run_config(trained_cfg_text)
    if trained is None:
        return []
    before = _plain(_dotted(trained, 'train_dataloader.dataset')) or {}
    now = _plain(_dotted(cfg, 'train_dataloader.dataset')) or {}
    if not (before and now and before.get('type') == now.get('type')):
        return []
    return [line for _, line in _dataset_option_lines(before, now, 'train_dataloader')]


def _dataset_option_lines(before: dict, now: dict, loader: str) -> list:
    from ..datasets.planning_dataset import PlanningDataset
    defaults = {name: p.default for name, p in
                inspect.signature(PlanningDataset.__init__).parameters.items()}
    lines = []
    for rule in TRAINING_OPTIONS:
        if rule.startswith('dataset.'):
            key = rule.split('.', 1)[1]
            old, new = before.get(key, defaults.get(key)), now.get(key, defaults.get(key))
            if old != new:
                lines.append((rule, f'{loader}.dataset.{key}: {old!r} in training, '
                                    f'{new!r} here'))
    return lines


def _dotted(config, key: str):
    """The value at a dotted ``key`` of a config (None where a part is missing)."""
    for part in key.split('.'):
        config = config.get(part) if hasattr(config, 'get') else None
    return config


EMA_HOOKS = ('PDPPEMAHook', 'CEFITOEMAHook', 'EMAHook')


def ema_hook_differences(trained_hooks, hooks) -> list:
    """'custom_hooks.<Type>.key: X in the run, Y here' for the options of an EMA hook that
    differ: a resumed EMA would go on averaging with the new decay / schedule, a run of
    neither setting. Compared under the class-defaults rule of the other sections
    (:func:`_ema_hook_options`): an option spelled out at its class default equals an omitted
    one."""
    def ema(entries):
        return {h.get('type'): _ema_hook_options(h) for h in entries or ()
                if isinstance(h, dict) and h.get('type') in EMA_HOOKS}
    before, now = ema(trained_hooks), ema(hooks)
    added = [f'custom_hooks.{kind}: {"none" if kind not in before else "present"} in the run, '
             f'{"none" if kind not in now else "present"} here (an EMA started or dropped '
             'mid-run averages neither run\'s weights)'
             for kind in sorted(set(before) ^ set(now))]
    return added + [f'custom_hooks.{kind}.{key}: {before[kind].get(key)!r} in the run, '
            f'{now[kind].get(key)!r} here'
            for kind in sorted(set(before) & set(now))
            for key in sorted(set(before[kind]) | set(now[kind]))
            if before[kind].get(key) != now[kind].get(key)]


def _ema_hook_options(hook: dict) -> dict:
    """An EMA hook's entry with its class's defaults filled (:func:`_with_class_defaults`,
    mmengine's ``HOOKS``) and those of the averaged model it builds (``ema_type``, mmengine's
    ``MODELS``: ``EMAHook(momentum=...)`` passes them on), as the run builds it."""
    options = _with_class_defaults(_plain(dict(hook)), 'HOOKS')
    if isinstance(options.get('ema_type'), str):
        model = {**_with_class_defaults({'type': options['ema_type']}, 'MODELS'), **options}
        options = {key: value for key, value in model.items() if key != 'model'}
        options['type'] = hook.get('type')
    return options


def _path_only(line: str) -> bool:
    """Whether a 'model.key: X in training, Y here' line differs only in file locations
    (strings with a path separator)."""
    import ast

    def path_like(text) -> bool:
        return isinstance(text, str) and ('/' in text or '\\' in text)
    try:
        key, rest = line.split(': ', 1)
        before, after = rest[:-len(' here')].split(' in training, ')
        old, new = ast.literal_eval(before), ast.literal_eval(after)
    except (ValueError, SyntaxError):
        return False

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()}
        return '<path>' if path_like(value) else value
    return strip(old) == strip(new)


def unrecorded(checkpoint: dict, model) -> list:
    """What ``checkpoint`` does not record of what a planner is checked by: its
    ``meta.dataset_meta`` fields (:data:`MODEL_META`, :data:`DATA_META`) and, when ``model``
    holds text features, ``meta.text_features``. [] when everything is there."""
    meta = checkpoint.get('meta')
    if not isinstance(meta, dict):
        return ['meta']
    recorded = meta.get('dataset_meta')
    missing = (['meta.dataset_meta'] if not isinstance(recorded, dict) else
               [f'meta.dataset_meta.{key}' for key in MODEL_META + DATA_META
                if key not in recorded])
    if getattr(model, 'text_features_identity', lambda: None)() is not None and \
            not isinstance(meta.get('text_features'), dict):
        missing.append('meta.text_features')
    return missing


def recorded_setting(model, data_meta: Optional[dict]) -> dict:
    """What a checkpoint of ``model`` records of the setting it is for, as training does
    (mmengine's ``dataset_meta``, ``PKGHook``'s ``text_features``): ``data_meta`` (a
    dataset's metainfo) with the model's horizon, and the model's text features' identity."""
    recorded = {} if data_meta is None else dict(dataset_meta=dict(data_meta,
                                                                   horizon=model.horizon))
    identity = getattr(model, 'text_features_identity', lambda: None)()
    return recorded if identity is None else dict(recorded, text_features=identity)


def text_features_mismatch(checkpoint: dict, model) -> list:
    """['text features: ...'] when the checkpoint's recorded text features (``meta.
    text_features``) are not the ones ``model`` holds (another SHA-256); else []."""
    meta = checkpoint.get('meta')
    recorded = meta.get('text_features') if isinstance(meta, dict) else None
    ours = model.text_features_identity() if hasattr(model, 'text_features_identity') else None
    if not isinstance(recorded, dict) or ours is None:
        return []
    if recorded.get('sha256') == ours['sha256']:
        return _declaration_mismatch(recorded, ours)
    return [f"text features: trained with {recorded.get('kind', '?')} from "
            f"{recorded.get('source', '?')}{_read_from(recorded)} (sha256 "
            f"{str(recorded.get('sha256'))[:12]}, shape {recorded.get('shape')}), the config "
            f"gives {ours['kind']} from {ours['source']}{_read_from(ours)} (sha256 "
            f"{ours['sha256'][:12]}, shape {ours['shape']})"]


def _read_from(identity: dict) -> str:
    """', read from <cache files>' of a text-feature identity of encoded texts (a ``file``
    source names its file already); ', cache file not recorded' for an older checkpoint's."""
    files = identity.get('cache_files')
    if isinstance(files, list) and files:
        return f", read from {', '.join(map(str, files))}"
    source = str(identity.get('source', ''))
    return '' if source.startswith(('file ', 'given in code')) or 'cache_files' in identity \
        else ', cache file not recorded'


def _declaration_mismatch(recorded: dict, ours: dict) -> list:
    """['text features: ...'] when the same values were of another kind or declared of
    another encoder at training (``text_embeddings.file_provenance``): the rows would be
    labelled otherwise, e.g. the MiniLM stand-in's values saved to a file the test config
    takes as CLIP's. Checkpoints recording no declaration compare the kind only."""
    paper = 'CLIP text features'
    kinds = (recorded.get('kind'), ours.get('kind'))
    if None not in kinds and kinds[0] != kinds[1] and paper in kinds:
        return [f'text features: the same values (sha256 {ours["sha256"][:12]}) were '
                f'{kinds[0]} in training ({recorded.get("source", "?")}), the config calls '
                f'them {kinds[1]} ({ours["source"]}): declare what made the file '
                '(model.text_embeddings.encoder beside file) as trained']
    names = (recorded.get('encoder_name'), ours.get('encoder_name'))
    if None not in names and names[0] != names[1]:
        return [f'text features: the same values (sha256 {ours["sha256"][:12]}) were made by '
                f'{names[0]} in training ({recorded.get("source", "?")}), the config declares '
                f'{names[1]} ({ours["source"]}): declare the encoder it was trained with']
    if 'declared_encoder' not in recorded or recorded.get('declared_encoder') == \
            ours.get('declared_encoder'):
        return []
    return [f"text features: the file was declared {recorded['declared_encoder']!r} in training "
            f"(sha256 {str(recorded.get('file_sha256'))[:12]}), the config declares "
            f"{ours.get('declared_encoder')!r} (model.text_embeddings.encoder beside "
            'file): give the declaration it was trained with']


def _difference(theirs, ours) -> str:
    """'' when equal; else the values, or for lists of names their lengths or the first
    position where they differ."""
    if isinstance(theirs, (list, tuple)) and isinstance(ours, (list, tuple)):
        theirs, ours = list(theirs), list(ours)
        if theirs == ours:
            return ''
        if len(theirs) != len(ours):
            return f'{len(theirs)} vs {len(ours)} entries'
        index = next(i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b)
        return f'entry {index} is {theirs[index]!r} vs {ours[index]!r}'
    return '' if theirs == ours else f'{theirs!r} vs {ours!r}'


def check_finite(state: dict, source: str) -> None:
    """Refuse a checkpoint with NaN (or +inf) weights, naming it and the tensor: scored, it
    would fail deep inside the model (``log_emissions``) or give NaN metrics. ``-inf`` is kept
    in ``log_transitions`` (a missing PKG edge)."""
    for key, value in state.items():
        if not torch.is_tensor(value) or not value.is_floating_point():
            continue
        bad = torch.isnan(value) | (value == math.inf)
        if not key.endswith('log_transitions'):
            bad |= value == -math.inf
        if bool(bad.any()):
            raise ValueError(f'checkpoint {source}: tensor {key} {tuple(value.shape)} holds '
                             f'{int(bad.sum())} NaN/inf value(s); a diverged or damaged '
                             'training: use an earlier checkpoint')


def check_pkg_rows(state: dict, source: str) -> None:
    """Refuse a checkpoint whose filled PKG (``log_transitions`` whose ``pkg_ready`` is set)
    is not row-stochastic, naming the file: an edited or damaged graph that decoding would
    refuse later without naming where it came from."""
    for key, value in state.items():
        if not key.endswith('log_transitions') or not torch.is_tensor(value) or value.ndim != 2:
            continue
        ready = state.get(key[:-len('log_transitions')] + 'pkg_ready', True)
        if torch.is_tensor(ready) and ready.numel() == 1 and not bool(ready):
            continue  # the placeholder of an unfilled PKG: PKGHook fills it
        try:
            check_rows_normalised(value)
            if value.numel() and not bool((value.detach().double().exp() > 0).any()):
                raise ValueError('log_transitions holds no edge at all (every row all -inf: '
                                 'no action may follow any other); a PKG counted from a '
                                 'training split has edges')
        except ValueError as error:
            raise ValueError(f'checkpoint {source}: tensor {key}: {error}; an edited or '
                             'damaged PKG: use the checkpoint as its training wrote it, or set '
                             'model.pkg.recount=True to count the graph again from the '
                             'training split') from None


# flags of a pre-stage that a test cannot redo (the PKG, ``pkg_ready``, is recounted by PKGHook)
PRE_STAGE_FLAGS = {'classifier_ready': 'the task classifier', 'step_ready': 'the step model'}


def check_pre_stage_flags(checkpoint: dict, source: str) -> None:
    """Refuse a checkpoint whose ``state_dict`` (the EMA copy: what is tested) holds an
    untrained pre-stage that its ``ema_state_dict`` (the trained model) holds trained: written
    by a run shorter than its EMA's first update, by a version whose EMA copied the model
    before the pre-stages trained (``engine/ema.py``); named, not left to the model's "never
    trained" at the first batch."""
    state, ema = checkpoint.get('state_dict'), checkpoint.get('ema_state_dict')
    if not isinstance(state, dict) or not isinstance(ema, dict):
        return
    stale = sorted(key for key, value in state.items()
                   if key.rsplit('.', 1)[-1] in PRE_STAGE_FLAGS and torch.is_tensor(value)
                   and not bool(value) and bool(ema.get(f'module.{key}', False)))
    if stale:
        what = ', '.join(sorted({PRE_STAGE_FLAGS[key.rsplit('.', 1)[-1]] for key in stale}))
        raise ValueError(
            f'checkpoint {source}: its weights (state_dict, the EMA copy that is tested) hold '
            f'{what} untrained ({", ".join(stale)} False) while its ema_state_dict (the trained '
            'model) holds it trained: the run stopped before its EMA\'s first update (fewer '
            'training steps than the EMA hook\'s update_every / interval) and was written by a '
            'version whose EMA copied the model before the pre-stages; retrain it (this '
            'version copies the pre-stages into the EMA before the first step)')


def load_weights(model, checkpoint: dict, source: str, *, partial: bool = False,
                 logger='current', data_meta: Optional[dict] = None,
                 require_meta: bool = False, unchecked: bool = False) -> list:
    """Copy ``checkpoint``'s tensors into ``model`` (rules: module docstring).

    Raises ``CheckpointMismatchError`` naming ``source``, the model class, the missing and
    unexpected keys and the tensors of another shape, or the fields of the checkpoint's
    recorded meta and text features that disagree with ``model`` and ``data_meta``
    (:func:`meta_mismatches`, :func:`text_features_mismatch`), unless ``partial`` (then they
    are logged and the fitting tensors are loaded). ``require_meta`` (a planner's checkpoint):
    a checkpoint that records neither (:func:`unrecorded`) is refused unless ``unchecked``;
    returns what could not be checked ([] when everything was).
    """
    check_pre_stage_flags(checkpoint, source)
    state = state_dict_of(checkpoint, source)
    check_finite(state, source)
    if not getattr(getattr(model, 'pkg_builder', None), 'recount', False):
        check_pkg_rows(state, source)
    wrong_meta = meta_mismatches(checkpoint, model, data_meta) + \
        text_features_mismatch(checkpoint, model)
    other_model = other_model_note(checkpoint, model)
    if wrong_meta and not partial:
        raise CheckpointMismatchError(
            f'checkpoint {source} {other_model}was trained for another setting than the config: '
            f'{"; ".join(wrong_meta)} (its meta). Test it with the config it was '
            f'trained with (same horizon, dataset, actions, tasks, text features); to start '
            f'fine-tuning from it, set {PARTIAL_LOAD_KEY}=True',
            problems=f'{"; ".join(wrong_meta)} (its meta)')
    expected = model.state_dict()
    options = options_unlike_weights(model, state, expected)  # the option the shapes follow
    wrong = {}  # key -> (what the checkpoint holds, shape in the model)
    for key, value in list(state.items()):
        if key in expected and (not torch.is_tensor(value) or value.shape != expected[key].shape):
            found = tuple(value.shape) if torch.is_tensor(value) else type(value).__name__
            wrong[key] = (found, tuple(expected[key].shape))
            del state[key]
        elif key in expected and expected[key].is_floating_point() and \
                not value.is_floating_point():  # copied as is, 0.37 would become 0
            wrong[key] = (f'{tuple(value.shape)} {value.dtype}',
                          f'{tuple(expected[key].shape)} {expected[key].dtype}')
            del state[key]
    try:
        keys, other = _load_fitting(model, renormalised_pkg_rows(state, expected), wrong)
    except ValueError as error:  # a model's own check of what it loads (KEPP's graph, its T)
        if type(error) is not ValueError or str(source) in str(error):
            raise
        raise ValueError(f'checkpoint {source}: {error}') from None
    missing = [key for key in keys.missing_keys if key not in wrong]  # listed with shapes
    problems = '; '.join(filter(None, [options, mismatch_text(missing, keys.unexpected_keys,
                                                              wrong), other]))
    reduced = reduced_precision_note(state, expected)
    if reduced:
        from mmengine.logging import print_log
        print_log(f'checkpoint {source}: {reduced}', logger=logger, level=logging.WARNING)
    if not problems and not wrong_meta:
        return _unrecorded_fields(checkpoint, model, source, require_meta and not partial,
                                  unchecked, logger)
    if not partial:
        raise CheckpointMismatchError(
            f'checkpoint {source} {other_model}does not fit the model {type(model).__name__} '
            'of the config: '
            f'{problems}. Test it with the config it was trained with (same model, horizon, '
            f'dataset); to start fine-tuning from it, set {PARTIAL_LOAD_KEY}=True (loads only '
            'the tensors that fit)', problems=problems)
    from mmengine.logging import print_log
    if wrong_meta:
        problems = '; '.join([problems] + wrong_meta) if problems else '; '.join(wrong_meta)
    print_log(f'{PARTIAL_LOAD_KEY}=True: loaded the tensors of {source} {other_model}that fit '
              f'{type(model).__name__}; left as built: {problems}', logger=logger,
              level=logging.WARNING)
    return []


def options_unlike_weights(model, state: dict, expected: dict) -> str:
    """'model.<key> is <v> here, but the checkpoint's weights show <w> (<what>): ...' for
    each option the weights fix (the model class's ``options_shown_by``: PDPP's and KEPP's
    diffusion steps) that the checkpoint holds otherwise than the model built from the config
    ('' when none): the option a test changed, named before the tensor shapes it changes."""
    shown_by = getattr(type(model), 'options_shown_by', None)
    if not callable(shown_by):
        return ''
    theirs, ours = shown_by(state), shown_by(expected)
    return '; '.join(f'model.{key} is {ours[key][0]!r} here, but the checkpoint\'s weights '
                     f'show {value!r} ({what}): load it with model.{key}={value!r}, the '
                     'checkpoint\'s' for key, (value, what) in theirs.items()
                     if key in ours and ours[key][0] != value)


def reduced_precision_note(state: dict, expected: dict) -> str:
    """What a checkpoint's tensors stored in a coarser float than the model's parameters
    (float16 or bfloat16 weights for a float32 model: a file converted to half precision) make
    of the model: it computes with their rounded values, not with weights as trained; '' when
    every floating tensor is stored at least as finely as its parameter. It says what is known,
    never how the file came to be: tensors finer than float16 (a float64 graph buffer stored as
    float32) whose values all equal their float16 rounding are said to."""
    def coarser(key) -> bool:
        value, own = state[key], expected.get(key)
        return (torch.is_tensor(value) and torch.is_tensor(own) and value.is_floating_point()
                and own.is_floating_point()
                and torch.finfo(value.dtype).eps > torch.finfo(own.dtype).eps)
    lower = [key for key in state if coarser(key)]
    if not lower:
        return ''
    floating = sum(torch.is_tensor(v) and v.is_floating_point() for v in state.values())
    dtypes = ', '.join(sorted({str(state[key].dtype) for key in lower}))
    finer = [state[key] for key in lower
             if torch.finfo(state[key].dtype).eps < torch.finfo(torch.float16).eps]
    rounded = bool(finer) and all(torch.equal(t, t.to(torch.float16).to(t.dtype)) for t in finer)
    off = _pkg_rows_off(state, expected)
    return (f'{len(lower)} of its {floating} floating tensors are stored in {dtypes} (first '
            f'{lower[0]}), coarser than the model\'s {expected[lower[0]].dtype}: the model runs '
            'with their rounded values, not with the weights as trained' + (
                f' (the {", ".join(sorted({str(t.dtype) for t in finer}))} values equal their '
                'float16 rounding)' if rounded else '') + ''.join(
                f'; {key}: {int(rows.sum())} PKG row(s) the rounding left summing to other '
                'than 1 are renormalised' for key, rows in off.items()))


def _pkg_rows_off(state: dict, expected: dict) -> dict:
    """{key: rows (N,) bool} of the PKG tensors (``log_transitions`` (N, N)) of ``state``
    stored in a coarser float than the model's whose rows, in the model's dtype, miss 1 beyond
    its tolerance (``core.viterbi.row_sum_tolerance``) though the stored dtype's allow them:
    a bfloat16 checkpoint's graph (each log value rounded by up to 2^-8), which decoding in
    float32 refused (passT K4)."""
    off = {}
    for key, value in state.items():
        own = expected.get(key)
        if not (key.endswith('log_transitions') and torch.is_tensor(value) and value.ndim == 2
                and torch.is_tensor(own) and value.is_floating_point()
                and own.is_floating_point() and value.shape == own.shape
                and torch.finfo(value.dtype).eps > torch.finfo(own.dtype).eps):
            continue
        sums = value.detach().double().exp().sum(1)
        rows = ((sums - 1).abs() > row_sum_tolerance(own.dtype, len(sums))) & (sums != 0)
        if bool(rows.any()):
            off[key] = rows
    return off


def renormalised_pkg_rows(state: dict, expected: dict) -> dict:
    """``state``, or a copy whose coarse PKG rows that miss 1 in the model's dtype
    (:func:`_pkg_rows_off`; the file's own rows passed :func:`check_pkg_rows` at its dtype)
    are renormalised in that dtype: ``row - logsumexp(row)``, the distribution nearest to the
    rounded values; other rows are kept as stored."""
    off = _pkg_rows_off(state, expected)
    if not off:
        return state
    copy = OrderedDict(state)
    copy._metadata = getattr(state, '_metadata', OrderedDict())
    for key, rows in off.items():
        value = state[key].detach().to(expected[key].dtype).clone()
        value[rows] = value[rows] - torch.logsumexp(value[rows], 1, keepdim=True)
        copy[key] = value
    return copy


def other_model_note(checkpoint: dict, model) -> str:
    """'(a checkpoint of KEPP: its meta's config has model.type='KEPP'; the config builds
    PDPP) ' when the run that wrote ``checkpoint`` (``meta['cfg']``) trained another model
    type than ``model``'s class; '' when it is the same or nothing is recorded. A missing-key
    list alone does not tell the user that the file is of another planner."""
    run = _run_config((checkpoint.get('meta') or {}).get('cfg'))
    trained = (run.get('model') or {}).get('type') if run is not None else None
    if not isinstance(trained, str):
        return ''
    name = type(model).__name__
    if trained.rsplit('.', 1)[-1] == name:  # 'mmaction.PDPP' is PDPP too
        return ''
    return (f"(a checkpoint of {trained}: its meta's config has model.type={trained!r}; "
            f'the config builds {name}) ')


def check_same_planner(checkpoint: dict, model, source: str) -> None:
    """``CheckpointMismatchError`` when ``checkpoint``'s run trained another planner than
    ``model`` (:func:`other_model_note`): before the PKG, option and key comparisons, whose
    differences would all follow from that one."""
    note = other_model_note(checkpoint, model)
    if note:
        raise CheckpointMismatchError(
            f'checkpoint {source} {note}is not a checkpoint of the config\'s planner. Test it '
            f'with the config it was trained with; to start fine-tuning from it, set '
            f'{PARTIAL_LOAD_KEY}=True (loads only the tensors that fit)',
            problems=note.strip())


def _unrecorded_fields(checkpoint, model, source, required: bool, unchecked: bool,
                       logger) -> list:
    """A fitting checkpoint that records nothing to check it by (:func:`unrecorded`) is
    refused, or with ``unchecked`` logged; returns what was not checked."""
    missing = unrecorded(checkpoint, model) if required else []
    if missing and not unchecked:
        raise CheckpointMismatchError(
            f'checkpoint {source} records no {", ".join(missing)}: nothing can check that '
            'it was trained for this config (a checkpoint of another taxonomy, horizon or text '
            'features would be scored without a word). Give a checkpoint saved by '
            'tools/train.py (or converted with tools/convert_authors_checkpoint.py, which '
            f'records the config\'s); if you know it fits, set {UNCHECKED_KEY}=True '
            f'(--cfg-options {UNCHECKED_KEY}=True): the results then say that it was not '
            'checked')
    if missing:
        from mmengine.logging import print_log
        print_log(f'{UNCHECKED_KEY}=True: checkpoint {source} records no '
                  f'{", ".join(missing)}; it is scored UNCHECKED (its taxonomy, horizon and '
                  'text features could not be compared with the config)', logger=logger,
                  level=logging.WARNING)
    return missing


def _load_fitting(model, state, wrong: dict):
    """Load ``state`` non-strictly; returns (missing / unexpected keys, other errors). A key a
    model's own load hook renames (legacy names) may still meet a tensor of another shape:
    torch then loads the rest and raises; such mismatches join ``wrong``."""
    found = []
    handle = model.register_load_state_dict_post_hook(lambda module, keys: found.append(keys))
    other = ''
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as error:
        other = str(error)
        for key, theirs, ours in SIZE_MISMATCH.findall(other):
            wrong[key] = (_shape(theirs), _shape(ours))
        if SIZE_MISMATCH.search(other) and not re.search(r'\n\t(?!size mismatch)', other):
            other = ''  # every error was a size mismatch, now listed in ``wrong``
    finally:
        handle.remove()
    return found[-1], other


def _shape(text: str) -> tuple:
    return tuple(int(n) for n in text.split(',') if n.strip())


SIZE_MISMATCH = re.compile(r'size mismatch for (\S+): copying a param with shape '
                           r'torch\.Size\(\[([^\]]*)\]\) from checkpoint, the shape in current '
                           r'model is torch\.Size\(\[([^\]]*)\]\)')


def mismatch_text(missing, unexpected, wrong: dict, holder: str = 'the checkpoint') -> str:
    """'missing keys [...]; unexpected keys [...]; other shapes or dtypes: key: (a) in the
    checkpoint, (b) in the model, ...' ('' when everything fits; ``holder``: what holds the
    tensors of ``wrong``'s first shape)."""
    parts = []
    if missing:
        parts.append(f'missing keys {_listed(missing)}')
    if unexpected:
        parts.append(f'unexpected keys {_listed(unexpected)}')
    if wrong:
        shapes = [f'{key}: {found} in {holder}, {shape} in the model'
                  for key, (found, shape) in wrong.items()]
        parts.append('other shapes or dtypes: ' + '; '.join(shapes[:SHOWN])
                     + (f' (and {len(shapes) - SHOWN} more)' if len(shapes) > SHOWN else ''))
    return '; '.join(parts)


def _listed(keys) -> str:
    keys = list(keys)
    more = f' (and {len(keys) - SHOWN} more)' if len(keys) > SHOWN else ''
    return f'{keys[:SHOWN]}{more}'


RESUME_HINT = 'Free disk space or give a writable --work-dir, then continue with --resume'


def save_atomically(write, path, then=lambda: RESUME_HINT) -> None:
    """``write(temporary path)``, then rename it to ``path``: ``path`` is either the complete
    new file or untouched. An ``OSError`` (disk full, read-only or missing folder) removes the
    temporary file and raises ``CheckpointSaveError`` naming ``path``, the cause and
    ``then()`` (what to do next; worked out only when a save fails)."""
    replace_atomically(path, lambda temporary: write(str(temporary)),
                       lambda path, cause: CheckpointSaveError(
                           f'cannot save checkpoint {path}: {cause}; nothing was written there '
                           f'(the checkpoints saved before are intact). {then()}'))


LAST_CHECKPOINT = 'last_checkpoint'  # mmengine's record of the latest checkpoint of a work dir


def is_inside(path, folder) -> bool:
    """``path`` lies in ``folder`` (or below it), ``..`` and the links among its folders
    resolved. A last component that is a link is an entry of its folder (a work dir made of
    links to another run's checkpoints, passT H08/H09): a run replaces or deletes the link,
    never its target."""
    folder, path = Path(os.path.abspath(folder)).resolve(), Path(os.path.abspath(path))
    return folder in (path.parent.resolve() / path.name).parents


def record_inside(recorded: str, work_dir, what: str, required: bool = True,
                  logger='current') -> Optional[str]:
    """The checkpoint a work dir's record (``what``) names, inside ``work_dir``: the recorded
    path when it lies there; else the file of the same name in ``work_dir`` (a work dir copied
    or moved from another run: logged); else ``ValueError`` naming both paths, or None (logged)
    when not ``required`` (a best-checkpoint record: nothing of this run to replace)."""
    from mmengine.logging import print_log
    # a relative record names a file of the work dir ('epoch_2.pth' written by hand), not one
    # of the working directory: it was read against the cwd and logged "outside the work dir
    # (copied or moved from another run)" (passT H1)
    if recorded and not os.path.isabs(recorded) and is_inside(Path(work_dir) / recorded, work_dir) \
            and os.path.lexists(Path(work_dir) / recorded):
        recorded = str(Path(work_dir) / recorded)
    if os.path.isdir(recorded):  # was "outside the work dir" for the work dir itself
        itself = ' (the work dir itself)' if Path(recorded).resolve() == Path(
            work_dir).resolve() else ''
        text = f'{what} names {recorded!r}, a folder{itself}; expected a checkpoint file'
        if required:
            raise ValueError(f'{text}: give the checkpoint to continue from as --resume CKPT, '
                             f'or write its path into {what}')
        print_log(f'{text}: the record is dropped', logger=logger, level=logging.WARNING)
        return None
    if is_inside(recorded, work_dir):
        return recorded
    local = Path(work_dir) / Path(recorded).name
    if Path(recorded).name and local.is_file():
        print_log(f'{what} names {recorded}, outside the work dir {work_dir} (copied or moved '
                  f'from another run): using {local}', logger=logger, level=logging.WARNING)
        return str(local)
    if required:
        raise ValueError(f'{what} names {recorded!r}, outside the work dir {work_dir}, and the '
                         f'work dir holds no {Path(recorded).name or "such file"}: a run reads, '
                         'writes and deletes only inside its own work dir; give the checkpoint '
                         'to continue from as --resume CKPT, or copy it into the work dir')
    print_log(f'{what} names {recorded}, outside the work dir {work_dir}, which holds no such '
              'file: the record is dropped (that file is never replaced or deleted)',
              logger=logger, level=logging.WARNING)
    return None


def latest_checkpoint_in(work_dir, logger='current', template=None) -> Optional[str]:
    """The checkpoint to resume ``work_dir`` from: the one ``<work_dir>/last_checkpoint`` names,
    inside ``work_dir`` (:func:`record_inside`); when the record is missing or empty, or names
    a file that is gone (a run killed while rotating its checkpoints, by a version before
    ``engine.checkpoint_hook``; or killed before its first record), the newest complete
    checkpoint of the work dir (:func:`newest_checkpoint_in`, ``template``: the config's
    checkpoint name, :func:`checkpoint_template`), logged; None when there is none."""
    record = Path(work_dir) / LAST_CHECKPOINT
    recorded = record.read_text().strip() if record.is_file() else ''
    if recorded:
        path = record_inside(recorded, work_dir, str(record), logger=logger)
        if Path(path).is_file():
            _note_newer_checkpoint(path, work_dir, str(record), logger, template)
            return path
    newest = newest_checkpoint_in(work_dir, template)
    if recorded or newest:
        from mmengine.logging import print_log
        found = (f'resuming from the newest complete checkpoint of the work dir, {newest}'
                 if newest else 'the work dir holds no complete checkpoint: a fresh start')
        why = (f'{record} names {recorded}, which does not exist' if recorded else
               f'{work_dir} has no {LAST_CHECKPOINT} record')
        print_log(f'{why}: {found}', logger=logger, level=logging.WARNING)
    return newest


def _note_newer_checkpoint(path: str, work_dir, record: str, logger, template=None) -> None:
    """Log that ``record`` names ``path`` (``epoch_N.pth``) while the work dir holds a later
    ``epoch_M.pth``: the resume trains epochs N+1.. again and replaces that file (a record
    edited back to an earlier checkpoint did so without a word: passT H49)."""
    names = checkpoint_names(template)
    newest, match = newest_checkpoint_in(work_dir, template), names.match(Path(path).name)
    later = names.match(Path(newest).name) if newest else None
    if match and later and _kind(later) == _kind(match) and \
            _number(later) > _number(match):
        from mmengine.logging import print_log
        print_log(f'{record} names {Path(path).name}, and the work dir holds the later '
                  f'{Path(newest).name}: the run continues from {Path(path).name}, so the '
                  f'later {_kind(match)}s are trained again and their checkpoints replaced',
                  logger=logger, level=logging.WARNING)


def checkpoint_template(cfg) -> Optional[str]:
    """The config's checkpoint file name (mmengine's ``filename_tmpl``, e.g. ``'ckpt_{}.pth'``),
    None when it keeps mmengine's default (``epoch_{}.pth`` / ``iter_{}.pth``)."""
    hooks = cfg.get('default_hooks') if hasattr(cfg, 'get') else None
    hook = hooks.get('checkpoint') if hasattr(hooks, 'get') else None
    template = hook.get('filename_tmpl') if hasattr(hook, 'get') else None
    return template if isinstance(template, str) and template.count('{}') == 1 else None


def checkpoint_names(template=None) -> re.Pattern:
    """The names of a run's epoch / iteration checkpoints: mmengine's defaults and the config's
    ``template`` (a work dir whose ``ckpt_{}.pth`` files were "no epoch checkpoint": passT
    P3b); group ``kind`` ('epoch', 'iter' or 'template') and ``number``."""
    names = [r'(?P<kind>epoch|iter)_(?P<number>\d+)\.pth']
    if template:
        before, after = template.split('{}')
        names.insert(0, f'(?P<template>{re.escape(before)})(?P<tnumber>\\d+){re.escape(after)}')
    return re.compile('^(?:' + '|'.join(names) + ')$')


def _kind(match) -> str:
    return 'template' if match.groupdict().get('template') is not None else match['kind']


def _number(match) -> int:
    return int(match['tnumber'] if _kind(match) == 'template' else match['number'])


def newest_checkpoint_in(work_dir, template=None) -> Optional[str]:
    """The checkpoint of the largest N named by the config's ``template`` in ``work_dir``
    (:func:`checkpoint_template`), else the ``epoch_N.pth`` of the largest N (else the largest
    ``iter_N.pth``), None when there is none. Such a name is always a complete file:
    checkpoints are written under a temporary name and renamed (:func:`save_atomically`)."""
    found = {}
    folder, names = Path(work_dir), checkpoint_names(template)
    for path in folder.iterdir() if folder.is_dir() else ():
        match = names.match(path.name)
        if match and path.is_file():
            found.setdefault(_kind(match), []).append((_number(match), path))
    for kind in ('template', 'epoch', 'iter'):
        if found.get(kind):
            return str(max(found[kind])[1])
    return None


def write_last_checkpoint(work_dir, checkpoint) -> None:
    """Record ``checkpoint`` in ``<work_dir>/last_checkpoint`` (mmengine's format: the path),
    replacing the record atomically: it names the previous or the new checkpoint, never a
    half-written path."""
    replace_atomically(Path(work_dir) / LAST_CHECKPOINT,
                       lambda temporary: temporary.write_text(str(checkpoint)),
                       lambda path, cause: CheckpointSaveError(
                           f'cannot record the checkpoint {checkpoint} in {path}: {cause}; the '
                           'record still names the previous checkpoint. Free disk space or give '
                           'a writable --work-dir, then continue with --resume'))


PARTIAL_FILE = re.compile(r'^\..+\.\d+\.partial$')  # errors.replace_atomically's temporary names


def remove_partial_files(work_dir, logger='current') -> list:
    """Remove the temporary files (``.<name>.<pid>.partial``, :func:`save_atomically`) that a
    killed writer left in ``work_dir`` (not below it); returns their names. Call it holding
    the work dir's lock (``PlanningRunner.train`` does): no live process writes there then."""
    folder = Path(work_dir)
    removed = sorted(p.name for p in folder.iterdir() if PARTIAL_FILE.match(p.name)
                     and p.is_file()) if folder.is_dir() else []
    for name in removed:
        (folder / name).unlink(missing_ok=True)
    if removed:
        from mmengine.logging import print_log
        print_log(f'{work_dir}: removed {len(removed)} partial file(s) of a killed run: '
                  f'{", ".join(removed)}', logger=logger, level=logging.WARNING)
    return removed

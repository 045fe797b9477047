"""``PlanningRunner``: the mmengine ``Runner`` with a true and short start-up log.

Configs select it with ``runner_type = 'PlanningRunner'`` (``configs/_base_/default_runtime.py``),
so ``tools/train.py``, ``tools/test.py`` and MMAction2's own tools build it from ``RUNNERS``.
Differences from mmengine's ``Runner``:

* :meth:`PlanningRunner.from_cfg` applies the config's ``horizon`` / ``test_horizon``
  (:func:`vpn_plugin.data_paths.apply_horizon`) and resolves its data locations
  (:func:`vpn_plugin.data_paths.resolve_paths`: ``--cfg-options data_root=DIR`` moves every
  dataset, relative config paths are read from the repository root) before building anything,
  after checking the config: no misspelled top-level key, no unknown option of a model /
  dataset / hook, no training video in the test split;

* without a GPU the distributed backend is ``gloo`` in the config that is used *and* logged
  (mmengine would log ``nccl``; :func:`vpn_plugin.compat.fix_cpu_init_dist` only swaps it at
  ``init_process_group``);
* the ~250-line config dump is not logged: a training writes the config to the work dir (as
  mmengine always does), a test to its own timestamped log dir (a test never rewrites the
  training's record), and one log line says where;
* the config's formatted text (yapf, ~1 s) is computed once (:class:`TextCachedConfig`), not
  for the work dir, the message hub and every checkpoint again;
* the console shows progress and results only: the environment dump, the ~110-line hook list,
  the SyncBN notice and the per-epoch "Exp name" go to the log file alone
  (:data:`FILE_ONLY_MESSAGES`).

A shortened run (the config's ``shortened``, e.g. a smoke run, ``vpn_plugin/smoke.py``) says so
in its log and in every checkpoint's ``meta['shortened']``; a resume never mixes a smoke run with
another run (:meth:`PlanningRunner.load_checkpoint`; a run of fewer epochs may be extended); ``loaded_shortened`` is what the loaded
checkpoint recorded (``tools/test.py`` marks its metrics), ``tested_ema_mark`` what a test
found wrong with its EMA weights (:meth:`PlanningRunner.check_tested_ema`). Every checkpoint
records the id of the training run that wrote it, in its meta and inside its EMA state (a resume
keeps the id): a checkpoint whose EMA state is another run's is refused
(``engine.checkpoint.check_ema_run``).

And three safety rules: a checkpoint is loaded strictly (``load_from``, ``--resume``; a
config's ``load_partial = True`` opts in to partial loading for fine-tuning) and saved
atomically (a full disk never leaves a partial checkpoint; ``vpn_plugin.engine.checkpoint``);
``train`` refuses a work dir another process trains in (``vpn_plugin.locks``).
"""
from __future__ import annotations

import collections
import contextlib
import copy
import inspect
import logging
import os
import os.path as osp
import pathlib
import re
import sys

from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
from mmengine.config import Config, ConfigDict
from mmengine.dist import master_only
from mmengine.model import is_model_wrapper
from mmengine.runner import Runner
from mmaction.registry import RUNNERS
from vpn_plugin.data_paths import (apply_horizon, check_config_keys, pkg_extra_datasets,
                                  resolve_paths)
from vpn_plugin.engine.pre_stage import check_not_pre_stage
from vpn_plugin.errors import check_folder_target, close_log_files
from vpn_plugin.runner_keys import check_runner_kinds

GPU_ONLY_BACKENDS = ('nccl',)
# log records that go to the log file only, by the start of their message
FILE_ONLY_MESSAGES = ('\n' + '-' * 60 + '\nSystem environment:',
                      'Hooks will be executed in the following order',
                      'Distributed training is not used, all SyncBatchNorm',
                      'Exp name: ')


class TextCachedConfig(Config):
    """A ``Config`` whose ``pretty_text`` is formatted once per content: mmengine formats it
    (yapf, about a second) for the work dir, the message hub and every checkpoint's meta."""

    @property
    def pretty_text(self) -> str:
        key = repr(self._cfg_dict.to_dict())
        cached = self.__dict__.get('_pretty_text_cache')
        if cached is None or cached[0] != key:
            cached = (key, Config.pretty_text.fget(self))
            object.__setattr__(self, '_pretty_text_cache', cached)
        return cached[1]


class FileOnlyFilter(logging.Filter):
    """Keeps :data:`FILE_ONLY_MESSAGES` off a (console) handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(FILE_ONLY_MESSAGES)


def quiet_console(logger: logging.Logger) -> logging.Logger:
    """Add :class:`FileOnlyFilter` to the console handlers of ``logger`` (once)."""
    for handler in logger.handlers:
        console = not isinstance(handler, logging.FileHandler)
        if console and not any(isinstance(f, FileOnlyFilter) for f in handler.filters):
            handler.addFilter(FileOnlyFilter())
    return logger


def stop_on_log_file_failure(logger: logging.Logger) -> logging.Logger:
    """Make the log files of ``logger`` end the run when they cannot be written (a full disk):
    Python's logging would print its "--- Logging error ---" traceback for every line and go
    on, leaving a log with lines missing. The first failed write raises ``OutputWriteError``
    naming the log file instead (the tool ends with that one line); the handler writes
    nothing more."""
    for handler in logger.handlers:
        if isinstance(handler, logging.FileHandler) and \
                not getattr(handler, 'stops_on_failure', False):
            handler.handleError = _log_file_failed.__get__(handler)
            handler.stops_on_failure = True
    return logger


def _log_file_failed(handler: logging.FileHandler, record) -> None:
    """``handleError`` of a log file (:func:`stop_on_log_file_failure`)."""
    from vpn_plugin.errors import OutputWriteError
    error = sys.exc_info()[1]
    if not isinstance(error, OSError):
        return logging.Handler.handleError(handler, record)
    handler.emit = lambda record: None  # no second failure while the run ends
    raise OutputWriteError(f'cannot write the log file {handler.baseFilename}: '
                           f'{error.strerror or error}; the run stopped (its log would miss '
                           'lines). Free disk space or give a writable --work-dir') from error


_RUNNERS_PER_NAME = collections.Counter()  # runners built in this process, by experiment name


def unique_experiment_name(cfg):
    """The config's ``experiment_name`` (mmengine's default: the config file's stem), made
    unique in this process by a ``-k`` suffix from its second runner on. mmengine appends the
    start second and keeps ONE MessageHub and Visualizer per name: two runners of one config
    started within the same second (a protocol's tests, a test suite) would otherwise share
    their logged scalars and write them to the first one's work dir. Every rank builds its
    runners in the same order, so the ranks agree."""
    name = cfg.get('experiment_name') or (
        osp.splitext(osp.basename(cfg.filename))[0] if cfg.filename else 'run')
    count = _RUNNERS_PER_NAME[name]
    _RUNNERS_PER_NAME[name] += 1
    return f'{name}-{count}' if count else name


def cpu_backend(env_cfg: dict, has_accelerator: bool) -> dict:
    """``env_cfg`` with ``dist_cfg.backend`` ``nccl`` replaced by ``gloo`` when there is no GPU."""
    dist_cfg = dict(env_cfg.get('dist_cfg') or {})
    if not has_accelerator and dist_cfg.get('backend', 'nccl') in GPU_ONLY_BACKENDS:
        dist_cfg['backend'] = 'gloo'
    return dict(env_cfg, dist_cfg=dist_cfg)


def claim_log_dir(work_dir: str, timestamp: str) -> str:
    """The run's log folder name: mmengine's second-resolution ``timestamp``, made by rank 0
    with ``os.mkdir`` (which fails when it exists), else ``<timestamp>_2``, ``_3``, ...; two
    runs started in one second into one work dir shared one folder: one log of both and the
    later run's ``test_metrics.json`` in place of the earlier's. Every rank gets rank 0's."""
    from mmengine.dist import broadcast_object_list, get_rank
    chosen = [timestamp]
    if get_rank() == 0:
        for attempt in range(1, 1000):
            name = timestamp if attempt == 1 else f'{timestamp}_{attempt}'
            try:
                os.mkdir(osp.join(work_dir, name))
            except FileExistsError:
                continue
            chosen = [name]
            break
        else:
            raise ValueError(f'{work_dir}: log folders {timestamp} .. {timestamp}_999 all '
                             'exist; give another --work-dir')
    broadcast_object_list(chosen)
    return chosen[0]


@RUNNERS.register_module()
class PlanningRunner(Runner):
    """mmengine ``Runner`` that applies the config's horizon and data locations, logs the
    backend it uses and writes (not logs) its config."""

    unchecked_checkpoint = ()  # what the loaded checkpoint could not be checked by (load_weights)
    run_id = None  # this training run's id (engine.checkpoint.bind_ema_to_run), kept by a resume
    # a test's mark of a checkpoint whose EMA weights are not the trained ones the config's EMA
    # hook asks for ('' when they are: engine.ema.scored_ema_note)
    tested_ema_mark = ''
    changed_from_training = ()  # what log_model_overrides named, one string per difference
    trained_cfg_text = None  # the loaded checkpoint's meta["cfg"] (log_model_overrides)
    not_compared = ()  # what the tested checkpoint records too little to compare (one string each)
    feature_statistics_note = ''  # test features unlike the training features'
    # the tested checkpoint's tensors stored coarser than the model's ('' when none are:
    # engine.checkpoint.reduced_precision_note), written into test_metrics.json and rows
    reduced_precision_note = ''
    testing = False
    made_folders = ()  # the work dir and its parents this runner made (a refused run removes)
    began = ''  # 'before_train' / 'before_test' once the loop began (call_hook)

    def __init__(self, *args, **kwargs):
        work_dir = kwargs.get('work_dir', args[1] if len(args) > 1 else None)
        from vpn_plugin.locks import missing_folders
        self.made_folders = missing_folders(work_dir) if isinstance(work_dir, str) else ()
        try:
            super().__init__(*args, **kwargs)
        except BaseException:  # e.g. a model refused when built: its claimed log folder goes
            if getattr(self, '_log_dir', None) and getattr(self, '_rank', 0) == 0:
                self.remove_log_dir()
            raise

    @contextlib.contextmanager
    def nothing_left_if_refused(self, loop: str):
        """A run refused (or failed) before its ``loop`` began (``'before_train'`` /
        ``'before_test'`` ran) exits non-zero and leaves nothing: the log folder it claimed
        (:func:`claim_log_dir`: its log, ``vis_data/config.py``) is removed, and so is its work
        dir and its parents when this runner made them and nothing else is in them. A run
        that began keeps its log."""
        self.began = ''
        try:
            yield
        except BaseException as error:  # a SystemExit refusal (require_trainable) too
            if self.began != loop and self.rank == 0:
                self.remove_log_dir()
            elif isinstance(error, Exception) and getattr(self, 'logger', None) is not None:
                # the kept log said nothing of why it ends (all-zero loss weights, refused
                # at the first step, left a log ending at "Checkpoints will be saved to")
                self.logger.error(f'the run stopped: {type(error).__name__}: {error}')
            raise

    def remove_log_dir(self) -> None:
        """Close the log file and remove this run's log folder (and its work dir and the
        parents this runner made, those now empty)."""
        import shutil
        # mmengine's current logger stays this runner's; its log file, opened in mode 'a',
        # would be reopened by the next message once anything closed logging's handlers
        # (importing submitit runs logging.config.dictConfig): FileNotFoundError from an
        # unrelated call. None: refused before the logger existed
        close_log_files(getattr(self, '_logger', None), self.log_dir)
        shutil.rmtree(self.log_dir, ignore_errors=True)
        from vpn_plugin.locks import remove_made_folders
        remove_made_folders(self.made_folders)

    @classmethod
    def from_cfg(cls, cfg) -> 'PlanningRunner':
        from vpn_plugin.datasets.planning_dataset import check_split_disjoint
        check_config_keys(cfg)
        check_loop_counts(cfg)
        cfg = resolve_paths(apply_horizon(cfg))
        for index, item in enumerate(pkg_extra_datasets(cfg)):  # a key is named when resolved
            if hasattr(item, 'get'):
                warn_test_videos_in_pkg(cfg, index, item)
        cfg = resolve_dataset_references(cfg)  # as protocols
        check_config_entries(cfg, cfg.filename or 'config')
        check_split_disjoint(cfg)  # no test video among the training videos
        check_folder_target(cfg.work_dir)
        if type(cfg) is Config:
            object.__setattr__(cfg, '__class__', TextCachedConfig)
        cfg.experiment_name = unique_experiment_name(cfg)
        return super().from_cfg(cfg)

    def build_logger(self, *args, **kwargs):
        return stop_on_log_file_failure(quiet_console(super().build_logger(*args, **kwargs)))

    def setup_env(self, env_cfg: dict) -> None:
        from vpn_plugin.compat import has_accelerator
        # mutate in place: Runner.__init__ logs this same dict afterwards
        env_cfg.update(cpu_backend(env_cfg, has_accelerator()))
        super().setup_env(env_cfg)
        self._timestamp = claim_log_dir(self._work_dir, self._timestamp)
        if self._distributed:  # one write per line: the ranks' lines never interleave
            os.write(sys.stderr.fileno(), (rank_line(
                env_cfg, self._rank, self._world_size, has_accelerator()) + '\n').encode())

    def _log_env(self, env_cfg: dict) -> None:
        config = self.cfg._cfg_dict
        # Runner._log_env logs the whole config when it is non-empty; Config.__setattr__
        # would store a key, hence object.__setattr__
        object.__setattr__(self.cfg, '_cfg_dict', ConfigDict())
        self.logger.info = self._true_device_count(self.logger.info)
        try:
            super()._log_env(env_cfg)
        finally:
            object.__setattr__(self.cfg, '_cfg_dict', config)
            del self.logger.info  # the class's method again

    def _true_device_count(self, info):
        """mmengine logs the world size as "GPU number" (2 on a CPU machine running two
        processes): without an accelerator the environment line says what they are."""
        from vpn_plugin.compat import has_accelerator as _has_accelerator
        world = self._world_size

        def log(message, *args, **kwargs):
            if isinstance(message, str) and not _has_accelerator():
                message = message.replace(f'\n    GPU number: {world}\n',
                                          f'\n    GPU number: 0 ({world} CPU processes)\n')
            return info(message, *args, **kwargs)
        return log

    def dump_config(self) -> None:
        """Nothing at construction: :meth:`train` writes the config to the work dir (the
        training's record, as mmengine does), :meth:`test` to the test's own timestamped log
        dir, so that testing a checkpoint never rewrites its training's config."""

    @master_only
    def write_config(self, training: bool) -> None:
        path = self.config_path(training)
        note = ''
        if self.cfg.filename and osp.exists(path) and osp.exists(self.cfg.filename) \
                and osp.samefile(path, self.cfg.filename):
            # the config file given lies in the work dir under the dump's name: the dump
            # (inheritance resolved, comments gone) must not replace the user's file
            stem, suffix = osp.splitext(path)
            path, note = f'{stem}.resolved{suffix}', f' (not over {osp.basename(stem + suffix)}, the config file given)'
        self.cfg.dump(path)
        self.logger.info(f'Config: written to {path}{note}')

    def train(self):
        """mmengine's ``train`` holding the work dir's lock (``vpn_plugin.locks``): a work dir
        another process trains in is refused (rank 0 holds it for all ranks). The config is
        written once the run began (every ``before_train`` hook ran, the checkpoint to resume
        loaded: :meth:`call_hook`): a run refused before leaves a new work dir unmade and an
        existing one's record of its earlier run as it was."""
        with self.nothing_left_if_refused('before_train'):
            return self._train()

    def _train(self):
        from vpn_plugin.engine.checkpoint import new_run_id
        self.run_id = new_run_id()  # a resume takes the checkpoint's (load_checkpoint)
        check_training_hooks(getattr(self.model, 'module', self.model), self.hooks,
                             self.cfg.filename or 'config',
                             loads=bool(self._resume or self._load_from))
        self.unmark_uncut()
        self.log_shortened()
        self.log_test_windows()
        if self._train_loop is not None:
            check_train_batches(self.train_loop.dataloader, self.cfg.filename or 'config')
            check_saves_a_checkpoint(self.hooks, self.train_loop, self._val_loop is not None,
                                     self.cfg.filename or 'config')
        if self.rank != 0:
            return super().train()
        from vpn_plugin.engine.checkpoint import remove_partial_files
        from vpn_plugin.locks import exclusive_lock, lock_path_of
        with exclusive_lock(lock_path_of(self.work_dir), wait=False,
                            what=f'work dir {self.work_dir}', discard_if_refused=True):
            remove_partial_files(self.work_dir)  # of a killed run; no one else writes here
            return super().train()

    def wrap_model(self, model_wrapper_cfg, model):
        """mmengine's, except that in a distributed run a model without a parameter that
        requires a gradient (UniformEmissionPlanner) is not wrapped: torch's
        DistributedDataParallel refuses such a module ("is not needed when a module doesn't
        have any parameter that requires a gradient"), and there is nothing to synchronise;
        each process evaluates its share of the windows with the model as it is."""
        if self.distributed and not is_model_wrapper(model) \
                and not any(p.requires_grad for p in model.parameters()):
            from mmengine.device import get_device
            self.logger.info(f'{type(model).__name__} has no parameter to train: not wrapped '
                             'in DistributedDataParallel (nothing to synchronise)')
            return model.to(get_device())
        return super().wrap_model(model_wrapper_cfg, model)

    def load_or_resume(self) -> None:
        """mmengine's, with the work dir's ``last_checkpoint`` record resolved inside the work
        dir (``engine.checkpoint.latest_checkpoint_in``: a copied or moved work dir resumes
        from its own files, never from the run it was copied from; a record naming a deleted
        checkpoint falls back to the newest complete one). ``resume=True`` in a work dir
        without a checkpoint is a fresh start."""
        if not self._has_loaded and self._resume and self._load_from is None:
            from vpn_plugin.engine.checkpoint import checkpoint_template, latest_checkpoint_in
            self._load_from = latest_checkpoint_in(self.work_dir,
                                                   template=checkpoint_template(self.cfg))
            self._resume = self._load_from is not None  # mmengine would read the record again
            if not self._resume and not self.testing:
                self.logger.info(f'resume=True: the work dir {self.work_dir} holds no '
                                 'checkpoint to resume from; the run starts afresh '
                                 "(mmengine's auto-resume; tools/train.py --resume refuses "
                                 'this case)')
        if self._distributed:
            self.check_ranks_agree()
        super().load_or_resume()

    def _built_datasets(self) -> dict:
        """``{split: dataset}`` of the loops mmengine has built (train, test, val in this
        order; a loop not built yet, or without a dataset, is left out)."""
        from mmengine.runner import BaseLoop
        datasets = {}
        for split, loop in (('train', self._train_loop), ('test', self._test_loop),
                            ('val', self._val_loop)):
            dataset = getattr(getattr(loop, 'dataloader', None), 'dataset', None)
            if isinstance(loop, BaseLoop) and dataset is not None:
                datasets[split] = dataset
        return datasets

    def _feature_statistics(self, split: str) -> dict | None:
        """The built ``split`` dataset's ``feature_statistics()`` (None without one)."""
        dataset = self._built_datasets().get(split)
        statistics = getattr(dataset, 'feature_statistics', None)
        return statistics() if callable(statistics) else None

    def train_data_digest(self) -> str:
        """What the training loop's dataset holds (:meth:`data_digest`)."""
        return self.data_digest('train')

    def data_digest(self, split: str) -> str:
        """What the built ``split`` loop's dataset holds (``engine.rank_agreement.
        dataset_digest``; '' without one: no training loop, a run that does not validate),
        computed once a run: checkpoints record the training and validation sets' and a
        resume compares them."""
        from vpn_plugin.engine.rank_agreement import dataset_digest
        digests = self.__dict__.setdefault('_data_digests', {})
        if not digests.get(split):
            dataset = self._built_datasets().get(split)
            digests[split] = dataset_digest(dataset) if dataset is not None else ''
        return digests[split]

    def check_ranks_agree(self) -> None:
        """Every rank read the same config, datasets and checkpoint
        (``engine.rank_agreement``); called once the loops are built, before loading. The
        training set is hashed once (:meth:`train_data_digest`, which the checkpoints record)."""
        from vpn_plugin.engine.rank_agreement import (check_ranks_agree, dataset_digest,
                                                      what_this_rank_read)
        digests = {split: self.data_digest(split) if split in ('train', 'val') else
                   dataset_digest(data) for split, data in self._built_datasets().items()}
        checkpoint = None if self._has_loaded else self._load_from
        check_ranks_agree(what_this_rank_read(self.cfg, digests, checkpoint))

    def resume(self, filename: str, *args, **kwargs) -> None:
        """mmengine's ``resume``, then the checkpoint records of the resumed message hub
        (``last_ckpt``, ``best_ckpt*``: ``CheckpointHook`` deletes the previous best) resolved
        inside this work dir (``engine.checkpoint.record_inside``)."""
        from vpn_plugin.engine.checkpoint import record_inside
        super().resume(filename, *args, **kwargs)
        for key, value in list(self.message_hub.runtime_info.items()):
            if (key == 'last_ckpt' or key.startswith('best_ckpt')) and isinstance(value, str):
                what = f'the message hub record {key!r} of checkpoint {filename}'
                self.message_hub.update_info(
                    key, record_inside(value, self.work_dir, what, required=False))

    def log_test_windows(self) -> None:
        """The training log states the test split's size too (the train and val datasets log
        theirs when the loops build them): its windows counted from the annotations alone."""
        dataset = (self.cfg.get('test_dataloader') or {}).get('dataset') or {}
        if dataset.get('type') != 'PlanningDataset':
            return
        from vpn_plugin.datasets.sources import source_windows
        try:
            _, windows, _ = source_windows(dict(dataset))
        except (OSError, ValueError) as err:
            self.logger.info(f'PlanningDataset (test): not counted ({err})')
            return
        videos = len({w.feature for w in windows})
        scored = (f'tools/test.py scores {dataset.limit} of them: limit, stratified over tasks'
                  if dataset.get('limit') else 'tools/test.py scores them')
        self.logger.info(f'PlanningDataset (test, T={dataset.get("horizon")}): {len(windows)} '
                         f'windows of {videos} videos ({scored})')

    def test(self):
        """mmengine's ``test``, its config written to the test's log dir (:meth:`dump_config`)."""
        with self.nothing_left_if_refused('before_test'):
            self.write_config(training=False)
            self.log_shortened()
            self.testing = True
            return super().test()

    trained_on_damaged = ()  # the tested checkpoint's training files of damaged videos

    def damaged_test_files(self) -> list:
        """'<file>: <note>' of each test feature file read that records a damaged video
        (``PlanningDataset.damaged_files``; the dataset logged them in one WARNING line), then
        'training file <file>: <note>' of each the tested checkpoint was trained on
        (:meth:`note_trained_on_damaged`): what test_metrics.json and a results row's caveats
        carry."""
        loop = getattr(self, '_test_loop', None)  # a config dict until the test built it
        dataset = getattr(getattr(loop, 'dataloader', None), 'dataset', None)
        return list(getattr(dataset, 'damaged_files', list)()) + [
            f'training file {line}' for line in getattr(self, 'trained_on_damaged', ())]

    def note_trained_on_damaged(self, checkpoint: dict, filename: str) -> None:
        """The training feature files of damaged videos a tested checkpoint records
        (``meta[TRAINING_DAMAGE_KEY]``, written by :meth:`save_checkpoint`): one WARNING line,
        and :meth:`damaged_test_files` names them."""
        from vpn_plugin.datasets.planning_dataset import DAMAGED_LISTED
        from vpn_plugin.engine.checkpoint import TRAINING_DAMAGE_KEY
        recorded = (checkpoint.get('meta') or {}).get(TRAINING_DAMAGE_KEY) or []
        self.trained_on_damaged = [str(line) for line in recorded] \
            if isinstance(recorded, (list, tuple)) else [str(recorded)]
        damaged = self.trained_on_damaged
        if damaged:
            more = f'; and {len(damaged) - DAMAGED_LISTED} more' * (len(damaged) > DAMAGED_LISTED)
            self.logger.warning(f'{filename} was trained on {len(damaged)} feature file(s) that '
                                'record a damaged video (extract_features\' "damage" note: '
                                'ffmpeg decoded it with errors, frames there concealed or '
                                f'repeated): {"; ".join(damaged[:DAMAGED_LISTED])}{more}')

    def unmark_uncut(self) -> None:
        """The reasons tools/train.py wrote into ``shortened`` for options that cut nothing
        are dropped, logged: a training split ``limit`` at or above its windows (the built
        ``PlanningDataset.limited`` is None: ``limit=1000`` over 262 windows marked a run whose
        checkpoints equal the full run's "SHORTENED", and every test of them), and
        ``num_batch_per_epoch`` batches that cover the whole split (mmengine's slice is as long
        as the split)."""
        from vpn_plugin.smoke import batches_reason, drop_reason, training_limit_reason
        shortened = str(self.cfg.get('shortened') or '')
        if self._train_loop is None or not shortened:
            return
        loader = self.train_loop.dataloader
        whole = getattr(loader.dataset, '_dataset', loader.dataset)  # num_batch_per_epoch's slice
        limit = ((self.cfg.get('train_dataloader') or {}).get('dataset') or {}).get('limit')
        batches = (self.cfg.get('train_dataloader') or {}).get('num_batch_per_epoch')
        uncut = [(training_limit_reason(limit), getattr(whole, 'limited', ()) is None,
                  f'train_dataloader.dataset.limit={limit} keeps all'),
                 (batches_reason(batches), whole is not loader.dataset
                  and len(loader.dataset) == len(whole),
                  f'train_dataloader.num_batch_per_epoch={batches} covers all')]
        for reason, kept_all, what in uncut:
            if kept_all and reason in shortened.split('; '):
                shortened = drop_reason(shortened, reason)
                self.logger.info(f'{what} {len(whole)} training windows: the run is not '
                                 'shortened by it')
        self.cfg.shortened = shortened

    def log_shortened(self) -> None:
        """A warning line when the config is a shortened run (module docstring)."""
        if self.cfg.get('shortened'):
            self.logger.warning(f'SHORTENED RUN ({self.cfg.shortened}): not the config\'s '
                                'schedule or test set; checkpoints and results are marked')

    def log_model_overrides(self, checkpoint: dict, filename: str) -> None:
        """The options of the config that differ from those the checkpoint was trained with
        (its ``meta['cfg']``), as ``engine.checkpoint.TRAINING_OPTIONS`` rules for a test:
        refused, or a warning naming them and :attr:`changed_from_training` (which
        ``tools/test.py`` writes into the metrics)."""
        from vpn_plugin.engine.checkpoint import check_test_options, named_options_text
        self.trained_cfg_text = (checkpoint.get('meta') or {}).get('cfg')  # mark_recount's
        named = check_test_options(self.trained_cfg_text, self.cfg, filename, 'test it',
                                   checkpoint.get('state_dict'))
        self.changed_from_training = named
        # a protocol's test declares what it sets (its cfg_options, a cross-horizon test's
        # horizon): in its row's settings, no caveat (protocol.runner.test_caveats)
        declared = getattr(self, 'declared_test_options', ())
        own = [line for line in named if line.split(': ', 1)[0] in declared]
        named = [line for line in named if line not in own]
        if own:
            self.logger.info(f'{filename}: the protocol\'s test sets {"; ".join(own)} (its '
                             'row says so: settings, horizon; no caveat)')
        if named:
            self.logger.warning(f'{filename} was trained with other options than this '
                                f'test\'s config: {"; ".join(named)}; the test uses '
                                f'this config\'s values ({named_options_text(named)}) and its '
                                'metrics say so (changed_from_training)')

    def training_split_changes(self) -> list:
        """The training split's options that differ from the loaded checkpoint's training
        (``engine.checkpoint.training_split_differences``): why a graph recounted at test time
        (``model.pkg.recount``, ``models.pkg_hook.mark_recount``) is another."""
        from vpn_plugin.engine.checkpoint import training_split_differences
        return training_split_differences(self.trained_cfg_text, self.cfg)

    def load_checkpoint(self, filename: str, map_location='cpu', strict=None, revise_keys=None):
        """mmengine's ``load_checkpoint`` (``load_from`` and ``resume`` call it) with strict
        loading (:func:`vpn_plugin.engine.checkpoint.load_weights`): partial only with the
        config's ``load_partial = True`` (or ``strict=False``), never when resuming."""
        from vpn_plugin.compat import is_resuming
        from vpn_plugin.engine.checkpoint import (PARTIAL_LOAD_KEY, RUN_KEY, UNCHECKED_KEY,
                                                  check_finite, check_loaded_pkg,
                                                  check_same_planner, extended_schedule_note,
                                                  feature_statistics_note,
                                                  load_weights, read_checkpoint,
                                                  reduced_precision_note, selecting_the_same,
                                                  state_dict_of, training_option_differences)
        from vpn_plugin.engine.checkpoint_hook import check_resume_point
        from vpn_plugin.engine.rank_agreement import (TRAIN_DATA_KEY, VAL_DATA_KEY,
                                                       check_resume_data, check_resume_epoch,
                                                       check_resume_world_size)
        from vpn_plugin.models.base_planner import BasePlanner
        checkpoint = read_checkpoint(filename, map_location)
        check_not_pre_stage(checkpoint, filename)
        model = self.model.module if is_model_wrapper(self.model) else self.model
        if is_resuming(self) or not self.cfg.get(PARTIAL_LOAD_KEY):  # before what follows
            check_same_planner(checkpoint, model, filename)  # from another planner
        self.loaded_shortened = str((checkpoint.get('meta') or {}).get('shortened') or '')
        wanted = str(self.cfg.get('shortened') or '')
        smoke = any(text.startswith('smoke') for text in (self.loaded_shortened, wanted))
        if is_resuming(self) and smoke and self.loaded_shortened != wanted:
            loaded = self.loaded_shortened or 'none (the full run)'
            here = self.cfg.get('shortened') or 'none (the full run)'
            if all(text.startswith('smoke') for text in (self.loaded_shortened, wanted)):
                raise ValueError(f'--resume {filename}: a run of shortened={loaded}, this config '
                                 f'is shortened={here}; a smoke run continues only the smoke run '
                                 'of the same config (the two marks differ in what they name of '
                                 'it): give another --work-dir')
            raise ValueError(f'--resume {filename}: a run of shortened={loaded}, this config is '
                             f'shortened={here}; a smoke run never continues a full run or the '
                             'reverse: give another --work-dir')
        if is_resuming(self):
            meta = checkpoint.get('meta') or {}
            changed = selecting_the_same(
                training_option_differences(meta.get('cfg'), self.cfg, 'resume').refused,
                [loader for loader, split, key in (
                    ('train_dataloader', 'train', TRAIN_DATA_KEY),
                    ('val_dataloader', 'val', VAL_DATA_KEY))
                 if meta.get(key) and meta.get(key) == self.data_digest(split)])
            if changed:
                raise ValueError(f'--resume {filename}: this config changes options the run '
                                 f'was trained with: {"; ".join(changed)}; a resumed run '
                                 "continues the checkpoint's model and optimiser state (a "
                                 'changed lr would not be applied, a changed model would not '
                                 'load): resume with the run\'s options, or start a new run '
                                 'in another --work-dir')
            check_resume_point(checkpoint, filename)
            self.say_not_compared(checkpoint, filename, 'this resumed run')
            self.run_id = (checkpoint.get('meta') or {}).get(RUN_KEY) or self.run_id
            check_resume_world_size(checkpoint, filename, self._world_size)
            check_resume_data(checkpoint, filename, self.train_data_digest())
            check_resume_data(checkpoint, filename, self.data_digest('val'), validation=True)
            complete = check_resume_epoch(checkpoint, filename, self.cfg)
            if complete:
                self.logger.warning(complete)
            extended = extended_schedule_note(meta.get('cfg'), self.cfg, filename)
            if extended:
                self.logger.warning(extended)
            if isinstance(checkpoint.get('ema_state_dict'), dict):
                # its state_dict, the EMA weights, goes into the EMA copy (mmengine's swap),
                # which load_weights below never sees
                check_finite(state_dict_of(checkpoint, filename), f'{filename} (EMA weights)')
        if self.testing:
            self.check_tested_ema(checkpoint, filename)
        if not self.cfg.get(PARTIAL_LOAD_KEY):
            check_loaded_pkg(checkpoint, filename, self.cfg.get('model'))
        if isinstance(checkpoint.get('ema_state_dict'), dict):  # checked by read_checkpoint;
            checkpoint['ema_state_dict'].pop(RUN_KEY, None)  # no tensor of the EMA model
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        partial = bool(self.cfg.get(PARTIAL_LOAD_KEY, False)) if strict is None else not strict
        self.unchecked_checkpoint = load_weights(
            model, checkpoint, filename, partial=partial and not is_resuming(self),
            data_meta=self._built_data_meta(), require_meta=isinstance(model, BasePlanner),
            unchecked=bool(self.cfg.get(UNCHECKED_KEY, False)))
        if self.testing:  # once it loaded: a refused checkpoint's test is no measurement
            self.log_model_overrides(checkpoint, filename)
            self.feature_statistics_note = feature_statistics_note(
                checkpoint, filename, self._feature_statistics('test'))
            if self.feature_statistics_note:
                self.logger.warning(self.feature_statistics_note)
            self.compare_training_features(checkpoint, filename)
            self.note_trained_on_damaged(checkpoint, filename)
            reduced = reduced_precision_note(state_dict_of(checkpoint, filename),
                                             model.state_dict())  # load_weights logged it
            self.reduced_precision_note = f'checkpoint {filename}: {reduced}' if reduced else ''
        self._has_loaded = True
        self.logger.info(f'Load checkpoint from {filename}')
        return checkpoint

    def compare_training_features(self, checkpoint: dict, filename: str) -> None:
        """A test of features read from another folder content than the training features
        (``engine.checkpoint.features_folder_note``): a warning and an entry of
        :attr:`changed_from_training`; what the checkpoint records too little to compare
        (``engine.checkpoint.not_compared``): one warning line and :attr:`not_compared`."""
        from vpn_plugin.engine.checkpoint import features_folder_note
        folder_note = features_folder_note(checkpoint, filename, self._feature_dir('test'),
                                           dataset=self._built_datasets().get('test'))
        if folder_note:
            self.logger.warning(folder_note)
            self.changed_from_training = list(self.changed_from_training) + [folder_note]
        self.not_compared = self.say_not_compared(checkpoint, filename, 'this test')

    def say_not_compared(self, checkpoint: dict, filename: str, what: str) -> list:
        """What ``checkpoint`` records too little to compare with ``what`` (a test, a resumed
        run: ``engine.checkpoint.not_compared``), said in one warning line; returned."""
        from vpn_plugin.engine.checkpoint import (RESUMED_RECORDS, TESTED_RECORDS, not_compared,
                                                  not_compared_line)
        from vpn_plugin.models.base_planner import BasePlanner
        model = self.model.module if is_model_wrapper(self.model) else self.model
        if not isinstance(model, BasePlanner):  # MMAction2's own models record none of these
            return []
        split = 'test' if self.testing else 'train'
        present = dict(feature_statistics=self._feature_statistics(split) is not None,
                       features_folder=bool(self._feature_dir(split)))
        records = [record for record in (TESTED_RECORDS if self.testing else RESUMED_RECORDS)
                   if present.get(record, True)]  # what this run has to compare with
        missing = not_compared(checkpoint, records)
        if missing:
            self.logger.warning(not_compared_line(filename, missing, what))
        return missing

    def _feature_dir(self, split: str):
        """The feature folder of the built ``split`` dataset (a union's ``{source: folder}``:
        ``feature_dirs``; None without one)."""
        dataset = self._built_datasets().get(split)
        return getattr(dataset, 'feature_dirs', None) or getattr(dataset, 'feature_dir', None)

    def check_tested_ema(self, checkpoint: dict, filename: str) -> None:
        """A warning and :attr:`tested_ema_mark` when the test scores weights that are not
        trained EMA weights although the config has an EMA hook (``engine.ema``)."""
        from mmengine.hooks import EMAHook
        from vpn_plugin.engine.ema import scored_ema_note
        hook = next((hook for hook in self.hooks if isinstance(hook, EMAHook)), None)
        self.tested_ema_mark, warning = scored_ema_note(hook, checkpoint, filename)
        if warning:
            self.logger.warning(warning)

    def _built_data_meta(self):
        """``metainfo`` of the dataset of the loop that runs (train, else test, else val; a
        loop mmengine has built before loading), None when none is built."""
        return next((dataset.metainfo for dataset in self._built_datasets().values()
                     if isinstance(getattr(dataset, 'metainfo', None), dict)), None)

    def call_hook(self, fn_name: str, **kwargs) -> None:
        """mmengine's, and once every hook's ``before_save_checkpoint`` ran (an EMA hook's
        included, whichever it is), the run's id recorded in the checkpoint's meta and EMA
        state (``engine.checkpoint.bind_ema_to_run``)."""
        super().call_hook(fn_name, **kwargs)
        if fn_name in ('before_train', 'before_test'):
            self.began = fn_name  # nothing_left_if_refused: the loop began
        if fn_name == 'before_train':  # a run refused before it began wrote no config
            self.write_config(training=True)
        if fn_name == 'before_save_checkpoint':
            from vpn_plugin.engine.checkpoint import bind_ema_to_run, new_run_id
            self.run_id = self.run_id or new_run_id()
            bind_ema_to_run(kwargs['checkpoint'], self.run_id)

    @master_only
    def save_checkpoint(self, out_dir: str, filename: str, *args, **kwargs) -> None:
        """mmengine's ``save_checkpoint``, written to a temporary name and renamed into place
        (:func:`vpn_plugin.engine.checkpoint.save_atomically`)."""
        from vpn_plugin.engine.checkpoint import (FEATURE_STATS_KEY, FEATURES_FOLDER_KEY,
                                                  TRAINING_DAMAGE_KEY, features_folder_record,
                                                  save_atomically)
        from vpn_plugin.engine.checkpoint_hook import RESUME_POINT_KEY, save_failure_hint
        from vpn_plugin.engine.rank_agreement import TRAIN_DATA_KEY, VAL_DATA_KEY, WORLD_SIZE_KEY
        meta = dict(kwargs.get('meta') or {}, **{WORLD_SIZE_KEY: self._world_size})
        # mmengine saves a best checkpoint without the schedule: no point to resume from
        meta[RESUME_POINT_KEY] = kwargs.get('save_param_scheduler', True) is not False
        if self.train_data_digest():
            meta[TRAIN_DATA_KEY] = self.train_data_digest()
        if self.data_digest('val'):
            meta[VAL_DATA_KEY] = self.data_digest('val')
        if self.cfg.get('shortened'):
            meta['shortened'] = self.cfg.shortened
        statistics = self._feature_statistics('train')
        if statistics:
            meta[FEATURE_STATS_KEY] = statistics
        if getattr(self, '_features_folder_record', None) is None:  # hashed once a run
            self._features_folder_record = features_folder_record(
                self._feature_dir('train'), self._built_datasets().get('train')) or {}
        folder = self._features_folder_record
        if folder:
            meta[FEATURES_FOLDER_KEY] = folder
        damaged = getattr(self._built_datasets().get('train'), 'damaged_files', list)()
        if damaged:  # named when the checkpoint is tested (note_trained_on_damaged)
            meta[TRAINING_DAMAGE_KEY] = damaged
        kwargs['meta'] = meta
        save = super().save_checkpoint
        save_atomically(lambda temporary: save(out_dir, osp.basename(temporary), *args, **kwargs),
                        osp.join(out_dir, filename), then=lambda: save_failure_hint(self.work_dir))

    def config_path(self, training: bool = True) -> str:
        """Where :meth:`write_config` writes the config (mmengine's naming): the work dir for
        a training, the run's timestamped log dir for a test."""
        name = osp.basename(self.cfg.filename) if self.cfg.filename else f'{self.timestamp}.py'
        return osp.join(self.work_dir if training else self.log_dir, name)


def check_training_hooks(model, hooks, where: str, loads: bool = False) -> None:
    """A planner trained in stages (its ``training_hooks``: PDPP's and CEFITO's task
    classifier, KEPP's step model) is trained only with the hooks of its stages: without
    them KEPP stopped at its first step with a RuntimeError traceback, PDPP / CEFITO trained
    around an untrained classifier. A planner trained afresh (not ``loads`` a checkpoint,
    which carries its graph) needs the PKGHook that counts its PKG: without it the first
    step stopped with "the PKG was never filled"."""
    check_hooks_once(hooks, getattr(model, 'training_hooks', ()), where)
    present = {type(hook).__name__ for hook in hooks}
    missing = [name for name in getattr(model, 'training_hooks', ()) if name not in present]
    if missing:
        raise ValueError(f'{where}: {type(model).__name__} is trained in stages, but the run\'s '
                         f'custom_hooks hold no {" / ".join(missing)} (its first stage); '
                         f"expected custom_hooks to include dict(type='{missing[0]}') as the "
                         'method\'s base config does (a --cfg-options custom_hooks=[...] '
                         'replaces the whole list)')
    from vpn_plugin.models.base_planner import BasePlanner
    if isinstance(model, BasePlanner) and not loads and 'PKGHook' not in present \
            and not bool(getattr(model, 'pkg_ready', False)):
        raise ValueError(f"{where}: custom_hooks hold no dict(type='PKGHook'), which counts "
                         f'the PKG of {type(model).__name__} on the training set before the '
                         "first step; expected custom_hooks to include dict(type='PKGHook') "
                         'as the base config does (a --cfg-options custom_hooks=[...] replaces '
                         'the whole list)')


def check_train_batches(loader, where: str) -> None:
    """A training loader that yields no batch (``train_dataloader.batch_size`` above the
    training windows with ``drop_last=True``) trained nothing: every epoch ran 0 iterations and
    the run saved its untrained model as trained checkpoints, exit 0."""
    try:
        batches = len(loader)
    except TypeError:  # an iterable dataset: no length to check
        return
    whole = getattr(loader.dataset, '_dataset', None)  # mmengine's num_batch_per_epoch slice
    if whole is not None and len(loader.dataset) > len(whole):  # read past the end: IndexError
        size = getattr(loader.batch_sampler, 'batch_size', loader.batch_size)
        raise ValueError(f'{where}: train_dataloader.num_batch_per_epoch asks for '
                         f'{len(loader.dataset)} windows per epoch (batches x batch_size='
                         f'{size} x processes) of a training split of {len(whole)}: mmengine '
                         'would read past its end; expected batches x batch_size x processes '
                         f'<= {len(whole)}, or no num_batch_per_epoch for whole epochs')
    if batches:
        return
    sampler = loader.batch_sampler
    batch_size = getattr(sampler, 'batch_size', loader.batch_size)
    drop_last = getattr(sampler, 'drop_last', loader.drop_last)
    raise ValueError(f'{where}: train_dataloader yields no batch: {len(loader.dataset)} training '
                     f'windows (this process) with batch_size={batch_size}, drop_last={drop_last} '
                     'give 0 iterations per epoch, so the run would save an untrained model; '
                     f'expected a batch_size <= {len(loader.dataset)} or drop_last=False')


def check_saves_a_checkpoint(hooks, train_loop, validates: bool, where: str) -> None:
    """An epoch-based training whose checkpoint hook would save nothing (``save_last=False``,
    no ``save_best`` with a validation loop, and an ``interval`` <= 0 or a first save past
    ``max_epochs``) trained for hours and kept no checkpoint, exit 0: refused naming the
    options. A run without a checkpoint hook, or saving by iteration, is left alone."""
    from mmengine.hooks import CheckpointHook
    epochs = getattr(train_loop, 'max_epochs', None)
    hook = next((h for h in hooks if isinstance(h, CheckpointHook)), None)
    if hook is None or not hook.by_epoch or not isinstance(epochs, int):
        return
    if hook.save_last or (hook.save_best is not None and validates):
        return
    first = hook.save_begin if hook.save_begin > 0 else hook.interval
    if hook.interval > 0 and first <= epochs:
        return
    best = hook.save_best if validates else f'{hook.save_best} (no validation loop)'
    raise ValueError(f'{where}: default_hooks.checkpoint saves no checkpoint in '
                     f'train_cfg.max_epochs={epochs} epochs (interval={hook.interval}, '
                     f'save_begin={hook.save_begin}, save_last=False, save_best={best}): '
                     'the run would train and keep nothing; expected save_last=True, a '
                     'save_best with validation, or an interval and save_begin within the '
                     'epochs')


def check_hooks_once(hooks, stage_hooks, where: str) -> None:
    """One EMA hook and one hook per training stage: two EMA hooks swap their averages into
    one model in turn (which one is validated, tested and saved depends on their order; the
    second's EMA state overwrites the first's in the checkpoint), two stage hooks train the
    stage twice."""
    from mmengine.hooks import EMAHook
    names = [type(hook).__name__ for hook in hooks]
    ema = [name for hook, name in zip(hooks, names) if isinstance(hook, EMAHook)]
    twice = [name for name in dict.fromkeys(names) if name in stage_hooks and
             names.count(name) > 1]
    if len(ema) > 1:
        raise ValueError(f'{where}: custom_hooks hold {len(ema)} EMA hooks ({", ".join(ema)}); '
                         'expected one (two EMA hooks swap their averages into the same model '
                         'in turn, and the checkpoint keeps only the last one\'s)')
    if twice:
        raise ValueError(f'{where}: custom_hooks hold {twice[0]} {names.count(twice[0])} times; '
                         'expected one hook per training stage (a second would train the stage '
                         'again, over the first)')


def rank_line(env_cfg: dict, rank: int, world: int, accelerator: bool) -> str:
    """The one line each process of a distributed run prints: which rank, on what."""
    import torch
    device = (f'GPU {torch.cuda.current_device()}' if accelerator and torch.cuda.is_available()
              else 'CPU')
    backend = (env_cfg.get('dist_cfg') or {}).get('backend', '?')
    return (f'rank {rank}/{world}: {device}, backend {backend}, '
            f'{torch.get_num_threads()} thread(s)')


def check_config_entries(cfg, where: str) -> None:
    """Check a loaded config (:meth:`PlanningRunner.from_cfg` and ``protocol.runner.
    check_config`` run it): model, datasets, hooks, the model's ``pkg`` and the training loop
    name registered types and only options of their classes; ``ValueError`` naming ``where``
    and the entry otherwise."""
    from mmaction.registry import DATASETS, HOOKS, LOOPS, METRICS, MODELS, TASK_UTILS
    from vpn_plugin.models.pkg_builder import build_pkg_builder
    cfg = resolve_dataset_references(copy.deepcopy(cfg))
    check_runner_kinds(cfg, where)  # each value's kind first (lr='abc'), then the options
    check_hook_entries(cfg, where)  # before they are read as lists of dicts below
    entries = [('model', MODELS, cfg.model)] if cfg.get('model') else []
    step_model = (cfg.get('model') or {}).get('step_model')  # PKGBeamSearchPlanner's network
    if isinstance(step_model, dict) and step_model.get('type'):
        entries.append(('model.step_model', MODELS, step_model))
    entries += [(f'{split}_dataloader.dataset', DATASETS, cfg[f'{split}_dataloader'].dataset)
                for split in ('train', 'val', 'test')
                if cfg.get(f'{split}_dataloader') and cfg[f'{split}_dataloader'].get('dataset')]
    entries += [(f'custom_hooks.{i}', HOOKS, hook)
                for i, hook in enumerate(cfg.get('custom_hooks') or [])]
    loop = cfg.get('train_cfg') or {}
    if loop and not loop.get('type'):  # mmengine then picks the loop by by_epoch
        if 'by_epoch' not in loop:  # e.g. train_cfg = dict(max_epochs=5, _delete_=True)
            raise ValueError(f'{where}: train_cfg = {dict(loop)!r} names no training loop (no '
                             "type, no by_epoch); expected type='EpochBasedTrainLoop' (or "
                             'by_epoch=True / False) beside its options')
        loop = {'type': 'EpochBasedTrainLoop' if loop['by_epoch'] else 'IterBasedTrainLoop',
                **loop}
    if loop.get('type'):
        entries.append(('train_cfg', LOOPS, {k: v for k, v in loop.items() if k != 'by_epoch'}))
    pkg = (cfg.get('model') or {}).get('pkg')
    if pkg is not None:
        entries.append(('model.pkg', TASK_UTILS, {'type': 'PKGBuilder', **pkg}))
    entries += [(f'{split}_evaluator', METRICS, evaluator)
                for split in ('val', 'test') for evaluator in _evaluators(cfg.get(f'{split}_evaluator'))]
    for name, registry, entry in entries:
        _check_arguments(f'{where}: {name}', registry, entry)
    check_loader_datasets(cfg, where)
    check_planning_evaluators(cfg, where)
    check_run_values(cfg, where)
    check_runner_options(cfg, where)
    if pkg is not None:
        try:
            build_pkg_builder(copy.deepcopy(pkg))
        except (ValueError, KeyError, TypeError) as error:  # PKGBuilder's name model.pkg.<x>
            named = '' if str(error).startswith('model.pkg') else 'model.pkg: '
            raise ValueError(f'{where}: {named}{error}') from None


ENV_CFG_KEYS = ('cudnn_benchmark', 'mp_cfg', 'dist_cfg', 'resource_limit')  # Runner.setup_env
# what mmengine's Runner.build_dataloader takes besides torch DataLoader's own arguments
DATALOADER_KEYS = ('dataset', 'sampler', 'batch_sampler', 'collate_fn', 'worker_init_fn',
                   'num_batch_per_epoch')
OPTIM_WRAPPER_BUILD_KEYS = ('type', 'optimizer', 'constructor', 'paramwise_cfg')


def check_loader_datasets(cfg, where: str) -> None:
    """A loader without a dataset (``train_dataloader = dict(_delete_=True, batch_size=4)``)
    was built and failed in torch's sampler: "object of type 'NoneType' has no len()"."""
    for split in ('train', 'val', 'test'):
        loader = cfg.get(f'{split}_dataloader')
        if isinstance(loader, dict) and loader.get('dataset') is None:
            raise ValueError(f'{where}: {split}_dataloader.dataset is missing: a loader reads a '
                             "dataset (an entry with _delete_=True keeps none of its base "
                             "config's options); expected dataset=dict(type=...), or "
                             f'{split}_dataloader=None for no such loop')


def check_runner_options(cfg, where: str) -> None:
    """The runner's own entries take only options their mmengine/torch classes read:
    ``env_cfg`` (an unknown key is ignored without a word), ``randomness``, each dataloader,
    ``optim_wrapper`` and its ``optimizer``, ``default_hooks`` and ``param_scheduler``
    (a misspelt key is a TypeError traceback, for the checkpoint hook only after the whole
    training); ``ValueError`` naming the entry, the key and the options there are."""
    import torch.utils.data
    from mmaction.registry import HOOKS, OPTIM_WRAPPERS, OPTIMIZERS, PARAM_SCHEDULERS
    _check_keys(f'{where}: env_cfg', cfg.get('env_cfg'), ENV_CFG_KEYS)
    _check_keys(f'{where}: randomness', cfg.get('randomness'),
                _parameters(Runner.set_randomness))
    if isinstance(cfg.get('randomness'), dict) and 'seed' not in cfg.randomness:
        raise ValueError(f'{where}: randomness.seed is missing: a required option of mmengine\'s '
                         "Runner.set_randomness (an entry with _delete_=True keeps none of its "
                         'base config\'s options); expected randomness=dict(seed=0, ...), or '
                         'seed=None for a random one')
    loader_keys = sorted({*_parameters(torch.utils.data.DataLoader.__init__), *DATALOADER_KEYS})
    for split in ('train', 'val', 'test'):
        _check_keys(f'{where}: {split}_dataloader', cfg.get(f'{split}_dataloader'), loader_keys)
        check_persistent_workers(f'{where}: {split}_dataloader', cfg.get(f'{split}_dataloader'))
    wrapper = cfg.get('optim_wrapper')
    if isinstance(wrapper, dict) and 'constructor' not in wrapper:
        _check_optim_wrapper(f'{where}: optim_wrapper', wrapper, OPTIM_WRAPPERS, OPTIMIZERS)
    for name, hook in (cfg.get('default_hooks') or {}).items():
        if isinstance(hook, dict) and hook.get('type'):
            _check_hook(f'{where}: default_hooks.{name}', HOOKS, hook)
    schedulers = cfg.get('param_scheduler')
    for index, scheduler in enumerate(schedulers if isinstance(schedulers, list)
                                      else [schedulers]):
        if isinstance(scheduler, dict) and scheduler.get('type'):
            _check_chained_arguments(f'{where}: param_scheduler[{index}]', PARAM_SCHEDULERS,
                                     scheduler)


def check_persistent_workers(where: str, loader) -> None:
    """``persistent_workers=True`` keeps worker processes that ``num_workers=0`` never
    starts (torch: "persistent_workers option needs num_workers > 0", at the first epoch)."""
    if isinstance(loader, dict) and loader.get('persistent_workers') is True \
            and loader.get('num_workers', 0) == 0:
        raise ValueError(f'{where}.persistent_workers=True with {where.split(": ")[-1]}.'
                         f'num_workers={loader.get("num_workers", 0)}: there are no worker '
                         'processes to keep; expected num_workers >= 1, or '
                         'persistent_workers=False')
    if isinstance(loader, dict) and loader.get('prefetch_factor') is not None \
            and loader.get('num_workers', 0) == 0:  # torch: "... only be specified in ..."
        raise ValueError(f'{where}.prefetch_factor={loader["prefetch_factor"]} with '
                         f'{where.split(": ")[-1]}.num_workers=0: batches are prefetched by '
                         'worker processes, and there are none; expected num_workers >= 1, or '
                         'prefetch_factor=None')


def _check_chained_arguments(where: str, registry, entry: dict) -> None:
    """As :func:`_check_arguments` for classes that pass ``**kwargs`` on to their base class
    (mmengine's parameter schedulers): the options of every ``__init__`` up the chain."""
    cls = registry.get(entry.get('type'))
    if not isinstance(cls, type):
        return _check_arguments(where, registry, entry)
    options = set()
    for base in cls.__mro__:
        if '__init__' not in vars(base):
            continue
        parameters = inspect.signature(base.__init__).parameters
        options |= {n for n, p in parameters.items() if p.kind not in (p.VAR_KEYWORD,
                                                                        p.VAR_POSITIONAL)}
        if not any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
            break
    else:
        return None  # every class takes any keyword
    given = {k: v for k, v in entry.items() if k != 'type'}
    from vpn_plugin.config_types import check_options
    check_options(where, cls, {k: v for k, v in given.items() if k != 'optimizer'})
    _check_keys(f'{where} ({entry["type"]})', given,
                (options | {'convert_to_iter_based'}) - {'self', 'optimizer'})


def _parameters(function) -> list:
    return [name for name in inspect.signature(function).parameters if name != 'self']


def _check_keys(where: str, entry, options) -> None:
    if not isinstance(entry, dict):
        return
    unknown = sorted(set(entry) - set(options))
    if unknown:
        from vpn_plugin.errors import close_match_hint
        raise ValueError(f'{where} has no option(s) {unknown}; expected some of '
                         f'{sorted(options)}{close_match_hint(unknown[0], sorted(options))}')


def _check_optim_wrapper(where: str, wrapper: dict, wrappers, optimizers) -> None:
    kind = wrapper.get('type', 'OptimWrapper')
    from vpn_plugin.compat import has_accelerator
    if kind == 'AmpOptimWrapper' and not has_accelerator():  # mmengine: an AssertionError
        raise ValueError(f'{where}.type={kind!r} (mixed precision) needs a GPU and this '
                         "machine has none; use type='OptimWrapper' (or drop --amp)")
    _check_arguments(where, wrappers, {k: v for k, v in wrapper.items()
                                       if k not in OPTIM_WRAPPER_BUILD_KEYS[1:]} | {'type': kind})
    optimizer = wrapper.get('optimizer')
    if isinstance(optimizer, dict):
        _check_arguments(f'{where}.optimizer', optimizers, optimizer)
        _try_optimizer(f'{where}.optimizer', optimizers.get(optimizer['type']), optimizer)


def _try_optimizer(where: str, cls, optimizer: dict) -> None:
    """Build the optimizer on one dummy parameter: torch's own refusal of a value
    (``Invalid beta parameter at index 1: 1.5``) then names the config entry too."""
    import torch
    if not isinstance(cls, type) or not issubclass(cls, torch.optim.Optimizer):
        return
    try:
        cls([torch.nn.Parameter(torch.zeros(1))],
            **{k: v for k, v in optimizer.items() if k != 'type'})
    except (ValueError, TypeError) as error:
        raise ValueError(f'{where} ({optimizer["type"]}): {error}; the values given: '
                         f'{ {k: v for k, v in optimizer.items() if k != "type"} }') from None


def _check_hook(where: str, registry, hook: dict) -> None:
    """A hook's options; mmengine's ``CheckpointHook`` passes the ones it does not know on
    to ``Runner.save_checkpoint``, which takes only its own."""
    from mmengine.hooks import CheckpointHook
    cls = registry.get(hook['type'])
    if isinstance(cls, type) and issubclass(cls, CheckpointHook):
        _check_keys(where, {k: v for k, v in hook.items() if k != 'type'},
                    {*_parameters(CheckpointHook.__init__), *_parameters(Runner.save_checkpoint)}
                    - {'kwargs', 'args'})
    else:
        _check_arguments(where, registry, hook)


def check_planning_evaluators(cfg, where: str) -> None:
    """A planner's val/test evaluators score plans: PlanningMetric (or a subclass) or a dump
    of the predictions; another metric (mmaction2's AccMetric) stopped the test with "error:
    pred_score", a key of a classifier's outputs. MMAction2's own models are not checked."""
    from mmaction.registry import METRICS, MODELS
    from mmengine.evaluator import DumpResults
    from vpn_plugin.evaluation.planning_metric import PlanningMetric
    from vpn_plugin.models.base_planner import BasePlanner
    model_type = (cfg.get('model') or {}).get('type')
    model_class = MODELS.get(model_type) if isinstance(model_type, str) else None
    if not (isinstance(model_class, type) and issubclass(model_class, BasePlanner)):
        return
    for split in ('val', 'test'):
        for evaluator in _evaluators(cfg.get(f'{split}_evaluator')):
            metric = evaluator['type']
            metric_class = METRICS.get(metric) if isinstance(metric, str) else metric
            if isinstance(metric_class, type) and \
                    not issubclass(metric_class, (PlanningMetric, DumpResults)):
                raise ValueError(f'{where}: {split}_evaluator type={metric!r} does not score '
                                 f'plans: {model_type} predicts action plans; expected '
                                 "type='PlanningMetric' (or a subclass), as the base config")


def _evaluators(evaluator) -> list:
    """The metric dicts of an ``*_evaluator`` entry (a dict, or a list of them)."""
    if isinstance(evaluator, dict) and evaluator.get('type'):
        return [evaluator]
    return [e for e in evaluator if isinstance(e, dict)] if isinstance(evaluator, list) else []


def evaluator_output_locks(cfg) -> contextlib.ExitStack:
    """Rank 0 holds a lock on each evaluator's ``out_file`` for the whole run (as tools/test.py
    on ``--out`` / ``--out-metrics``): two tests at once with one ``test_evaluator.out_file``
    both exited 0, the file holding one of them, the other's per-sample scores replaced
    without a word. A second run writing there is refused at its start."""
    from vpn_plugin.locks import exclusive_lock, lock_path_of
    stack = contextlib.ExitStack()
    if os.environ.get('RANK', '0') != '0':  # only rank 0 computes and writes the metrics
        return stack
    try:
        for split in ('val', 'test'):
            for evaluator in _evaluators(cfg.get(f'{split}_evaluator')):
                out = evaluator.get('out_file')
                if isinstance(out, (str, os.PathLike)) and str(out):
                    stack.enter_context(exclusive_lock(
                        lock_path_of(out), wait=False, what=f'{split}_evaluator.out_file {out}',
                        discard_if_refused=True))
    except BaseException:
        stack.close()
        raise
    return stack


def check_run_values(cfg, where: str) -> None:
    """The checks of the runner's own entries that are about more than one value's kind
    (each value's kind: :func:`check_runner_kinds`): ``save_best`` a key of the validation
    metrics, ``rule`` one per ``save_best`` key, the validation and test loops all-or-none,
    ``visualizer.vis_backends`` backend configs."""
    checkpoint = (cfg.get('default_hooks') or {}).get('checkpoint') or {}
    check_save_best(cfg, checkpoint.get('save_best'), where)
    rule = checkpoint.get('rule') if isinstance(checkpoint, dict) else None
    if isinstance(rule, list) and not rule:
        raise ValueError(f"{where}: default_hooks.checkpoint.rule=[]; expected 'greater' or "
                         "'less' (a list of them, one per save_best key), or None to infer it "
                         'from the key')
    for split, loop in (('val', 'ValLoop'), ('test', 'TestLoop')):
        check_evaluation_loop(cfg, split, loop, where)
        check_evaluation_loader(cfg.get(f'{split}_dataloader'), split, where)
    check_training_sampler(cfg, where)
    check_checkpoint_outputs(cfg, where)
    check_schedule_spans(cfg.get('param_scheduler'), where)
    check_dist_backend(cfg, where)
    pattern = (cfg.get('log_processor') or {}).get('mean_pattern')
    if isinstance(pattern, str):
        try:  # else a raw re.error traceback at the first log line, the run under way
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f'{where}: log_processor.mean_pattern={pattern!r} is no regular '
                             f"expression ({error}); expected one such as "
                             "'.*(loss|time|data_time|grad_norm).*'") from None
    for split in ('train', 'val', 'test'):
        loader = cfg.get(f'{split}_dataloader') or {}
        collate, dataset = loader.get('collate_fn'), loader.get('dataset') or {}
        kind = collate.get('type') if isinstance(collate, dict) else collate
        planning = str(dataset.get('type')).split('.')[-1] == 'PlanningDataset'
        # mmengine's default_collate stacks the per-item dicts as planning_collate does;
        # device-resident batches come whole from the dataset and need planning_collate
        allowed = ('planning_collate',) if dataset.get('device_resident') is True else \
            ('planning_collate', 'default_collate')
        if planning and collate is not None and str(kind).split('.')[-1] not in allowed:
            raise ValueError(f'{where}: {split}_dataloader.collate_fn={collate!r}; expected '
                             "dict(type='planning_collate'): the planners read its batches "
                             '(another collate ended in "error: 0" inside the model)')
    backends = (cfg.get('visualizer') or {}).get('vis_backends')
    if backends is not None and (not isinstance(backends, (list, tuple)) or not all(
            isinstance(b, dict) and b.get('type') for b in backends)):
        raise ValueError(f'{where}: visualizer.vis_backends={backends!r}; expected a list of '
                         "backend configs such as [dict(type='LocalVisBackend')] ([] or None "
                         'for none)')


# mmengine's default hooks, which None switches off; any other default_hooks name must be a hook
MMENGINE_DEFAULT_HOOKS = ('runtime_info', 'timer', 'logger', 'param_scheduler', 'checkpoint',
                          'sampler_seed')


def check_hook_entries(cfg, where: str) -> None:
    """Each ``default_hooks`` entry is a hook config (or None for one of mmengine's own) and
    ``custom_hooks`` a list of them: mmengine said "hook should be an instance of Hook or
    dict, but got 0" / "'int' object is not iterable" / a bare AssertionError (rng_state=None)
    without the key."""
    for name, hook in (cfg.get('default_hooks') or {}).items():
        if hook is None and name in MMENGINE_DEFAULT_HOOKS:
            continue
        if not (isinstance(hook, dict) and hook.get('type')):
            off = ' or None (off)' if name in MMENGINE_DEFAULT_HOOKS else ''
            raise ValueError(f'{where}: default_hooks.{name}={hook!r}; expected a hook config '
                             f'dict(type=...){off}')
    hooks = cfg.get('custom_hooks')
    if hooks is not None and (not isinstance(hooks, (list, tuple)) or not all(
            isinstance(hook, dict) and hook.get('type') for hook in hooks)):
        raise ValueError(f'{where}: custom_hooks={hooks!r}; expected a list of hook configs '
                         "such as [dict(type='PKGHook')]")


def check_evaluation_loop(cfg, split: str, loop: str, where: str) -> None:
    """``{split}_cfg`` / ``_dataloader`` / ``_evaluator`` are all None (no such loop) or all
    given (mmengine's message prints the whole loader); the loop is mmengine's ``loop``
    (``test_cfg.type=ValLoop`` evaluated, then ended in an AttributeError traceback) without
    ``fp16`` (half-precision log transitions fail the PKG's check far from the key)."""
    keys = [f'{split}_cfg', f'{split}_dataloader', f'{split}_evaluator']
    unset = [key for key in keys if cfg.get(key) is None]  # absent reads as None in mmengine
    if unset and len(unset) < len(keys):
        given = [key for key in keys if key not in unset]
        raise ValueError(f'{where}: {" and ".join(unset)} = None but {" and ".join(given)} '
                         f'given; expected all three None (no {split} loop; tools/train.py '
                         f"--no-validate drops validation) or all given ({split}_cfg="
                         f"dict(type='{loop}'))")
    evaluator = cfg.get(f'{split}_evaluator')
    if evaluator is not None and not _evaluators(evaluator):  # [] tested, exit 0, no metric
        raise ValueError(f'{where}: {split}_evaluator={evaluator!r} computes no metric; '
                         "expected dict(type='PlanningMetric') (or a list of metric configs)")
    options = cfg.get(f'{split}_cfg')
    if not isinstance(options, dict):
        return
    if options.get('type', loop) != loop:
        raise ValueError(f'{where}: {split}_cfg.type={options.get("type")!r}; expected '
                         f"'{loop}' (the planners' {split} loop)")
    if options.get('fp16', False) is not False:
        raise ValueError(f'{where}: {split}_cfg.fp16={options.get("fp16")!r}; expected False: '
                         'the planners decode in float32 (tools/train.py --amp trains in mixed '
                         'precision on a GPU)')


def check_evaluation_loader(loader, split: str, where: str) -> None:
    """A validation or test dataloader scores each window of its split exactly once: no
    ``drop_last`` (a test with batch_size=100 scored 200 of NIV's 270 windows, exit 0), no
    ``num_batch_per_epoch`` (mmengine cuts the dataset to that many batches: 8 of 270 scored,
    exit 0) and a finite sampler (``InfiniteSampler`` never ended the test)."""
    if not isinstance(loader, dict):
        return
    name = f'{where}: {split}_dataloader'
    batch_sampler = loader.get('batch_sampler')
    drops = [('drop_last', loader.get('drop_last'))] + (
        [('batch_sampler.drop_last', batch_sampler.get('drop_last'))]
        if isinstance(batch_sampler, dict) else [])
    for key, value in drops:
        if value is True:
            raise ValueError(f'{name}.{key}=True leaves the windows of the last incomplete batch '
                             f'out of the {split} metrics; expected False (each {split} window '
                             'is scored once)')
    if loader.get('num_batch_per_epoch') is not None:
        raise ValueError(f'{name}.num_batch_per_epoch={loader["num_batch_per_epoch"]!r} scores '
                         f'only that many batches of the {split} windows; expected None (to '
                         f'score fewer windows on purpose give {split}_dataloader.dataset.limit'
                         '=N, which the results name)')
    sampler = loader.get('sampler')
    kind = str(sampler.get('type')).split('.')[-1] if isinstance(sampler, dict) else None
    if kind is not None and kind != 'DefaultSampler':
        why = ('an endless sampler never ends the loop' if 'Infinite' in kind
               else 'another sampler may repeat or leave out windows')
        raise ValueError(f'{name}.sampler.type={sampler.get("type")!r}; expected '
                         f"'DefaultSampler', which gives each {split} window once ({why})")


def check_training_sampler(cfg, where: str) -> None:
    """An epoch-based training needs a sampler whose epochs end: ``InfiniteSampler`` under
    ``EpochBasedTrainLoop`` trained on past ``num_batch_per_epoch`` and ``max_epochs`` with
    an ETA of '-1 day' (an iteration-based loop is the one it is for)."""
    loader, loop = cfg.get('train_dataloader'), cfg.get('train_cfg')
    sampler = loader.get('sampler') if isinstance(loader, dict) else None
    kind = str(sampler.get('type')).split('.')[-1] if isinstance(sampler, dict) else ''
    loop_type = str(loop.get('type', 'EpochBasedTrainLoop' if loop.get('by_epoch', True)
                             else 'IterBasedTrainLoop')) if isinstance(loop, dict) else ''
    if 'Infinite' in kind and 'EpochBased' in loop_type:
        raise ValueError(f'{where}: train_dataloader.sampler.type={sampler.get("type")!r} '
                         f'with train_cfg.type={loop_type!r}: an endless sampler never ends an '
                         "epoch (the run trains on past max_epochs); expected 'DefaultSampler'")


def check_schedule_spans(schedulers, where: str) -> None:
    """Each parameter scheduler's ``begin`` before its ``end`` (mmengine said "end should be
    larger than begin, but got begin=5, end=2", naming no scheduler)."""
    for index, scheduler in enumerate(schedulers if isinstance(schedulers, list)
                                      else [schedulers]):
        if not isinstance(scheduler, dict):
            continue
        begin, end = scheduler.get('begin', 0), scheduler.get('end')
        if isinstance(begin, int) and isinstance(end, int) and end <= begin:
            raise ValueError(f'{where}: param_scheduler[{index}] ({scheduler.get("type")}): '
                             f'begin={begin}, end={end}; expected begin < end (the epochs or '
                             'iterations it is active in: [begin, end))')


# what mmengine's init_dist passes to torch besides torch's own Backend.backend_list
MMENGINE_DIST_BACKENDS = ('hccl', 'cncl', 'mccl', 'musa')


def check_dist_backend(cfg, where: str) -> None:
    """``env_cfg.dist_cfg.backend`` one torch (or mmengine's device plugins) knows: 'abc'
    was an AssertionError traceback "Unknown backend type abc" inside init_process_group on
    every rank of a distributed run (and unread by a one-process run)."""
    import torch.distributed
    backend = ((cfg.get('env_cfg') or {}).get('dist_cfg') or {}).get('backend')
    known = [b for b in torch.distributed.Backend.backend_list if b != 'undefined']
    if isinstance(backend, str) and backend.lower() not in (*known, *MMENGINE_DIST_BACKENDS):
        raise ValueError(f'{where}: env_cfg.dist_cfg.backend={backend!r}; expected one of '
                         f'{known + list(MMENGINE_DIST_BACKENDS)} (gloo on CPUs, nccl on GPUs)')


def check_checkpoint_outputs(cfg, where: str) -> None:
    """Where the checkpoint and logger hooks write, checked before the run (after it, a
    ``filename_tmpl`` naming a folder or an ``out_dir`` that is a file failed at the first
    save, an epoch in, with advice about disk space): ``filename_tmpl`` a file name, each
    ``out_dir`` a folder or a path one can be made at."""
    hooks = cfg.get('default_hooks') or {}
    checkpoint = hooks.get('checkpoint') if isinstance(hooks.get('checkpoint'), dict) else {}
    template = checkpoint.get('filename_tmpl')
    if isinstance(template, str) and (os.sep in template or (os.altsep or os.sep) in template
                                      or template.strip() in ('.', '..')):
        raise ValueError(f'{where}: default_hooks.checkpoint.filename_tmpl={template!r} names '
                         "a folder; expected a file name such as 'epoch_{}.pth' (checkpoints "
                         'are written to the work dir, or to default_hooks.checkpoint.out_dir)')
    for hook in ('checkpoint', 'logger'):
        options = hooks.get(hook)
        out_dir = options.get('out_dir') if isinstance(options, dict) else None
        if not isinstance(out_dir, str):
            continue
        blocked = next((p for p in [out_dir, *map(str, pathlib.Path(out_dir).parents)]
                        if os.path.lexists(p) and not os.path.isdir(p)), None)
        if blocked is not None:
            raise ValueError(f'{where}: default_hooks.{hook}.out_dir={out_dir!r}: {blocked} is '
                             'a file, not a folder; expected a folder to write into (the run '
                             "adds a folder named after the work dir's)")


def check_save_best(cfg, save_best, where: str) -> None:
    """``default_hooks.checkpoint.save_best`` must be a key the validation metrics have
    (``val_evaluator.prefix=x`` or ``save_best='plan/nosuch'`` ended after the first epoch
    in ``error: plan/success_rate``, mmengine's KeyError); checked when every validation
    evaluator is a ``PlanningMetric`` (whose keys are known before the run)."""
    if not save_best or save_best == 'auto' or cfg.get('val_cfg') is None:
        return
    evaluators = _evaluators(cfg.get('val_evaluator'))
    if not evaluators or any(str(e.get('type')).split('.')[-1] != 'PlanningMetric'
                             for e in evaluators):
        return
    from vpn_plugin.core.metrics import METRIC_NAMES
    keys, settings = set(), set()  # scores; settings the metrics report beside them
    for evaluator in evaluators:
        extra = tuple(evaluator.get('extra_metrics') or ())
        names = [*METRIC_NAMES, *extra]
        names += ['authors_selection'] if evaluator.get('authors_selection') else []
        prefix = evaluator.get('prefix') or 'plan'
        keys |= {f'{prefix}/{name}' for name in names}
        settings |= {f'{prefix}/miou_batch_size'} if 'miou_batch' in extra else set()
    for key in [save_best] if isinstance(save_best, str) else list(save_best):
        if key in settings:
            raise ValueError(f'{where}: default_hooks.checkpoint.save_best={key!r} is the batch '
                             'size miou_batch is computed with, the same at every validation '
                             '(the first checkpoint would stay the best); expected a score of '
                             f'the validation metrics {sorted(keys)}')
        if key not in keys:
            from vpn_plugin.errors import close_match_hint
            raise ValueError(f'{where}: default_hooks.checkpoint.save_best={key!r} is not a '
                             f'key of the validation metrics {sorted(keys)}'
                             f'{close_match_hint(str(key), sorted(keys))}; the best checkpoint '
                             'is chosen by one of them (val_evaluator.prefix names their prefix)')
    check_rule_direction(cfg, [save_best] if isinstance(save_best, str) else list(save_best),
                         where)


def check_rule_direction(cfg, best: list, where: str) -> None:
    """Every score of ``PlanningMetric`` is better when higher: ``rule='less'`` (or the key in
    ``less_keys``) kept the worst validation's checkpoint as the 'best' one, which the test
    then scored, without a word."""
    checkpoint = (cfg.get('default_hooks') or {}).get('checkpoint') or {}
    rules = checkpoint.get('rule')
    rules = [rules] * len(best) if rules is None or isinstance(rules, str) else list(rules)
    less = set(checkpoint.get('less_keys') or ())
    for key, rule in zip(best, rules):
        if rule == 'less' or key in less:
            setting = "rule='less'" if rule == 'less' else f'less_keys={sorted(less)}'
            raise ValueError(f'{where}: default_hooks.checkpoint.{setting} for save_best='
                             f'{key!r}, a score where higher is better: the worst validation '
                             "would be kept as the best checkpoint; expected rule='greater' "
                             '(or None, inferred from the key)')


def resolve_dataset_references(cfg):
    """Replace each string of ``model.pkg.extra_datasets`` (a key such as
    ``'val_dataloader.dataset'``) by that dataset config of ``cfg``; returns ``cfg``."""
    extra = pkg_extra_datasets(cfg)
    for index, item in enumerate(extra):
        if isinstance(item, str) and item.split('.')[0] == 'test_dataloader':
            from mmengine.logging import print_log
            print_log(f'{cfg.filename}: model.pkg.extra_datasets[{index}] = {item!r}: the PKG '
                      'is counted on the test windows it is scored on (a test-set graph: an '
                      "oracle upper bound, as the union_pkg protocol's oracle row, never a "
                      'result)', logger='current', level=logging.WARNING)
        if isinstance(item, str):
            value = cfg
            for key in item.split('.'):
                value = value.get(key) if hasattr(value, 'get') else None
            if not hasattr(value, 'get') or 'type' not in value:
                raise ValueError(f'{cfg.filename}: model.pkg.extra_datasets[{index}] = {item!r} '
                                 'names no dataset config; expected a key such as '
                                 "'val_dataloader.dataset'")
            extra[index] = copy.deepcopy(value)
    return cfg


def warn_test_videos_in_pkg(cfg, index: int, dataset) -> None:
    """An extra PKG dataset given as a config dict that holds videos of the test split (e.g.
    the test window file written out instead of the ``'test_dataloader.dataset'`` key) counts
    the test windows into the graph they are scored with: the same WARNING as the key."""
    from vpn_plugin.datasets.planning_dataset import source_videos
    test = (cfg.get('test_dataloader') or {}).get('dataset') or {}
    if dataset.get('type') != 'PlanningDataset' or test.get('type') != 'PlanningDataset':
        return
    shared = sorted(source_videos(dict(dataset)) & source_videos(dict(test)))
    if shared:
        from mmengine.logging import print_log
        print_log(f'{cfg.filename}: model.pkg.extra_datasets[{index}] holds {len(shared)} '
                  f'video(s) of the test split, e.g. {shared[:3]}: the PKG is counted on the '
                  'test windows it is scored on (a test-set graph: an oracle upper bound, as '
                  "the union_pkg protocol's oracle row, never a result)", logger='current',
                  level=logging.WARNING)


def _check_arguments(where: str, registry, entry: dict) -> None:
    cls = registry.get(entry.get('type'))
    if cls is None:
        raise ValueError(f'{where}: type {entry.get("type")!r} is not registered in '
                         f'{registry.name}')
    from vpn_plugin.config_types import check_options
    check_options(where, cls, {k: v for k, v in entry.items() if k != 'type'})
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(entry) - set(params) - {'type'})
    options = sorted(set(params) - {'self'})
    if unknown:
        from vpn_plugin.errors import close_match_hint
        expected = f'expected some of {options}' if options else 'it takes no options'
        raise ValueError(f'{where}: {entry["type"]} has no option(s) {unknown}; {expected}'
                         f'{close_match_hint(unknown[0], options)}'
                         + getattr(cls, 'options_hint', ''))


def check_loop_counts(cfg) -> None:
    """The kinds of the runner's keys (:func:`check_runner_kinds`) before the horizon and the
    data locations are applied (``data_root=0`` or ``train_dataloader=0`` would be read there
    first), and ``train_cfg.val_begin`` not past ``max_epochs``."""
    where = cfg.filename or 'config'
    check_runner_kinds(cfg, where)
    train_cfg = cfg.get('train_cfg') or {}
    begin, epochs = train_cfg.get('val_begin'), train_cfg.get('max_epochs')
    if begin is not None and isinstance(epochs, int) and begin > epochs \
            and cfg.get('val_cfg') is not None:
        raise ValueError(f'{where}: train_cfg.val_begin={begin} is past train_cfg.max_epochs='
                         f'{epochs}: no validation would run and no checkpoint would be '
                         'selected; to train without validation give --no-validate, else an '
                         'epoch <= max_epochs')


def build_runner(cfg) -> Runner:
    """The config's ``runner_type`` from ``RUNNERS`` (as MMAction2's tools do), else ``Runner``;
    a config without a model (an empty file) is refused naming it."""
    model = cfg.get('model')
    if not isinstance(model, dict) or not model.get('type'):
        raise ValueError(f'{cfg.filename or "config"}: model = {model!r}; expected a model '
                         "dict with a type (an empty config? inherit a model, e.g. _base_ = "
                         "['configs/_base_/models/vpn.py'], or start from a config of configs/)")
    if 'runner_type' in cfg:
        return RUNNERS.build(cfg)
    cfg.experiment_name = unique_experiment_name(cfg)
    return Runner.from_cfg(cfg)

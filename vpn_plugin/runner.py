"""``PlanningRunner``: the mmengine ``Runner`` with a true and short start-up log.

Configs select it with ``runner_type = 'PlanningRunner'`` (``configs/_base_/default_runtime.py``),
so ``tools/train.py``, ``tools/test.py`` and MMAction2's own tools build it from ``RUNNERS``.
Three differences from mmengine's ``Runner``:

* :meth:`PlanningRunner.from_cfg` applies the config's ``horizon`` / ``test_horizon``
  (:func:`vpn_plugin.data_paths.apply_horizon`) and resolves its data locations
  (:func:`vpn_plugin.data_paths.resolve_paths`: ``--cfg-options data_root=DIR`` moves every
  dataset, relative config paths are read from the repository root) before building anything;

* without a GPU the distributed backend is ``gloo`` in the config that is used *and* logged
  (mmengine would log ``nccl``; :func:`vpn_plugin.compat.fix_cpu_init_dist` only swaps it at
  ``init_process_group``);
* the ~250-line config dump is not logged: the config is written to the work dir (as mmengine
  always does) and one log line says where;
* the config's formatted text (yapf, ~1 s) is computed once (:class:`TextCachedConfig`), not
  for the work dir, the message hub and every checkpoint again;
* the console shows progress and results only: the environment dump, the ~110-line hook list,
  the SyncBN notice and the per-epoch "Exp name" go to the log file alone
  (:data:`FILE_ONLY_MESSAGES`).
"""
from __future__ import annotations

import logging
import os.path as osp

from . import compat_applied  # noqa: F401  (compat fixes before OpenMMLab)
from mmengine.config import Config, ConfigDict
from mmengine.runner import Runner
from mmaction.registry import RUNNERS

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


def cpu_backend(env_cfg: dict, has_accelerator: bool) -> dict:
    """``env_cfg`` with ``dist_cfg.backend`` ``nccl`` replaced by ``gloo`` when there is no GPU."""
    dist_cfg = dict(env_cfg.get('dist_cfg') or {})
    if not has_accelerator and dist_cfg.get('backend', 'nccl') in GPU_ONLY_BACKENDS:
        dist_cfg['backend'] = 'gloo'
    return dict(env_cfg, dist_cfg=dist_cfg)


@RUNNERS.register_module()
class PlanningRunner(Runner):
    """mmengine ``Runner`` that applies the config's horizon and data locations, logs the
    backend it uses and writes (not logs) its config."""

    @classmethod
    def from_cfg(cls, cfg) -> 'PlanningRunner':
        from vpn_plugin.data_paths import apply_horizon, resolve_paths
        cfg = resolve_paths(apply_horizon(cfg))
        if type(cfg) is Config:
            object.__setattr__(cfg, '__class__', TextCachedConfig)
        return super().from_cfg(cfg)

    def build_logger(self, *args, **kwargs):
        return quiet_console(super().build_logger(*args, **kwargs))

    def setup_env(self, env_cfg: dict) -> None:
        from vpn_plugin.compat import has_accelerator
        # mutate in place: Runner.__init__ logs this same dict afterwards
        env_cfg.update(cpu_backend(env_cfg, has_accelerator()))
        super().setup_env(env_cfg)

    def _log_env(self, env_cfg: dict) -> None:
        config = self.cfg._cfg_dict
        # Runner._log_env logs the whole config when it is non-empty; Config.__setattr__
        # would store a key, hence object.__setattr__
        object.__setattr__(self.cfg, '_cfg_dict', ConfigDict())
        try:
            super()._log_env(env_cfg)
        finally:
            object.__setattr__(self.cfg, '_cfg_dict', config)
        if config:
            self.logger.info(f'Config: written to {self.config_path()}')

    def config_path(self) -> str:
        """Where :meth:`dump_config` writes the config (mmengine's naming)."""
        name = osp.basename(self.cfg.filename) if self.cfg.filename else f'{self.timestamp}.py'
        return osp.join(self.work_dir, name)


def build_runner(cfg) -> Runner:
    """The config's ``runner_type`` from ``RUNNERS`` (as MMAction2's tools do), else ``Runner``."""
    if 'runner_type' in cfg:
        return RUNNERS.build(cfg)
    return Runner.from_cfg(cfg)

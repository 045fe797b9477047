"""PKGHook: fill the planner's PKG from the training split before train, val or test, and
record the planner's text features in every checkpoint.

The one hook of ``configs/_base_/default_runtime.py``'s ``custom_hooks`` (every planner config
keeps it); it has no options:
how the graph is counted is the model's ``pkg`` config (``PKGBuilder``). A graph that is
already there (``model.pkg_ready``, e.g. loaded from a checkpoint: the runner loads it
before these hooks run) is kept.
"""
import logging

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper

from mmaction.registry import DATASETS, HOOKS
from vpn_plugin.config_types import checked_arguments

from .base_planner import BasePlanner


@HOOKS.register_module()
class PKGHook(Hook):
    """Call ``model.build_pkg(train dataset)`` unless ``model.pkg_ready``; a model that is not
    a ``BasePlanner`` has no graph to fill and is left alone (the runtime is shared)."""

    priority = 'VERY_HIGH'
    options_hint = ("; the PKG's options are the model's: model.pkg=dict(type='PKGBuilder', "
                    "count_mode=..., perturbations=[dict(type='EdgeDropout', fraction=0.1)], "
                    '...)')

    @checked_arguments(prefix='PKGHook: ')
    def __init__(self):
        """No options: the graph's options are the model's ``pkg`` (a study option given to
        the hook is an unknown-option error, e.g. in ``run_protocol --dry-run``)."""
        super().__init__()

    def before_train(self, runner) -> None:
        cfg = getattr(runner, 'cfg', None) or {}
        check_model_fits_data(cfg.get('model') or {}, training_dataset(runner),
                              getattr(cfg, 'filename', None) or 'config')
        self.fill(runner)

    def before_val(self, runner) -> None:
        self.fill(runner)

    def before_test(self, runner) -> None:
        self.fill(runner)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """``meta.text_features``: the identity of the planner's text features
        (``BasePlanner.text_features_identity``), which loading compares
        (``engine.checkpoint.load_weights``)."""
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        identity = model.text_features_identity() if isinstance(model, BasePlanner) else None
        if identity is not None:
            checkpoint.setdefault('meta', {})['text_features'] = identity

    @staticmethod
    def fill(runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if not isinstance(model, BasePlanner) or bool(model.pkg_ready):
            return
        model.build_pkg(training_dataset(runner))
        mark_recount(runner, model.recount_difference())


def mark_recount(runner, difference) -> None:
    """``model.pkg.recount`` over a loaded checkpoint's graph: logged, and where it counted
    another graph a line of the runner's ``changed_from_training`` (a recount of the same
    graph changed nothing and is not named), naming the training split's options that differ
    from the run's (``val_fraction``: which videos are counted). ``difference``:
    ``BasePlanner.recount_difference`` (None: no checkpoint's graph was replaced)."""
    if difference is None:
        return
    if difference == 'same graph':
        print_log('model.pkg.recount: the recounted graph is the checkpoint\'s (same graph)',
                  logger='current')
        return
    options = getattr(runner, 'training_split_changes', list)()  # PlanningRunner's
    why = (f' (the training split is read with other options: {"; ".join(options)})'
           if options else '')
    line = (f'model.pkg.recount: the checkpoint\'s graph in training, recounted here: '
            f'{difference}{why}')
    print_log(line, logger='current', level=logging.WARNING)
    if hasattr(runner, 'changed_from_training'):
        runner.changed_from_training = list(runner.changed_from_training or ()) + [line]


def check_model_fits_data(model_cfg: dict, dataset, where: str) -> None:
    """The model's ``num_actions`` must be the training dataset's (its taxonomy's) and its
    ``num_tasks`` above every task label of the training windows (a label past the task
    head fails inside the loss, or is scored against another task): ``ValueError`` naming the
    config, the value and the fix."""
    meta = getattr(dataset, 'metainfo', None)
    if not isinstance(meta, dict):
        return
    actions, tasks = model_cfg.get('num_actions'), model_cfg.get('num_tasks')
    if actions is not None and meta.get('num_actions') not in (None, actions):
        raise ValueError(f'{where}: model.num_actions={actions!r}, but the training dataset has '
                         f'{meta["num_actions"]} actions (its taxonomy); set '
                         f'model.num_actions={meta["num_actions"]}')
    labels = getattr(dataset, 'tasks', None)
    if isinstance(tasks, int) and isinstance(meta.get('num_tasks'), int) and \
            tasks > meta['num_tasks']:  # allowed: the head of a run on a subset of tasks
        print_log(
            f'{where}: model.num_tasks={tasks} is wider than the training dataset\'s '
            f'{meta["num_tasks"]} tasks: {tasks - meta["num_tasks"]} task outputs are never '
            f'trained (set model.num_tasks={meta["num_tasks"]} unless that is meant)',
            logger='current', level=logging.WARNING)
    if tasks is not None and labels is not None and len(labels) and int(max(labels)) >= tasks:
        raise ValueError(f'{where}: model.num_tasks={tasks!r}, but the training windows have '
                         f'task labels up to {int(max(labels))} (the taxonomy has '
                         f'{meta.get("num_tasks")} tasks); set model.num_tasks='
                         f'{meta.get("num_tasks") or int(max(labels)) + 1}')


def training_dataset(runner):
    """The runner's training dataset: the built dataloader's, else built from its config."""
    loader = runner._train_dataloader  # a config dict until the train loop builds it
    if loader is None or (isinstance(loader, dict) and not loader.get('dataset')):
        raise ValueError('PKGHook: the PKG is counted on the training split, but the config '
                         'has no train_dataloader.dataset and no checkpoint carried a PKG; '
                         'give a train_dataloader or load a trained checkpoint (load_from)')
    if isinstance(loader, dict):
        return DATASETS.build(loader['dataset'])
    return loader.dataset

"""PKGHook: fill the planner's PKG from the training split before train, val or test, and
record the planner's text features in every checkpoint.

The one hook of ``configs/_base_/default_runtime.py``'s ``custom_hooks`` (every planner config
keeps it); it has no options:
how the graph is counted is the model's ``pkg`` config (``PKGBuilder``). A graph that is
already there (``model.pkg_ready``, e.g. loaded from a checkpoint: the runner loads it
before these hooks run) is kept.
"""
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmaction.registry import DATASETS, HOOKS

from .base_planner import BasePlanner


@HOOKS.register_module()
class PKGHook(Hook):
    """Call ``model.build_pkg(train dataset)`` unless ``model.pkg_ready``; a model that is not
    a ``BasePlanner`` has no graph to fill and is left alone (the runtime is shared)."""

    priority = 'VERY_HIGH'
    options_hint = ("; the PKG's options are the model's: model.pkg=dict(type='PKGBuilder', "
                    "count_mode=..., perturbations=[dict(type='EdgeDropout', fraction=0.1)], "
                    '...)')

    def __init__(self):
        """No options: the graph's options are the model's ``pkg`` (a study option given to
        the hook is an unknown-option error, e.g. in ``run_protocol --dry-run``)."""
        super().__init__()

    def before_train(self, runner) -> None:
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

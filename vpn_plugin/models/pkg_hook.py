"""PKGHook: count the Procedural Knowledge Graph on the training set before training."""
import itertools
from typing import List, Optional, Sequence

import numpy as np
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmaction.registry import DATASETS, HOOKS

from .. import core

COUNT_MODES = ('window', 'video')
UNION_MODES = ('pool', 'mean')


@HOOKS.register_module()
class PKGHook(Hook):
    """Fill ``model.log_transitions`` (N, N) from ``train_dataset.pkg_sequences(count_mode)``.

    Study options (all seeded by ``seed``), applied in this order:
    ``data_fraction`` (keep a fraction of the sequences), ``label_noise`` (fraction of steps
    replaced by another action of the same task), ``extra_datasets`` (dataset configs in the same
    action space whose sequences are added: union graph), counting with ``smoothing``,
    ``edge_dropout`` (fraction of edges removed), ``weight_noise`` (sigma of noise on weights);
    ``no_pkg=True`` installs a uniform graph instead (every transition 1/N).
    ``clamp`` is passed to ``pkg_log_transitions`` (None: -inf for unobserved transitions).
    """

    priority = 'VERY_HIGH'

    def __init__(self, count_mode: str = 'window', smoothing: float = 0.0, no_pkg: bool = False,
                 edge_dropout: float = 0.0, weight_noise: float = 0.0, data_fraction: float = 1.0,
                 label_noise: float = 0.0, extra_datasets: Sequence[dict] = (),
                 union: str = 'pool', clamp: Optional[float] = None, seed: int = 0):
        if count_mode not in COUNT_MODES:
            raise ValueError(f'PKGHook.count_mode={count_mode!r} is unknown; expected one of '
                             f'{COUNT_MODES}')
        if union not in UNION_MODES:
            raise ValueError(f'PKGHook.union={union!r} is unknown; expected one of {UNION_MODES}')
        for name, value in (('edge_dropout', edge_dropout), ('data_fraction', data_fraction),
                            ('label_noise', label_noise)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f'PKGHook.{name}={value} is out of range; expected 0..1')
        self.count_mode, self.smoothing, self.no_pkg = count_mode, smoothing, no_pkg
        self.edge_dropout, self.weight_noise = edge_dropout, weight_noise
        self.data_fraction, self.label_noise = data_fraction, label_noise
        self.extra_datasets, self.clamp, self.seed = list(extra_datasets), clamp, seed
        self.union = union

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        dataset = runner.train_dataloader.dataset
        if getattr(dataset, 'horizon', model.horizon) != model.horizon:
            raise ValueError(f'horizon mismatch: train_dataloader.dataset.horizon='
                             f'{dataset.horizon} but model.horizon={model.horizon}; set both '
                             'to the same T')
        pkg = self.build(dataset, model.num_actions)
        model.set_transitions(core.pkg_log_transitions(pkg, clamp=self.clamp))
        edges = int((pkg > 0).sum())
        runner.logger.info(f'PKGHook: {"uniform graph" if self.no_pkg else "PKG"} with {edges} '
                           f'edges over {model.num_actions} actions (count_mode='
                           f'{self.count_mode}, smoothing={self.smoothing})')

    def build(self, dataset, num_actions: int) -> np.ndarray:
        """The (perturbed) PKG (N, N) of a training dataset."""
        if self.no_pkg:
            return np.full((num_actions, num_actions), 1.0 / num_actions)
        sources = self.sequence_sources(dataset, num_actions)
        options = dict(smoothing=self.smoothing, count_mode=self.count_mode,
                       horizon=dataset.horizon)
        if self.union == 'mean' and len(sources) > 1:
            pkg = core.union_pkg(*sources, num_actions=num_actions, **options)
        else:
            pkg = core.build_pkg(itertools.chain(*sources), num_actions, **options)
        if self.edge_dropout > 0:
            pkg = core.edge_dropout(pkg, self.edge_dropout, seed=self.seed)
        if self.weight_noise > 0:
            pkg = core.weight_noise(pkg, self.weight_noise, seed=self.seed)
        return pkg

    def sequence_sources(self, dataset, num_actions: int) -> List[List[List[int]]]:
        """Action sequences of the training set (perturbed), then of each extra dataset."""
        sequences = [list(map(int, s)) for s in dataset.pkg_sequences(self.count_mode)]
        if self.data_fraction < 1.0:
            sequences = core.subsample_sequences(sequences, self.data_fraction, seed=self.seed)
        if self.label_noise > 0:
            sequences = core.label_noise(sequences, self.label_noise,
                                         dataset.taxonomy.task_actions, seed=self.seed)
        sources = [sequences]
        for cfg in self.extra_datasets:
            extra = DATASETS.build(cfg)
            if extra.taxonomy.num_actions != num_actions:
                raise ValueError(f'PKGHook.extra_datasets: {cfg.get("type")} has '
                                 f'{extra.taxonomy.num_actions} actions, the model '
                                 f'{num_actions}; a union graph needs one action space')
            sources.append([list(map(int, s)) for s in extra.pkg_sequences(self.count_mode)])
        return sources


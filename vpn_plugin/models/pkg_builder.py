"""The PKG as a config-built component: ``PKGBuilder`` and its perturbations.

Every planner config carries ``model.pkg = dict(type='PKGBuilder', count_mode='window',
smoothing=0.0, union='pool', extra_datasets=[], perturbations=[], seed=0)``; the planner
(``BasePlanner.build_pkg``) builds it and counts its graph on the training split. The math is
in :mod:`vpn_plugin.core.pkg`; this module only orders it.

Perturbations (``mmaction.registry.TASK_UTILS``) are applied in the order given, each seeded
with the builder's ``seed``: a sequence perturbation (``DataFraction``, ``LabelNoise``) changes
the training sequences before counting, a graph perturbation (``EdgeDropout``,
``WeightNoise``, ``UniformGraph``) the counted graph; a sequence perturbation after a graph
perturbation is refused (it would have nothing to act on).
"""
import inspect
import itertools
from collections.abc import Mapping
from typing import Callable, List, Literal, Optional, Sequence, Union

from vpn_plugin.errors import close_match_hint
from vpn_plugin.config_types import (Fraction, NonNegative, NonNegativeInt, Probability,
                                     check_options, checked_arguments, option_defaults)
import numpy as np

from mmaction.registry import DATASETS, TASK_UTILS

from .. import core

UNION_MODES = ('pool', 'mean')


class SequencePerturbation:
    """Changes the training action sequences before the graph is counted."""
    stage = 'sequences'
    # the options at which it changes nothing (the 0 point of a sweep: LabelNoise(0.0) counts
    # the same graph as no perturbation); None: it always changes the graph
    IDENTITY: Optional[dict] = None

    def __call__(self, sequences: List[List[int]], taxonomy, seed: int) -> List[List[int]]:
        raise NotImplementedError


class GraphPerturbation:
    """Changes the counted graph (N, N)."""
    stage = 'graph'
    IDENTITY: Optional[dict] = None  # as SequencePerturbation's (rows renormalised: round-off)

    def __call__(self, pkg: np.ndarray, seed: int) -> np.ndarray:
        raise NotImplementedError


PERTURBATION_STAGES = (SequencePerturbation.stage, GraphPerturbation.stage)


@TASK_UTILS.register_module()
class DataFraction(SequencePerturbation):
    """Keep a seeded ``fraction`` of the training sequences (sample-efficiency study)."""
    IDENTITY = {'fraction': 1.0}

    @checked_arguments(prefix='DataFraction.')
    def __init__(self, fraction: Fraction):
        self.fraction = fraction

    def __call__(self, sequences, taxonomy, seed):
        return core.subsample_sequences(sequences, self.fraction, seed=seed)


@TASK_UTILS.register_module()
class LabelNoise(SequencePerturbation):
    """Replace a seeded ``fraction`` of the steps by another action of the same task."""
    IDENTITY = {'fraction': 0.0}

    @checked_arguments(prefix='LabelNoise.')
    def __init__(self, fraction: Probability):
        self.fraction = fraction

    def __call__(self, sequences, taxonomy, seed):
        return core.label_noise(sequences, self.fraction, taxonomy.task_actions, seed=seed)


@TASK_UTILS.register_module()
class EdgeDropout(GraphPerturbation):
    """Remove a seeded ``fraction`` of the graph's edges (rows renormalised)."""
    IDENTITY = {'fraction': 0.0}

    @checked_arguments(prefix='EdgeDropout.')
    def __init__(self, fraction: Probability):
        self.fraction = fraction

    def __call__(self, pkg, seed):
        return core.edge_dropout(pkg, self.fraction, seed=seed)


@TASK_UTILS.register_module()
class WeightNoise(GraphPerturbation):
    """Seeded noise of scale ``sigma`` on the edge weights (rows renormalised)."""
    IDENTITY = {'sigma': 0.0}

    @checked_arguments(prefix='WeightNoise.')
    def __init__(self, sigma: NonNegative):
        self.sigma = sigma

    def __call__(self, pkg, seed):
        return core.weight_noise(pkg, self.sigma, seed=seed)


@TASK_UTILS.register_module()
class UniformGraph(GraphPerturbation):
    """The "no PKG" ablation: every transition 1/N."""

    def __call__(self, pkg, seed):
        return np.full(pkg.shape, 1.0 / pkg.shape[0])


def changes_nothing(perturbation) -> bool:
    """Whether a perturbation config (a dict with a registered ``type``) is its class's
    identity (``IDENTITY``: every option at the value that changes nothing), so that a graph
    counted with it is the graph counted without it."""
    if not isinstance(perturbation, dict):
        return False
    kind = perturbation.get('type')
    cls = kind if isinstance(kind, type) else TASK_UTILS.module_dict.get(kind) \
        if isinstance(kind, str) else None
    identity = getattr(cls, 'IDENTITY', None)
    options = {key: value for key, value in perturbation.items() if key != 'type'}
    return isinstance(identity, dict) and set(options) <= set(identity) and all(
        type(options.get(key, value)) in (int, float) and options.get(key, value) == value
        for key, value in identity.items())


def known_perturbations() -> List[str]:
    """The names of the registered perturbations: the classes of TASK_UTILS with a
    ``stage`` of 'sequences' or 'graph' (also a user's own, registered in their module)."""
    return sorted(name for name, cls in TASK_UTILS.module_dict.items()
                  if getattr(cls, 'stage', None) in ('sequences', 'graph'))


def check_perturbation_type(name: str, kind) -> None:
    """A perturbation config's ``type`` must name a registered perturbation (a class is
    taken as it is): ``ValueError`` naming ``name``, the value, the known ones and the
    closest, instead of the registry's KeyError."""
    if isinstance(kind, type) or (isinstance(kind, str) and kind in known_perturbations()):
        return
    known = known_perturbations()
    raise ValueError(f'{name}={kind!r} is not a known perturbation; expected one of {known}'
                     f'{close_match_hint(kind, known)}')


@TASK_UTILS.register_module()
class PKGBuilder:
    """Counts the (perturbed) PKG (N, N) of a training dataset (module docstring).

    Args:
        count_mode: 'window' or 'video' (``core.build_pkg``).
        smoothing: additive smoothing of the counts.
        union: how ``extra_datasets`` join the training sequences: 'pool' (one count over all
            sequences) or 'mean' (mean of the per-dataset graphs, ``core.union_pkg``).
        extra_datasets: dataset configs in the same action space whose sequences are added.
        perturbations: configs of registered perturbations, applied in order.
        seed: of every perturbation (the protocol runner sets the run's seed).
        recount: count the graph with these options even when a loaded checkpoint carries
            one (its graph is ignored): a test that changes only the decoding graph of a
            trained model (SCHEMA w/ PKG under perturbed graphs).
    """

    @checked_arguments(prefix='model.pkg.')
    def __init__(self, count_mode: Literal[core.pkg.COUNT_MODES] = 'window',
                 smoothing: NonNegative = 0.0, union: Literal[UNION_MODES] = 'pool',
                 extra_datasets: Sequence[Union[dict, Callable]] = (),
                 perturbations: Sequence[Union[dict, Callable]] = (),
                 seed: NonNegativeInt = 0, recount: bool = False):
        for name, configs in (('extra_datasets', extra_datasets),
                              ('perturbations', perturbations)):
            if not isinstance(configs, (list, tuple)) or not all(
                    isinstance(c, dict) or callable(c) for c in configs):
                raise ValueError(f'model.pkg.{name}={configs!r}; expected a list of config '
                                 'dicts (e.g. [dict(type=...)]), or [] for none')
        self.count_mode, self.smoothing, self.union = count_mode, smoothing, union
        self.extra_datasets, self.seed, self.recount = list(extra_datasets), seed, recount
        for index, config in enumerate(perturbations):  # their options' declared kinds
            if isinstance(config, dict):
                check_perturbation_type(f'model.pkg.perturbations[{index}].type',
                                        config.get('type'))
            if isinstance(config, dict) and TASK_UTILS.get(config.get('type')) is not None:
                check_options(f'model.pkg.perturbations[{index}]: {config["type"]}',
                              TASK_UTILS.get(config['type']),
                              {k: v for k, v in config.items() if k != 'type'})
        self.perturbations = [p if callable(p) else TASK_UTILS.build(dict(p))
                              for p in perturbations]
        self._check_order()

    def _check_order(self) -> None:
        for index, perturbation in enumerate(self.perturbations):
            # build() applies a perturbation by its stage: any other one would never run
            stage = getattr(perturbation, 'stage', None)
            if stage not in PERTURBATION_STAGES:
                raise ValueError(
                    f'model.pkg.perturbations[{index}] ({perturbation!r:.60}) has stage='
                    f'{stage!r}; expected one of {PERTURBATION_STAGES} (a callable built in '
                    'Python subclasses SequencePerturbation or GraphPerturbation), or it '
                    'would never be applied')
        stages = [p.stage for p in self.perturbations]
        if 'graph' in stages and 'sequences' in stages[stages.index('graph'):]:
            names = [type(p).__name__ for p in self.perturbations]
            raise ValueError(f'model.pkg.perturbations {names}: a sequence perturbation '
                             '(DataFraction, LabelNoise) must come before every graph '
                             'perturbation (EdgeDropout, WeightNoise, UniformGraph)')

    def describe(self) -> str:
        """One line for logs: the options and perturbations."""
        names = ', '.join(type(p).__name__ for p in self.perturbations) or 'none'
        return (f'count_mode={self.count_mode}, smoothing={self.smoothing}, extra datasets '
                f'{len(self.extra_datasets)} ({self.union}), perturbations: {names}, '
                f'seed={self.seed}')

    def build(self, dataset, num_actions: int) -> np.ndarray:
        """The (perturbed) PKG (N, N) of a training ``dataset`` (``pkg_sequences``,
        ``taxonomy``, ``horizon``)."""
        if dataset.taxonomy.num_actions != num_actions:
            raise ValueError(f'PKGBuilder: the training dataset has '
                             f'{dataset.taxonomy.num_actions} actions, the planner '
                             f'{num_actions}; set the model\'s num_actions to the taxonomy\'s')
        sources = self.sequence_sources(dataset, num_actions)
        options = dict(smoothing=self.smoothing, count_mode=self.count_mode,
                       horizon=dataset.horizon)
        if self.union == 'mean' and len(sources) > 1:
            pkg = core.union_pkg(*sources, num_actions=num_actions, **options)
        else:
            pkg = core.build_pkg(itertools.chain(*sources), num_actions, **options)
        for perturbation in self.perturbations:
            if perturbation.stage == 'graph':
                pkg = perturbation(pkg, self.seed)
        return pkg

    def sequence_sources(self, dataset, num_actions: int) -> List[List[List[int]]]:
        """Action sequences of the training set (perturbed), then of each extra dataset."""
        sequences = [list(map(int, s)) for s in dataset.pkg_sequences(self.count_mode)]
        for perturbation in self.perturbations:
            if perturbation.stage == 'sequences':
                sequences = perturbation(sequences, dataset.taxonomy, self.seed)
        return [sequences] + [self._extra_sequences(cfg, num_actions)
                              for cfg in self.extra_datasets]

    def _extra_sequences(self, cfg: dict, num_actions: int) -> List[List[int]]:
        extra = DATASETS.build(dict(cfg))
        if extra.taxonomy.num_actions != num_actions:
            raise ValueError(f'model.pkg.extra_datasets: {cfg.get("type")} has '
                             f'{extra.taxonomy.num_actions} actions, the model {num_actions}; '
                             'a union graph needs one action space')
        return [list(map(int, s)) for s in extra.pkg_sequences(self.count_mode)]


def build_pkg_builder(cfg: Optional[dict]) -> PKGBuilder:
    """A ``PKGBuilder`` from its config (None: the defaults; no ``type``: 'PKGBuilder', so an
    override such as ``model.pkg.perturbations=[...]`` works on a config without ``pkg``)."""
    return TASK_UTILS.build({'type': 'PKGBuilder', **(cfg or {})})


def changed_pkg_options(cfg) -> List[str]:
    """``'name=value'`` of the options of a ``model.pkg`` config that differ from
    ``PKGBuilder``'s defaults (what a PKG study changes). ``seed`` aside: the protocol runner
    sets it for every run, and it only seeds perturbations (listed when given)."""
    if not isinstance(cfg, Mapping):
        return []
    defaults = option_defaults(PKGBuilder)
    changed = []
    for key, value in cfg.items():
        if key in ('type', 'seed'):
            continue
        default = defaults.get(key, inspect.Parameter.empty)
        if isinstance(default, tuple):  # extra_datasets, perturbations: () or []
            differs = bool(value)
        else:
            differs = value != default
        if differs:
            changed.append(f'{key}={value!r}')
    return changed

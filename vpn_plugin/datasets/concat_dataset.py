"""ConcatPlanningDataset: several datasets in ONE action space (the dataset-independent PKG).

Each source is a dataset config file (``configs/_base_/datasets/<name>.py``): its
``<split>_dataloader.dataset`` is built as it is (a ``PlanningDataset``: its own annotations,
features, observation recipe and window policy), at this dataset's horizon. The joined action
space puts the sources side by side: source i's action ids are offset by the actions of the
sources before it, its task ids by their tasks; the joined taxonomy lists their actions and
tasks in that order (task names prefixed with the source's name). A model trained on the union
has ``num_actions`` = the sum over sources; its PKG, counted on the union's sequences, is the
block-diagonal graph of the sources' transitions.

``select`` keeps the windows of some sources only (e.g. the test windows of one dataset, in
the union's action space): the others contribute their taxonomy, no window and no feature.
Batches are gathered on the device (``PlanningDataset.__getitems__``) when every selected
source is ``device_resident`` (the dataset configs' default).
"""
import dataclasses
import os
from pathlib import Path
from typing import List, Literal, Optional, Sequence, Union

from vpn_plugin.config_types import Count, Text, checked_arguments
import numpy as np
from mmaction.registry import DATASETS
from torch.utils.data import Dataset

from .planning_dataset import PlanningDataset
from .taxonomy import Taxonomy, load_taxonomy

SPLITS = ('train', 'val', 'test')


@DATASETS.register_module()
class ConcatPlanningDataset(Dataset):
    """The windows of several planning datasets over their joined action space.

    Args:
        sources: ``[dict(name='crosstask', config='configs/_base_/datasets/crosstask.py',
            cfg_options={}), ...]``: a dataset config per source (relative paths: from the
            repository root) and optional overrides (e.g. ``dict(feature_dir=...)``).
        horizon: T of every source's windows.
        split: 'train', 'val' or 'test': which of each config's dataloaders.
        select: names of the sources whose windows are kept (default: all).
        data_root: the data root every source reads (``--data-root``; default: each config's).
        dataset_options: options given to every source's dataset (e.g. ``subset_fraction``).
    """

    @checked_arguments(prefix='ConcatPlanningDataset: ')
    def __init__(self, sources: Sequence[dict], horizon: Count, split: Literal[SPLITS] = 'train',
                 select: Optional[Sequence[Text]] = None,
                 data_root: Optional[Union[Text, os.PathLike]] = None,
                 dataset_options: Optional[dict] = None):
        if split not in SPLITS:
            raise ValueError(f'ConcatPlanningDataset: split={split!r}; expected one of {SPLITS}')
        self.names = [self._check_source(i, s) for i, s in enumerate(sources)]
        unknown = sorted(set(select or ()) - set(self.names))
        if unknown or (select is not None and not select):
            raise ValueError(f'ConcatPlanningDataset: select={select} must name some of the '
                             f'sources {self.names}')
        self.horizon, self.split = int(horizon), split
        self.selected = list(select) if select else list(self.names)
        configs = [self._dataset_config(s, data_root) for s in sources]
        taxonomies = [load_taxonomy(Path(c['data_root']) / c['taxonomy']) for c in configs]
        self.taxonomy = join_taxonomies(self.names, taxonomies)
        self.action_offsets = np.cumsum([0] + [t.num_actions for t in taxonomies])[:-1]
        self.task_offsets = np.cumsum([0] + [t.num_tasks for t in taxonomies])[:-1]
        self.parts = {name: DATASETS.build(dict(cfg, **(dataset_options or {})))
                      for name, cfg in zip(self.names, configs) if name in self.selected}
        self._join()

    @staticmethod
    def _check_source(index: int, source) -> str:
        if not hasattr(source, 'get') or not source.get('name') or not source.get('config'):
            raise ValueError(f'ConcatPlanningDataset: sources[{index}]={source!r}; expected '
                             "dict(name='<dataset>', config='configs/_base_/datasets/<dataset>"
                             ".py'[, cfg_options={...}])")
        return str(source['name'])

    def _dataset_config(self, source: dict, data_root) -> dict:
        """The source config's ``<split>_dataloader.dataset`` at this horizon, paths resolved."""
        from vpn_plugin.data_paths import REPO_ROOT, load_config
        path = Path(source['config'])
        path = path if path.is_absolute() else REPO_ROOT / path
        cfg = load_config(path, dict(source.get('cfg_options') or {}), data_root=data_root,
                          horizon=self.horizon)
        loader = cfg.get(f'{self.split}_dataloader') or {}
        if not loader.get('dataset'):
            raise ValueError(f'ConcatPlanningDataset: source {source["name"]!r}: {path} has no '
                             f'{self.split}_dataloader.dataset')
        return loader['dataset'].to_dict() if hasattr(loader['dataset'], 'to_dict') \
            else dict(loader['dataset'])

    def _join(self) -> None:
        """Concatenate the selected parts' arrays with offset action and task ids."""
        dims = {name: part.feature_dim for name, part in self.parts.items()}
        if len(set(dims.values())) > 1:
            raise ValueError(f'ConcatPlanningDataset: the sources observe different feature '
                             f'dims {dims}; one model needs one observation recipe')
        self.feature_dim = next(iter(dims.values()))
        parts = [(self.names.index(n), p) for n, p in self.parts.items()]
        self.start = np.concatenate([p.start for _, p in parts])
        self.goal = np.concatenate([p.goal for _, p in parts])
        self.observed = np.concatenate([p.observed for _, p in parts])
        self.observed_steps = self.observed.shape[1]
        self.plans = np.concatenate([p.plans + self.action_offsets[i] for i, p in parts])
        self.tasks = np.concatenate([p.tasks + self.task_offsets[i] for i, p in parts])
        self.windows = [self._offset_window(w, i) for i, p in parts for w in p.windows]
        self.source_of = np.concatenate([np.full(len(p), i) for i, p in parts])
        limited = [p.limited or (len(p), len(p)) for _, p in parts]
        self.limited = (tuple(map(sum, zip(*limited)))  # (kept, all) when a source is limited
                        if any(p.limited for _, p in parts) else None)
        self.device_resident = all(p.device_resident for _, p in parts)
        self._fields = None  # (device, {field: tensor}), PlanningDataset.device_fields

    def _offset_window(self, window, source: int):
        offset = int(self.action_offsets[source])
        return dataclasses.replace(window, task=window.task + int(self.task_offsets[source]),
                                   steps=tuple(a + offset for a in window.steps))

    # ------------------------------------------------------------------ API (PlanningDataset's)
    __len__ = PlanningDataset.__len__
    __getitem__ = PlanningDataset.__getitem__
    __getitems__ = PlanningDataset.__getitems__
    device_fields = PlanningDataset.device_fields
    window_keys = PlanningDataset.window_keys
    metainfo = PlanningDataset.metainfo

    # mean and std over every start and goal observation value of the union (what a checkpoint
    # records of its training features and a test compares), as a PlanningDataset's
    feature_statistics = PlanningDataset.feature_statistics

    @property
    def feature_dirs(self) -> dict:
        """``{source name: feature folder}`` of the sources whose windows are kept (what a
        checkpoint records of its training features, ``engine.checkpoint.features_folder_record``)."""
        return {name: part.feature_dir for name, part in self.parts.items()}

    def feature_files_read(self) -> dict:
        """``{source name: the feature files its windows read}`` (``PlanningDataset``'s)."""
        return {name: part.feature_files_read() for name, part in self.parts.items()}

    def pkg_sequences(self, count_mode: str = 'window') -> List[List[int]]:
        """Every selected source's sequences (``PlanningDataset.pkg_sequences``) in the joined
        action space."""
        return [[a + int(self.action_offsets[self.names.index(name)]) for a in sequence]
                for name, part in self.parts.items() for sequence in part.pkg_sequences(count_mode)]


def join_taxonomies(names: Sequence[str], taxonomies: Sequence[Taxonomy]) -> Taxonomy:
    """One taxonomy with the actions and tasks of ``taxonomies`` side by side (ids offset)."""
    actions = tasks = 0
    joined = Taxonomy([], [], [], [], [], path=' + '.join(t.path for t in taxonomies))
    for name, tx in zip(names, taxonomies):
        joined.action_names += tx.action_names
        joined.task_names += [f'{name}: {task}' for task in tx.task_names]
        joined.task_keys += [f'{name}/{key}' for key in tx.task_keys]
        joined.action_task += [task + tasks for task in tx.action_task]
        joined.task_actions += [[a + actions for a in ids] for ids in tx.task_actions]
        actions, tasks = actions + tx.num_actions, tasks + tx.num_tasks
    return joined

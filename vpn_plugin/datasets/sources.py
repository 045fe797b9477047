"""Annotation sources -> windows, without features: the one loader that ``PlanningDataset``,
``tools/dataset_stats.py``, ``tools/export_windows.py`` and the synthetic features share.

A dataset config names ONE source (paths relative to ``data_root`` unless absolute;
``{horizon}`` is formatted):

* ``window_file``: the unified protocol's window file (``read_window_file``);
* ``video_list`` + ``annotation_dir`` (+ ``tasks_primary``, a check): CrossTask's CSVs;
* ``annotation_file`` in ``annotation_format`` ``'json'`` (our per-video JSON) or ``'coin'``
  (COIN's per-video JSON, ``read_coin_annotations``); ``other_split``: the other split's file
  in the same format: a video listed in both is a bad video ('video in both splits').

``annotation_taxonomy``: the taxonomy the annotations are written in when it is not the
dataset's ``taxonomy``; they are checked against it, then relabelled by action name
(``taxonomy.action_map``), e.g. CrossTask's 133-action CSVs into the merged 105 actions.
Windows of per-video sources are slid over each video's steps in file order
(``build_windows``), which for COIN is the ViterbiPlanNet authors' recipe.
"""
import dataclasses
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ..errors import check_choice, file_on_the_way, link_problem
from .annotations import (BadVideoError, VideoAnnotation, Window, build_windows,
                          coin_video_ids, count_suspicious, crosstask_videos, json_video_ids,
                          read_coin_annotations, read_json_annotations, read_window_file,
                          split_overlap)
from .taxonomy import Taxonomy, action_map, load_taxonomy
from ..tool_choices import DATASET_CONFIGS

ANNOTATION_FORMATS = {'json': read_json_annotations, 'coin': read_coin_annotations}
VIDEO_IDS = {'json': json_video_ids, 'coin': coin_video_ids}  # ids of the other split
SOURCE_KEYS = ('window_file', 'video_list', 'annotation_dir', 'tasks_primary',
               'annotation_file', 'annotation_format', 'other_split', 'annotation_taxonomy')


def source_path(data_root, path, horizon) -> Path:
    """``path`` with ``{horizon}`` formatted, under ``data_root`` unless absolute."""
    path = Path(str(path).format(horizon=horizon))
    return path if path.is_absolute() else Path(data_root) / path


def read_source(data_root, taxonomy: Taxonomy, horizon: int, window_file=None, video_list=None,
                annotation_dir=None, tasks_primary=None, annotation_file=None,
                annotation_format: str = 'json', other_split=None, annotation_taxonomy=None,
                warnings=None
                ) -> Tuple[List[Window], Optional[List[VideoAnnotation]], List[BadVideoError]]:
    """(windows, videos or None for a window file, bad-video errors) of one source;
    ``warnings`` (``validation.AnnotationWarnings``) counts what is merely suspicious."""
    given = [n for n, v in (('window_file', window_file), ('video_list', video_list),
                            ('annotation_file', annotation_file)) if v]
    if len(given) != 1:
        empty = [f'{n}={v!r}' for n, v in (('window_file', window_file), ('video_list', video_list),
                                           ('annotation_file', annotation_file))
                 if v is not None and not v]  # '' or [] (--cfg-options video_list=): unset
        raise ValueError(f'a dataset needs exactly one of window_file, video_list '
                         f'(+annotation_dir) or annotation_file; got {given or "none"}'
                         + (f' ({", ".join(empty)} is empty: expected a file name)'
                            if empty else ''))
    check_choice('annotation_format', annotation_format, ANNOTATION_FORMATS)
    if other_split and not annotation_file:
        raise ValueError('other_split names the other split of an annotation_file; '
                         f'this source is {given[0]}')
    path = _existing(data_root, window_file or video_list or annotation_file, horizon)
    written_in = (load_taxonomy(source_path(data_root, annotation_taxonomy, horizon))
                  if annotation_taxonomy else taxonomy)
    videos = None
    if window_file:
        windows, bad = read_window_file(path, written_in, horizon, warnings)
    else:
        if video_list:
            if not annotation_dir:
                raise ValueError('video_list needs annotation_dir (the CrossTask CSV folder)')
            primary = source_path(data_root, tasks_primary, horizon) if tasks_primary else None
            videos, bad = crosstask_videos(path, source_path(data_root, annotation_dir, horizon),
                                           written_in, primary, warnings)
        else:
            videos, bad = _per_video_file(path, annotation_format, written_in,
                                          other_split and _existing(data_root, other_split,
                                                                    horizon), warnings)
        windows = None
    count_suspicious(videos or [], written_in, warnings)
    if annotation_taxonomy:
        windows, videos = _relabel(windows, videos, action_map(written_in, taxonomy))
    return (build_windows(videos, horizon) if windows is None else windows), videos, bad


def _per_video_file(path: Path, annotation_format: str, taxonomy: Taxonomy,
                    other: Optional[Path], warnings=None) -> tuple:
    videos, bad = ANNOTATION_FORMATS[annotation_format](path, taxonomy, warnings)
    if other is not None:
        videos, overlap = split_overlap(videos, VIDEO_IDS[annotation_format](other), path,
                                        other)
        bad += overlap
    return videos, bad


def why_absent(path: Path) -> str:
    """Why ``path`` cannot be read although a name is there: 'does not exist', or that it is
    a symlink leading nowhere (dangling) or back to itself (a loop), or that a folder on the
    way is a file."""
    if link_problem(path):
        return f'is {link_problem(path)}'
    parent = file_on_the_way(path)
    if parent is not None:
        return f'does not exist: {parent} is a file, not a folder'
    return 'does not exist'


def _existing(data_root, path, horizon) -> Path:
    """The resolved annotation path; FileNotFoundError saying what a source holds when
    missing."""
    resolved = source_path(data_root, path, horizon)
    if not resolved.exists():
        raise FileNotFoundError(
            f'annotation source {resolved} {why_absent(resolved)} (data_root {data_root}). '
            'A window '
            'file is the unified protocol\'s JSON list [{"id": {"feature": "<task>_<vid>.npy", '
            '"task_id": <task index>, "legal_range": [[start_s, end_s, action_id], ...horizon '
            'rows]}, "instruction_len": <steps in the video>}]; the other sources are '
            'described in configs/_base_/datasets/ and vpn_plugin/datasets/sources.py.')
    return resolved


def _relabel(windows: Optional[Sequence[Window]], videos: Optional[Sequence[VideoAnnotation]],
             mapping: List[int]) -> tuple:
    if windows is not None:
        windows = [dataclasses.replace(w, steps=tuple(mapping[a] for a in w.steps))
                   for w in windows]
    if videos is not None:
        videos = [dataclasses.replace(v, steps=[(s, e, mapping[a]) for s, e, a in v.steps])
                  for v in videos]
    return windows, videos


def source_windows(dataset_cfg: dict, warnings=None) -> Tuple[Taxonomy, List[Window],
                                                              Optional[List[VideoAnnotation]]]:
    """(taxonomy, every window of the source in its order, videos or None) of a
    ``PlanningDataset`` config dict (no features read, no validation hold-out). Bad videos
    raise their error, or are left out with ``skip_bad_videos=True``; ``warnings``
    (``validation.AnnotationWarnings``) counts what is merely suspicious, and those left out."""
    missing = [key for key in ('data_root', 'taxonomy', 'horizon') if key not in dataset_cfg]
    if missing:  # dict(_delete_=True, type='PlanningDataset'): mmengine's KeyError 'data_root'
        from vpn_plugin.config_types import OptionsError
        raise OptionsError(f'{dataset_cfg.get("type", "PlanningDataset")}: '
                           f'{", ".join(missing)} missing: required options of the dataset (an '
                           "entry with _delete_=True keeps none of its base config's options)")
    horizon = int(dataset_cfg['horizon'])
    path = source_path(dataset_cfg['data_root'], dataset_cfg['taxonomy'], horizon)
    if not path.exists():
        raise FileNotFoundError(f'taxonomy {path} {why_absent(path)} (data_root '
                                f'{dataset_cfg["data_root"]}); expected a JSON '
                                '{"<idx>_<task>": {"<action id>": "<name>"}}')
    taxonomy = load_taxonomy(path)
    windows, videos, bad = read_source(
        dataset_cfg['data_root'], taxonomy, horizon,
        **{k: dataset_cfg[k] for k in SOURCE_KEYS if dataset_cfg.get(k) is not None},
        warnings=warnings)
    if bad and not dataset_cfg.get('skip_bad_videos'):
        raise bad[0]
    for err in bad if warnings is not None else ():  # skipped as asked, and counted
        warnings.add('bad videos skipped (skip_bad_videos=True)', str(err))
    if videos is None:  # a window file: drop every window of a bad video
        skipped = {err.vid for err in bad}
        windows = [w for w in windows if w.vid not in skipped]
    return taxonomy, windows, videos


def source_files(dataset_cfg: dict) -> list:
    """The annotation files a ``PlanningDataset`` config dict reads (its taxonomy and
    source files; ``annotation_dir`` is a folder): the inputs an output must not replace."""
    keys = ('taxonomy',) + tuple(k for k in SOURCE_KEYS if k not in ('annotation_dir',
                                                                    'annotation_format'))
    horizon = dataset_cfg.get('horizon', '')
    return [source_path(dataset_cfg['data_root'], dataset_cfg[k], horizon) for k in keys
            if dataset_cfg.get(k)]


def dataset_config(dataset: str, split: str, horizon: int, data_root=None) -> dict:
    """The ``split`` ('train' or 'test') dataset dict of ``configs/_base_/datasets/<dataset>``
    (``DATASET_CONFIGS``) at ``horizon``, with ``data_root`` (default: the config's)."""
    from ..data_paths import REPO_ROOT
    if dataset not in DATASET_CONFIGS:
        raise ValueError(f'dataset {dataset!r}; expected one of {sorted(DATASET_CONFIGS)}')
    return config_dataset(REPO_ROOT / 'configs/_base_/datasets' / DATASET_CONFIGS[dataset],
                          split, horizon, data_root)


def default_data_root(dataset: str) -> Path:
    """The folder holding ``<dataset>/...`` that the shipped config of ``dataset`` reads (its
    ``data_root``, ``../shared/data`` from the repository root, whatever the working directory):
    the default of the tools' ``--data-root`` (read from the working directory, it was another
    folder outside the repository root)."""
    return Path(dataset_config(dataset, 'test', 3)['data_root']).parent


def config_dataset(config, split: str, horizon: int, data_root=None) -> dict:
    """The ``split`` ('train' or 'test') dataset dict of any config (a custom dataset's
    included) at ``horizon``, with ``data_root`` (default: the config's). Both splits are
    read at ``horizon``: a cross-horizon config's own ``test_horizon`` (e.g.
    vpn_niv_t6_eval_t3.py's T=3) does not replace the horizon asked for."""
    from ..data_paths import load_config
    if split not in ('train', 'test'):
        raise ValueError(f"split {split!r}; expected 'train' or 'test'")
    cfg = load_config(str(config), data_root=data_root, horizon=horizon, test_horizon=horizon)
    loader = cfg.get(f'{split}_dataloader') or {}
    if 'dataset' not in loader:
        raise ValueError(f'{config}: no {split}_dataloader.dataset; expected a training config '
                         'or a dataset config')
    dataset = loader['dataset'].to_dict()
    if 'sources' in dataset:  # ConcatPlanningDataset: no annotation source of its own
        raise ValueError(f'{config}: {split}_dataloader.dataset is a {dataset.get("type")} of '
                         f'{len(dataset["sources"])} sources, not one dataset; expected a config '
                         'that reads one dataset: give each source\'s config (or --dataset)')
    return dataset

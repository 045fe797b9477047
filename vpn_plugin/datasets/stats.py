"""Window statistics and PKG coverage per horizon (library of tools/dataset_stats.py).

Needs annotations only (no features). The windows are those the dataset's base config
(``configs/_base_/datasets/<dataset>.py``) reads, through the one source loader
(``sources.source_windows``): train = every training video (no validation hold-out;
CrossTask: slid over the CSVs of ``splits/train_videos.json``, NIV: ``splits/train_T{T}.json``,
COIN: slid over ``annotations/coin_train_70.json``); test = the official windows
(``crosstask/splits/test_T{T}_133.json``, ``niv/splits/test_T{T}.json``, COIN: slid over
``annotations/coin_test_30.json``, which gives the authors' test windows).
PKG coverage = % of test windows all of whose transitions are edges of the PKG counted on
the train windows (``None``, shown "-", without train or test windows at that horizon) (``vpn_plugin.core.build_pkg(count_mode='window')`` / ``pkg_coverage``).
What the dataset keeps but counts as suspicious (a video without steps, duplicate windows,
steps out of order: ``validation.AnnotationWarnings``) is in each row's ``warnings`` and
printed below the table, as a training's log says it.
"""
from typing import List

from ..core import build_pkg, pkg_coverage
from .sources import config_dataset, dataset_config, source_windows
from .features import check_disjoint_files
from .validation import AnnotationWarnings, check_disjoint, check_disjoint_ids


def window_statistics(dataset: str = None, data_root=None, horizons=(3, 4, 5, 6),
                      config=None) -> List[dict]:
    """One row per horizon: window counts, actions/tasks (taxonomy and seen), PKG coverage, of
    a shipped ``dataset`` or of the dataset a ``config`` reads (a custom one too). A missing
    annotation file raises FileNotFoundError naming it."""
    def split_dataset(split, horizon):
        if config is not None:
            return config_dataset(config, split, horizon, data_root)
        return dataset_config(dataset, split, horizon, data_root)
    rows = []
    for horizon in horizons:
        train_set, test_set = split_dataset('train', horizon), split_dataset('test', horizon)
        warnings = {'train': AnnotationWarnings(), 'test': AnnotationWarnings()}
        taxonomy, train, _ = source_windows(train_set, warnings['train'])
        _, test, _ = source_windows(test_set, warnings['test'])
        check_splits_apart(train_set, test_set, train, test, horizon)
        coverage = None  # no windows on either side (a small dataset at a long horizon)
        if train and test:
            pkg = build_pkg([w.steps for w in train], taxonomy.num_actions,
                            count_mode='window', horizon=horizon)
            coverage = round(pkg_coverage([w.steps for w in test], pkg), 2)
        rows.append(dict(
            horizon=horizon, train_windows=len(train), test_windows=len(test),
            train_videos=len({w.feature for w in train}),
            test_videos=len({w.feature for w in test}),
            actions=taxonomy.num_actions, tasks=taxonomy.num_tasks,
            actions_seen=len({a for w in train + test for a in w.steps}),
            tasks_seen=len({w.task for w in train + test}),
            pkg_coverage=coverage,
            warnings={split: warned.summary() for split, warned in warnings.items() if warned}))
    return rows


def check_splits_apart(train_set: dict, test_set: dict, train, test, horizon) -> None:
    """The test windows come from videos never trained on: no feature file in both splits'
    windows (``train``, ``test``), by name (``check_disjoint``) or as one file under two
    names (``check_disjoint_files``); ``train_set`` / ``test_set``: their dataset configs.
    dataset_stats and export_windows (a window file is what a protocol evaluates)."""
    where = f'T={horizon}: {_source_name(train_set)} (train) and {_source_name(test_set)} (test)'
    check_disjoint({w.feature for w in train}, {w.feature for w in test}, where)
    check_disjoint_ids({w.feature: (w.task, w.vid) for w in train},
                       {w.feature: (w.task, w.vid) for w in test}, where)
    check_disjoint_files({w.feature for w in train}, {w.feature for w in test},
                         train_set.get('feature_dir'), test_set.get('feature_dir'), where)


def _source_name(dataset_cfg: dict) -> str:
    """The annotation file a dataset config reads (for messages)."""
    from .sources import source_path
    for key in ('window_file', 'video_list', 'annotation_file'):
        if dataset_cfg.get(key):
            return str(source_path(dataset_cfg['data_root'], dataset_cfg[key],
                                   dataset_cfg.get('horizon', '')))
    return 'the dataset'


def format_table(dataset: str, rows: List[dict]) -> str:
    """Plain-text table of ``window_statistics`` rows."""
    header = ('T', 'train win', 'test win', 'train vids', 'test vids', 'actions',
              'seen', 'tasks', 'seen', 'PKG coverage %')
    keys = ('horizon', 'train_windows', 'test_windows', 'train_videos', 'test_videos',
            'actions', 'actions_seen', 'tasks', 'tasks_seen', 'pkg_coverage')
    from ..errors import plain_text
    lines = [plain_text(dataset), ' | '.join(header)]
    lines += [' | '.join(f'{"-" if row[k] is None else row[k]:>{len(h)}}'
                         for k, h in zip(keys, header)) for row in rows]
    lines += [f'WARNING T={row["horizon"]} {split}: {plain_text(summary)} (kept)'
              for row in rows for split, summary in row.get('warnings', {}).items()]
    return '\n'.join(lines)

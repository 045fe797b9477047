"""Window statistics and PKG coverage per horizon (library of tools/dataset_stats.py).

Needs annotations only (no features). Train windows: CrossTask = slid over the CSVs of
``splits/train_videos.json`` (all training videos, no validation hold-out); NIV/COIN =
``splits/train_T{T}.json``. Test windows: the official window files
(``crosstask/splits/test_T{T}_133.json``, ``{niv,coin}/splits/test_T{T}.json``).
PKG coverage = % of test windows all of whose transitions are edges of the PKG counted on
the train windows (``vpn_plugin.core.build_pkg(count_mode='window')`` / ``pkg_coverage``).
"""
from pathlib import Path
from typing import List

from ..core import build_pkg, pkg_coverage
from .annotations import build_windows, crosstask_videos, read_window_file
from .taxonomy import load_taxonomy

DATASET_FILES = {
    'crosstask': dict(taxonomy='taxonomy_133.json', test='splits/test_T{T}_133.json'),
    'niv': dict(taxonomy='taxonomy.json', train='splits/train_T{T}.json',
                test='splits/test_T{T}.json'),
    'coin': dict(taxonomy='taxonomy.json', train='splits/train_T{T}.json',
                 test='splits/test_T{T}.json'),
}


class MissingAnnotations(FileNotFoundError):
    """The dataset's annotations are not in the data root (COIN here)."""


def _windows(path, taxonomy, horizon):
    windows, bad = read_window_file(path, taxonomy, horizon)
    if bad:
        raise bad[0]
    return windows


def _train_windows(dataset: str, root: Path, taxonomy, horizon: int):
    if dataset == 'crosstask':
        videos, bad = crosstask_videos(root / 'splits/train_videos.json',
                                       root / 'crosstask_release/annotations', taxonomy,
                                       root / 'crosstask_release/tasks_primary.txt')
        if bad:
            raise bad[0]
        return build_windows(videos, horizon)
    return _windows(root / DATASET_FILES[dataset]['train'].format(T=horizon), taxonomy, horizon)


def check_available(dataset: str, data_root) -> Path:
    """The dataset folder, or MissingAnnotations saying which window files are absent."""
    if dataset not in DATASET_FILES:
        raise ValueError(f'dataset {dataset!r}; expected one of {sorted(DATASET_FILES)}')
    root = Path(data_root) / dataset
    files = DATASET_FILES[dataset]
    needed = [root / files['taxonomy']] + [root / files[k].format(T=3)
                                           for k in ('train', 'test') if k in files]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        raise MissingAnnotations(
            f'{dataset}: annotations not available in {root}: missing {", ".join(missing)}. '
            'Only its taxonomy may be present (COIN: 180 tasks, 778 actions); put the unified-'
            'protocol window files splits/{train,test}_T{3..6}.json there to get statistics.')
    return root


def window_statistics(dataset: str, data_root, horizons=(3, 4, 5, 6)) -> List[dict]:
    """One row per horizon: window counts, actions/tasks (taxonomy and seen), PKG coverage."""
    root = check_available(dataset, data_root)
    taxonomy = load_taxonomy(root / DATASET_FILES[dataset]['taxonomy'])
    rows = []
    for horizon in horizons:
        train = _train_windows(dataset, root, taxonomy, horizon)
        test = _windows(root / DATASET_FILES[dataset]['test'].format(T=horizon), taxonomy,
                        horizon)
        pkg = build_pkg([w.steps for w in train], taxonomy.num_actions, count_mode='window',
                        horizon=horizon)
        rows.append(dict(
            horizon=horizon, train_windows=len(train), test_windows=len(test),
            train_videos=len({w.feature for w in train}),
            test_videos=len({w.feature for w in test}),
            actions=taxonomy.num_actions, tasks=taxonomy.num_tasks,
            actions_seen=len({a for w in train + test for a in w.steps}),
            tasks_seen=len({w.task for w in train + test}),
            pkg_coverage=round(pkg_coverage([w.steps for w in test], pkg), 2)))
    return rows


def format_table(dataset: str, rows: List[dict]) -> str:
    """Plain-text table of ``window_statistics`` rows."""
    header = ('T', 'train win', 'test win', 'train vids', 'test vids', 'actions',
              'seen', 'tasks', 'PKG coverage %')
    keys = ('horizon', 'train_windows', 'test_windows', 'train_videos', 'test_videos',
            'actions', 'actions_seen', 'tasks', 'pkg_coverage')
    lines = [f'{dataset}', ' | '.join(header)]
    lines += [' | '.join(f'{row[k]:>{len(h)}}' for k, h in zip(keys, header)) for row in rows]
    return '\n'.join(lines)

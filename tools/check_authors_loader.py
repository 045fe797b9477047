"""Check that PlanningDataset reproduces the authors' data loader on a fixture.

    python tools/check_authors_loader.py ../shared/reference/authors_loader_small

FIXTURE_DIR holds ``windows.json`` (unified-protocol windows), ``features/`` (one file per
video), ``taxonomy.json`` and ``expected.npz`` (what the authors' ``dataset/dataloader.py``
built: ``window_index``, ``states`` (W, T, 2, 3, D), ``start``, ``goal``, ``actions``,
``tasks``; see ../shared/reference/authors_loader_small/README.md). Builds this plugin's
dataset over the same files with ``observation='authors', window_policy='authors'``, prints
the number of mismatching windows per field and exits 1 on any mismatch.
"""
import argparse
import sys
from pathlib import Path

# torch and OpenMMLab are imported after the arguments are parsed (--help and refusals answer
# in ~0.1 s; tests/test_import_purity.py)
import numpy as np

from vpn_plugin.errors import check_file, parse_once, path_argument, path_kind, tool_main

FIELDS = ('window_index', 'start', 'goal', 'observed', 'actions', 'tasks')
RECORDED = ('window_index', 'states', 'start', 'goal', 'actions', 'tasks')  # expected.npz's


def build_dataset(fixture: Path, horizon: int, frame_dim: int) -> 'PlanningDataset':
    """The plugin's dataset over a fixture with the authors' recipe and window policy."""
    from vpn_plugin.datasets import PlanningDataset
    return PlanningDataset(data_root=fixture, horizon=horizon, taxonomy='taxonomy.json',
                           feature_dir=fixture / 'features', window_file='windows.json',
                           split='test', observation='authors', window_policy='authors',
                           observed_steps=horizon - 1, frame_dim=frame_dim)


def ours(dataset: 'PlanningDataset') -> dict:
    """The dataset's kept windows as the fixture's fields (observed = end observations of
    steps 0..T-2, i.e. ``states[:, :-1, 1]``)."""
    return dict(window_index=np.array([w.sample for w in dataset.windows]),
                start=dataset.start, goal=dataset.goal, observed=dataset.observed,
                actions=dataset.plans, tasks=dataset.tasks)


def expected(data) -> dict:
    from vpn_plugin.oracles.compare import check_finite_arrays
    states = data['states']
    count = len(states)
    if states.ndim != 5 or states.shape[2] != 2 or not count:
        raise ValueError(f'{getattr(data, "path", "expected.npz")}: states has shape '
                         f'{states.shape}; expected (W, T, 2, 3, D) for the W >= 1 windows the '
                         "authors' loader kept")
    path = getattr(data, 'path', 'expected.npz')
    check_finite_arrays(path, data)  # an inf in a part of states no field compares passed
    return dict(window_index=data['window_index'], start=data['start'], goal=data['goal'],
                observed=states[:, :-1, 1].reshape(count, states.shape[1] - 1, -1),
                actions=data['actions'], tasks=data['tasks'])


def mismatches(got: np.ndarray, want: np.ndarray) -> int:
    """Windows whose field differs (exactly: observations are copies of frames); a different
    number of windows counts every window of the longer side."""
    if got.shape != want.shape:
        return max(len(got), len(want))
    differ = got.reshape(len(got), -1) != want.reshape(len(want), -1)
    return int(differ.any(axis=1).sum())


FILES = ('windows.json', 'taxonomy.json', 'expected.npz')


def compare(fixture) -> dict:
    """Field -> number of mismatching windows."""
    from vpn_plugin.oracles.compare import read_npz
    fixture = Path(fixture)
    if path_kind(fixture) not in (None, 'a folder'):  # e.g. its windows.json given
        raise NotADirectoryError(f'fixture {fixture} is {path_kind(fixture)}; expected the '
                                 'authors-loader fixture folder (the one holding windows.json'
                                 f'{": " + str(fixture.parent) if fixture.name in FILES else ""})')
    for name in FILES:
        check_file(fixture / name, 'fixture file', missing=(
            f'{fixture}: no {name}; expected an authors-loader fixture folder (windows.json, '
            'features/, taxonomy.json, expected.npz: ../shared/reference/authors_loader_small)'))
    data = read_npz(fixture / 'expected.npz')  # a truncated file, an object or missing array named
    unknown = sorted(set(data) - set(RECORDED))
    if unknown:  # an array no field is compared with was skipped without a word
        raise ValueError(f'{fixture / "expected.npz"}: arrays {unknown} are none of the '
                         f'recorded fields this check compares; expected only {list(RECORDED)} '
                         '(../shared/reference/authors_loader_small/README.md: a fixture of '
                         'another layout?)')
    want = expected(data)
    dataset = build_dataset(fixture, want['actions'].shape[1], want['start'].shape[1] // 3)
    got = ours(dataset)
    if len(got['window_index']) != len(want['window_index']):  # every window counts below
        kept, recorded = ([int(i) for i in side['window_index']] for side in (got, want))
        print(f'the dataset kept {len(kept)} windows, expected.npz holds {len(recorded)}: '
              f'windows only the dataset kept {sorted(set(kept) - set(recorded))[:10]}, only '
              f'the authors\' loader {sorted(set(recorded) - set(kept))[:10]} (window_index '
              'of windows.json)' + ('' if set(kept) != set(recorded) else
                                    '; the same indices, some twice'))
    return {field: mismatches(np.asarray(got[field]), np.asarray(want[field]))
            for field in FIELDS}


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('fixture_dir', type=path_argument,
                        help='folder with windows.json, features/, taxonomy.json, expected.npz')
    counts = compare(parse_once(parser, argv).fixture_dir)
    for field, count in counts.items():
        print(f'{field:>13}: {count} mismatching windows')
    failed = sum(counts.values())
    print('FAIL: the dataset differs from the authors\' loader' if failed
          else 'OK: the dataset reproduces the authors\' loader')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())

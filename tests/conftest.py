import os
from pathlib import Path

import pytest

# One torch/OpenMP thread per test process (and the tools it starts), unless the environment
# sets it: `make test` runs a process per core, and two OpenMP threads per process on two busy
# cores spin at every barrier (a tiny U-Net forward 100x slower; the suite's models are too
# small to gain from a second thread). Set before any test module imports torch.
for _name in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_name, '1')
# The tests that ask for two threads on purpose (thread-count invariance) sleep at a barrier
# instead of spinning: a spinning thread on a core the other worker holds made the CEFITO
# two-thread step 154 s instead of 36 s at load 10 (user CPU 52 s -> 12 s; same results).
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get('VPN_SHARED_DATA', REPO_ROOT.parent / 'shared' / 'data'))


@pytest.fixture(scope='session')
def shared_data() -> Path:
    """The real annotations in ../shared/data; tests using it skip when it is absent."""
    if not (SHARED_DATA / 'crosstask').is_dir():
        pytest.skip(f'real annotations not found at {SHARED_DATA} (set VPN_SHARED_DATA)')
    return SHARED_DATA


@pytest.fixture(scope='session')
def tiny_crosstask(shared_data, tmp_path_factory) -> dict:
    """Synthetic features for a small subset of the REAL CrossTask annotations (< 1 s to build).

    Tasks 0-2 of the 133-action taxonomy (23521 Make Jello Shots, 59684 Build Simple Floating
    Shelves, 71781 Make Taco Salad); the first 20 train / 8 test videos of each in the official
    split lists (60 train / 24 test videos; horizon 3: 262 train, 28 val, 105 test windows).
    Features: ``.npz``, 512-d per second, seed 0, difficulty 0.5. Skips without ../shared/data.

    Returns a dict of absolute paths and ready configs::

        data_root, feature_dir, cache_dir, taxonomy, annotation_dir,
        train_video_list, test_video_list, num_tasks (3), num_actions (133), frame_dim (512),
        train_dataset, val_dataset, test_dataset   # dict(type='PlanningDataset', horizon=3, ...)

    Copy a ``*_dataset`` dict before changing it, e.g.
    ``DATASETS.build(dict(tiny_crosstask['train_dataset'], horizon=4))``. Validation holds out
    10% of the train videos (seeded); observations are 'concat3' (1536-d).
    """
    from vpn_plugin.datasets.synthetic import make_tiny_crosstask
    return make_tiny_crosstask(shared_data, tmp_path_factory.mktemp('tiny_crosstask'))


@pytest.fixture
def single_thread():
    """One torch thread for the test (float results then do not depend on the thread count)."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def lock_held_elsewhere():
    """``with lock_held_elsewhere(path, **exclusive_lock_options):`` the lock of ``path``
    (``locks.lock_path_of``) is held by another thread meanwhile: another open file
    description, as another process would hold it."""
    import contextlib
    import threading
    from vpn_plugin.locks import exclusive_lock, lock_path_of

    @contextlib.contextmanager
    def held_elsewhere(path, **options):
        held, release = threading.Event(), threading.Event()

        def other_process():
            with exclusive_lock(lock_path_of(path), **options):
                held.set()
                release.wait(30)
        thread = threading.Thread(target=other_process)
        thread.start()
        if not held.wait(30):
            release.set()
            thread.join()
            raise RuntimeError(f'the other thread did not take the lock of {path}')
        try:
            yield
        finally:
            release.set()
            thread.join()
    return held_elsewhere


@pytest.fixture
def sinfo_of_no_nodes(tmp_path, monkeypatch):
    """A ``sinfo`` on PATH that lists no node (the partition's CPUs unchecked), for tests of
    plan_array's other rules: the real one, where Slurm is installed but its controller is
    down, waits 9 s per call before it fails."""
    folder = tmp_path / 'fake_slurm_bin'
    folder.mkdir()
    sinfo = folder / 'sinfo'
    sinfo.write_text('#!/bin/sh\nexit 0\n')
    sinfo.chmod(0o755)
    monkeypatch.setenv('PATH', f'{folder}{os.pathsep}{os.environ["PATH"]}')


@pytest.fixture(scope='session')
def tiny_pdpp_checkpoint(tiny_crosstask, tmp_path_factory):
    """A tiny PDPP config (20 diffusion steps, 512-d 'mean3' observations) and an untrained
    checkpoint of it saved as training saves one (its tensors and recorded setting)."""
    import torch
    from tiny_configs import save_recorded, write_tiny_config
    from vpn_plugin.apis import init_planner
    folder = tmp_path_factory.mktemp('fixleft_pdpp')
    config = write_tiny_config(folder / 'tiny_pdpp.py',
                               REPO_ROOT / 'configs/baselines/pdpp_crosstask_t3.py',
                               "model = dict(feature_dim=512, num_tasks=3, dim=32, "
                               "n_timesteps=20)\n", tiny_crosstask, batch_size=32,
                               steps_per_epoch=3)
    torch.manual_seed(0)
    model = init_planner(str(config))
    model.diffusion.classifier_ready.fill_(True)  # an untrained classifier: its plans serve
    dataset_cfg = dict(tiny_crosstask['train_dataset'], observation='mean3')
    return config, save_recorded(model, folder / 'pdpp.pth', dataset_cfg)


# --- xdist: the longest test files first ---------------------------------------------------
# `make test` runs files on two workers (--dist loadfile). xdist queues the files by their number
# of tests, so the suite's longest files (one or two end-to-end tests each: the official
# comparisons, the real-Slurm array) came last, and one worker ran them while the other, out of
# files, waited. The files below start first, longest first; every other file (< 6 s) keeps
# xdist's order after them. Figures: idle seconds per file, the sum of its tests' --durations
# (setup + call + teardown) in the idle full run of ac0a694 (closing16's verification: 5599
# tests, 455 s on two workers, nothing beside it; /tmp/fin/idle16.log). A file missing from the
# table runs all the same (only later); the order changes no check.
LONGEST_FILES = {
    'tests/test_slurm_cluster.py': 51.8,
    'tests/test_compare_official_kepp.py': 47.8,
    'tests/test_protocol.py': 47.5,
    'tests/test_train.py': 31.1,
    'tests/test_kepp.py': 29.7,
    'tests/test_protocol_units.py': 29.4,
    'tests/test_compare_official_cefito.py': 28.8,
    'tests/test_compat.py': 25.0,
    'tests/test_kill_safe_checkpoints.py': 20.1,
    'tests/test_compare_official_training.py': 19.9,
    'tests/test_compare_official_pdpp.py': 19.5,
    'tests/test_hostile_pass4.py': 17.3,
    'tests/test_protocol_slurm.py': 17.2,
    'tests/test_report_plots.py': 17.1,
    'tests/test_config_schema.py': 16.5,
    'tests/test_your_method.py': 15.7,
    'tests/test_llm_tools.py': 14.8,
    'tests/test_llm_endpoint.py': 13.5,
    'tests/test_synthetic.py': 12.5,
    'tests/test_tools_cli.py': 12.3,
    'tests/test_pdpp.py': 12.0,
    'tests/test_cefito.py': 11.9,
    'tests/test_studies.py': 11.5,
    'tests/test_extract_features.py': 10.1,
    'tests/test_import_purity.py': 9.7,
    'tests/test_hostile_pass13_fix1.py': 9.4,
    'tests/test_config_types.py': 9.3,
    'tests/test_hostile_silent.py': 9.3,
    'tests/test_coin.py': 9.1,
    'tests/test_report.py': 9.0,
    'tests/test_configs.py': 8.2,
    'tests/test_dry_run.py': 8.1,
    'tests/test_hostile_wrong_results.py': 8.1,
    'tests/test_hostile_pass9_protocol.py': 7.7,
    'tests/test_hostile_pass5_heavy.py': 7.7,
    'tests/test_schema.py': 7.1,
    'tests/test_hostile_tools.py': 6.9,
    'tests/test_resume.py': 6.5,
    'tests/test_known_s13.py': 6.3,
    'tests/test_ema_checkpoints.py': 6.2,
    'tests/test_hostile_pass15_fixrows.py': 6.1,
    'tests/test_hostile_pass15_passL.py': 6.0,
}


@pytest.hookimpl(optionalhook=True)  # a run without xdist (-p no:xdist) has no such hook
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile with :data:`LONGEST_FILES` queued first (other modes: xdist's own)."""
    if config.getvalue('dist') != 'loadfile':
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFilesFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            # the first call comes after schedule() queued every file: reorder the queue once
            if not getattr(self, 'longest_queued_first', False):
                for path in sorted(LONGEST_FILES, key=LONGEST_FILES.get):
                    if path in self.workqueue:
                        self.workqueue.move_to_end(path, last=False)
                self.longest_queued_first = True
            super()._assign_work_unit(node)
    return LongestFilesFirst(config, log)

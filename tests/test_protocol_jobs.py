"""``run_protocol.py --jobs N`` (issue 22, item 4): N runs at once give the results file of one
at a time, and a pool killed with SIGKILL resumes without duplicates or orphans."""
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
from mmengine.config import Config

import resume_pause_hook  # noqa: F401  (registers PauseBeforeTestHook)
from vpn_plugin.protocol.pool import slots
from vpn_plugin.protocol.results import read_results
from vpn_plugin.protocol.runner import ProtocolRunner, expand_units

REPO = Path(__file__).resolve().parents[1]
SEEDS = [0, 1, 2]


def uniform_protocol(tiny, request: Path, markers: Path):
    """The PKG with uniform emissions (tested, not trained: seconds per run) x 3 seeds; the
    test of seed 1 pauses while ``request`` exists."""
    options = {f'{split}_dataloader.dataset': dict(tiny[f'{split}_dataset'], _delete_=True)
               for split in ('train', 'val', 'test')}
    options['model.num_actions'] = tiny['num_actions']
    options['custom_hooks'] = [dict(type='PKGHook'), dict(
        type='PauseBeforeTestHook', request=str(request), markers=str(markers), seed=1)]
    return Config(dict(protocol='jobs', dataset='crosstask', seeds=SEEDS, runs=[
        dict(method='PKG + uniform emissions', train=False, cfg_options=options,
             config=str(REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py'))]))


def results_text(runner: ProtocolRunner, out: Path) -> str:
    return runner.results_file.read_text().replace(str(out), '<out>')


def wait_for(condition, what: str, timeout: float = 120):
    start = time.time()
    while not condition():
        if time.time() - start > timeout:
            raise AssertionError(f'{what} did not happen in {timeout} s')
        time.sleep(0.05)


def gone(pid: int) -> bool:
    """The process has exited (absent, or a zombie left for its new parent to reap)."""
    try:
        return 'State:\tZ' in Path(f'/proc/{pid}/status').read_text()
    except FileNotFoundError:
        return True


def test_jobs_write_the_sequential_results_and_a_killed_pool_resumes(tiny_crosstask, tmp_path,
                                                                    single_thread):
    request, markers = tmp_path / 'pause', tmp_path / 'paused'
    markers.mkdir()
    protocol = uniform_protocol(tiny_crosstask, request, markers)
    settings = dict(batch_size=64)
    sequential = ProtocolRunner(protocol, tmp_path / 'one', **settings)
    sequential.run(expand_units(protocol))

    pool = ProtocolRunner(protocol, tmp_path / 'two', **settings)
    request.write_text('pause the test of seed 1')
    parent = multiprocessing.get_context('fork').Process(
        target=pool.run, args=(expand_units(protocol), 2))
    parent.start()
    seed2_test = tmp_path / 'two/jobs/PKG_uniform_emissions/T3/seed2_batch_size-64'
    wait_for(lambda: list(markers.iterdir()) and list(seed2_test.glob('test_*/per_sample.json')),
             'seed 1 paused and seed 2 tested')
    time.sleep(0.5)  # seed 2's row reaches the parent, which holds it behind seed 1
    os.kill(parent.pid, signal.SIGKILL)
    parent.join(30)
    (paused,) = [int(p.name) for p in markers.iterdir()]
    wait_for(lambda: gone(paused), 'the paused job to die with its parent', timeout=10)
    assert [r.seed for r in read_results(pool.results_file)] == [0]  # in unit order
    request.unlink()
    pool.run(expand_units(protocol), jobs=2)
    assert results_text(pool, tmp_path / 'two') == results_text(sequential, tmp_path / 'one')
    rows = read_results(pool.results_file)
    assert [r.seed for r in rows] == SEEDS and len({r.key() for r in rows}) == 3


def test_slots_share_the_cores():
    assert [s.cores for s in slots(2, cores=[0, 1, 2, 3, 4])] == [(0, 1), (2, 3)]
    assert [(s.cores, s.gpu) for s in slots(3, cores=[5, 7])] == [((5,), 0), ((7,), 1),
                                                                  ((5,), 2)]
    with pytest.raises(ValueError, match='expected >= 1'):
        slots(0)


# ------------------------------------------------ issue 34: the ETA of a protocol run
class FakeClock:
    """Seconds that advance by ``step`` at every reading."""

    def __init__(self, step: float):
        self.now, self.step = -step, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def fake_units(count: int) -> list:
    from types import SimpleNamespace
    return [SimpleNamespace(slug=f'slug_{i}', horizon=3, seed=i,
                            tests=[SimpleNamespace(method=f'Method {i}')]) for i in range(count)]


def test_eta_is_the_units_left_times_the_measured_seconds_per_unit():
    from vpn_plugin.protocol.progress import Progress
    times = iter([0.0, 0.0, 30.0, 60.0])
    progress = Progress(4, estimate=100.0, clock=lambda: next(times))
    assert progress.text() == ' (eta ~100s, dry-run estimate)'  # nothing finished yet
    assert progress.text() == ' (eta ~70s, dry-run estimate)'  # 30 s spent
    progress.done()
    assert progress.text() == ' (1/4 done, elapsed 60s, eta 180s)'  # 60 s per unit x 3 left
    times = iter([0.0, 40.0])
    pool = Progress(6, jobs=2, estimate=100.0, clock=lambda: next(times))
    pool.done(), pool.done()  # two at once: 20 s per unit at the pool's rate
    assert pool.text() == ' (2/6 done, elapsed 40s, eta 80s)'
    assert Progress(3, clock=lambda: 0.0).text() == ''  # no estimate, nothing finished


def test_eta_weighs_the_units_left_by_their_dry_run_estimates():
    """Units of unequal cost (a smoke protocol: ViterbiPlanNet 20 s, SCHEMA 8 s, then KEPP 26 s
    and CEFITO 44 s, the dry run's figures): the ETA is the estimated seconds left at the pace
    measured so far, not the units left x the seconds of the cheap first ones (issue 38: a
    smoke protocol said 'eta 165s' after its first unit and took 1050 s more)."""
    from vpn_plugin.protocol.progress import Progress
    times = iter([0.0, 40.0, 40.0])
    progress = Progress(4, estimate=98.0, unit_seconds=[20.0, 8.0, 26.0, 44.0],
                        clock=lambda: next(times))
    progress.done()  # ViterbiPlanNet took 40 s: twice its estimate
    assert progress.text() == ' (1/4 done, elapsed 40s, eta 156s)'  # (8 + 26 + 44) x 2
    times = iter([0.0, 60.0])
    pool = Progress(3, jobs=2, unit_seconds=[10.0, 30.0, 60.0], clock=lambda: next(times))
    pool.done(1)  # out of order (--jobs): the second unit, 30 s estimated, in 60 s
    assert pool.text() == ' (1/3 done, elapsed 60s, eta 140s)'  # (10 + 60) x 2
    with pytest.raises(ValueError, match='2 unit estimates for 3 units'):
        Progress(3, unit_seconds=[1.0, 2.0])


def test_progress_lines_count_every_finished_unit_with_one_job_and_with_two(capsys):
    """The ETA never grows with the elapsed time: after the k-th of 4 units at 10 s each
    (fake clock), it says 10 x (4 - k) s, in turn and in a pool of 2 (whose finished units
    leave its buffer when written: the old count stayed at 1)."""
    import re
    from types import SimpleNamespace
    from vpn_plugin.protocol.pool import run_pool
    from vpn_plugin.protocol.progress import Progress
    clock = SimpleNamespace(now=0.0)

    def ten_seconds(unit, done, wait=True):
        clock.now += 10.0
    in_turn = SimpleNamespace(run_unit=ten_seconds, work_dir=lambda unit: 'work')
    ProtocolRunner.run_in_turn(in_turn, fake_units(4), set(),
                               Progress(4, clock=lambda: clock.now))
    lines = capsys.readouterr().err.splitlines()
    assert [re.sub(r'^\[run_protocol [\d:]+\] ', '', line) for line in lines] == [
        '[1/4] Method 0 T=3 seed=0',
        '[2/4] Method 1 T=3 seed=1 (1/4 done, elapsed 10s, eta 30s)',
        '[3/4] Method 2 T=3 seed=2 (2/4 done, elapsed 20s, eta 20s)',
        '[4/4] Method 3 T=3 seed=3 (3/4 done, elapsed 30s, eta 10s)']
    pooled = SimpleNamespace(run_unit=lambda unit, done, record: [],
                             record=lambda row, done: None)
    # the pool reads the clock once per finished unit: 10 s later each time
    run_pool(pooled, fake_units(4), set(), 2, Progress(4, jobs=2, clock=FakeClock(10.0)))
    finished = [line for line in capsys.readouterr().err.splitlines() if 'finished' in line]
    etas = [re.search(r'\((\d)/4 done, elapsed (\d+)s, eta (\d+)s\)', line).groups()
            for line in finished]
    assert [(int(k), int(e)) for k, _, e in etas] == [(k, 10 * (4 - k)) for k in range(1, 5)]

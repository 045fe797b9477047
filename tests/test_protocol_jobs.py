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

"""Fourth hostile pass (issue 37, "Done means"), half A: 2-rank runs, kill-and-resume, Slurm,
train/test/protocol/report/plots/data/LLM tools. Cases found on main 87faf47, each test
failing on the behaviour before its fix."""
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from test_train import tiny_cfg  # noqa: F401  (fixture)


# ------------------------------------------------ a rank that read other data than rank 0
def _agree_in_process(rank: int, store: str, reads: list, out: str) -> None:
    import torch.distributed as dist
    from vpn_plugin.engine.rank_agreement import check_ranks_agree
    dist.init_process_group('gloo', init_method=f'file://{store}', rank=rank, world_size=2)
    try:
        check_ranks_agree(reads[rank])
        result = 'agreed'
    except ValueError as error:
        result = str(error)
    finally:
        dist.destroy_process_group()
    Path(f'{out}.{rank}').write_text(result)


def _agree_in_two_processes(tmp_path, reads: list) -> list:
    """Each call its own rendezvous file: a FileStore left by an earlier group can be read by
    the next one (a gloo "connection refused" under load)."""
    import tempfile
    import torch.multiprocessing as mp
    run = Path(tempfile.mkdtemp(dir=tmp_path))
    out = str(run / 'result')
    mp.spawn(_agree_in_process, args=(str(run / 'store'), reads, out), nprocs=2)
    return [Path(f'{out}.{rank}').read_text() for rank in range(2)]


def test_ranks_that_read_other_data_are_refused_on_every_rank(tmp_path):
    """Before: tools/dist_test.sh with rank 1 reading another feature folder (a node with
    another copy) exited 0 with SR 12.59, a mixture of the model's 24.44 on the right features
    and 3.33 on the others, recorded as rank 0's test."""
    from vpn_plugin.engine.rank_agreement import dataset_digest, what_this_rank_read

    class Dataset:
        def __init__(self, values):
            self.start = np.asarray(values, np.float32)
            self.plans = np.zeros((len(values), 3), np.int64)

        def __len__(self):
            return len(self.start)

    same = what_this_rank_read({'feature_dir': '/f'},
                               {'test': dataset_digest(Dataset([1.0, 2.0]))}, None)
    other = what_this_rank_read({'feature_dir': '/g'},
                                {'test': dataset_digest(Dataset([1.0, 2.5]))}, None)
    results = _agree_in_two_processes(tmp_path, [same, other])
    for result in results:
        assert 'read different things' in result
        assert "rank 1: the config differs: feature_dir='/g' (rank 0: '/f')" in result
        assert 'rank 1: the test data differs (' in result
    assert _agree_in_two_processes(tmp_path, [same, same]) == ['agreed', 'agreed']


def test_the_rank_check_and_the_checkpoints_hash_the_training_set_once(tiny_cfg, tmp_path,
                                                                       monkeypatch):
    """Before: a distributed run hashed its training set twice (the rank check's record and
    the digest the checkpoints record), each a full pass over its features."""
    from vpn_plugin.engine import rank_agreement
    runner = planning_runner(tiny_cfg, tmp_path / 'run')
    runner._train_loop = runner.build_train_loop(runner._train_loop)
    hashed = []
    digest = rank_agreement.dataset_digest
    monkeypatch.setattr(rank_agreement, 'dataset_digest',
                        lambda dataset: hashed.append(dataset) or digest(dataset))
    runner.check_ranks_agree()
    assert runner.train_data_digest() == digest(runner.train_dataloader.dataset)
    assert hashed == [runner.train_dataloader.dataset]


# ----------------------------------------- resuming with another number of processes
def planning_runner(cfg, work_dir, **changes):
    """The config's PlanningRunner (tools/train.py builds it so), in ``work_dir``."""
    import copy
    from vpn_plugin.runner import build_runner
    cfg = copy.deepcopy(cfg)
    cfg.work_dir = str(work_dir)
    cfg.merge_from_dict(changes)
    return build_runner(cfg)


def test_a_checkpoint_records_its_process_count_and_resumes_only_with_it(tiny_cfg, tmp_path):
    """Before: a 2-process run (tools/dist_train.sh CONFIG 2) resumed with tools/train.py
    (1 process) went on with half the batch per step (the iteration count jumped from 2 to
    3 per epoch), exit 0, nothing said; the checkpoints recorded no process count."""
    from vpn_plugin.engine.checkpoint import read_checkpoint
    work_dir = tmp_path / 'run'
    planning_runner(tiny_cfg, work_dir, **{'train_cfg.max_epochs': 1,
                                           'train_cfg.val_interval': 1}).train()
    checkpoint = read_checkpoint(str(work_dir / 'epoch_1.pth'))
    assert checkpoint['meta']['world_size'] == 1
    checkpoint['meta']['world_size'] = 2
    torch.save(checkpoint, work_dir / 'epoch_1.pth')
    resumed = planning_runner(tiny_cfg, work_dir, **{'train_cfg.max_epochs': 2}, resume=True)
    with pytest.raises(ValueError, match=r'epoch_1.pth: trained by 2 process\(es\), this run '
                                         r'has 1;.*tools/dist_train.sh CONFIG 2 --resume'):
        resumed.train()


def test_a_refused_resume_leaves_the_work_dirs_config_as_it_was(tiny_cfg, tmp_path):
    """Before: the training wrote its config into the work dir first, then refused the resume
    (here a smoke run onto a full run's checkpoint): the work dir's record of the run whose
    checkpoints it holds was replaced by the config of a run that never happened (exit 1)."""
    work_dir = tmp_path / 'run'
    planning_runner(tiny_cfg, work_dir, **{'train_cfg.max_epochs': 1,
                                           'train_cfg.val_interval': 1}).train()
    record = next(work_dir.glob('*.py'))
    before = record.read_text()
    resumed = planning_runner(tiny_cfg, work_dir, **{'train_cfg.max_epochs': 7},
                              resume=True, shortened='smoke: a test')
    with pytest.raises(ValueError, match='a smoke run never continues a full run'):
        resumed.train()
    assert record.read_text() == before


# --------------------------------------------------------- dist_train.sh's launch values
def test_a_rendezvous_port_in_use_is_named_before_torchrun_starts():
    """Before: a second run on the PORT of a running one ended with torch's 40-line
    DistNetworkError traceback (EADDRINUSE) of its rank 0."""
    import socket
    from tool_modules import load_tool
    dist_run = load_tool('dist_run')
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ValueError, match=f'PORT={port}: the rendezvous port is in use'):
            dist_run.check_port_free('127.0.0.1', port)
    dist_run.check_port_free('127.0.0.1', port)  # free again


@pytest.mark.parametrize('env, said', [
    (dict(NNODES='2', NODE_RANK='2'), 'NODE_RANK=2: expected 0..1 (NNODES=2)'),
    (dict(PORT='70000'), 'PORT=70000: expected a port number <= 65535'),
])
def test_dist_train_launch_values_torchrun_would_hang_on_are_refused(env, said):
    """Before: NODE_RANK >= NNODES waited for ever for a rendezvous (no message); PORT 70000
    reached torchrun's own message."""
    import subprocess
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(['bash', str(root / 'tools/dist_train.sh'), 'CONFIG', '1'],
                            env=dict(os.environ, **env), capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2 and said in result.stderr


# ----------------------------------------------------------------- Slurm submission options
def test_a_slurm_option_given_twice_is_refused():
    """Before: `--slurm-options qos=a qos=b` submitted with qos=b, the first dropped unsaid."""
    from vpn_plugin.protocol.slurm import parse_options
    with pytest.raises(ValueError, match="'qos=b': qos is given twice"):
        parse_options(['qos=a', 'qos=b'])
    assert parse_options(['qos=a', 'account=x']) == {'qos': 'a', 'account': 'x'}


def test_cpus_per_run_above_the_partitions_nodes_is_refused(tmp_path, monkeypatch):
    """Before: `--cpus-per-run 99` on a partition of 2-CPU nodes was submitted and stayed
    pending for ever; --status said only "pending ... PartitionConfig"."""
    from vpn_plugin.protocol.slurm import check_partition_cpus
    sinfo = tmp_path / 'sinfo'
    sinfo.write_text('#!/bin/sh\necho 2\necho 2\n')
    sinfo.chmod(0o755)
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    with pytest.raises(ValueError, match='--cpus-per-run 99: the largest node of partition '
                                         'debug has 2 CPUs'):
        check_partition_cpus('debug', 99)
    check_partition_cpus('debug', 2)


# ----------------------------------------------------------------------------- report.py
@pytest.fixture
def two_method_results(tmp_path):
    """A results file of two methods x 3 seeds (no protocol: nothing is missing)."""
    lines = [json.dumps(dict(method=method, dataset='niv', horizon=3, seed=seed, metrics=dict(
                 success_rate=10.0 + seed + shift, mean_accuracy=20.0 + seed, miou_set=30.0 + seed)))
             for method, shift in (('A', 0.0), ('B', 1.0)) for seed in range(3)]
    path = tmp_path / 'results.jsonl'
    path.write_text('\n'.join(lines) + '\n')
    return path


@pytest.mark.parametrize('flags, said', [
    (['--methods', 'A', 'A'], "--methods: 'A' given twice"),
    (['--metrics', 'success_rate', 'success_rate'], "--metrics: 'success_rate' given twice"),
    (['--rename', 'A=X', 'X=Y'], "rename 'X=Y': 'X' is not a method of the selected rows"),
    (['--rename', 'A=X', 'A=Y'], "rename 'A=Y': 'A' is renamed twice"),
])
def test_report_flags_given_twice_or_renaming_nothing_are_refused(two_method_results, flags,
                                                                  said, tmp_path):
    """Before: --methods A A printed A's row twice (and a Δ of A over itself), --metrics x x
    failed as "duplicate results for method=... seed=0" (rows, not the flag), a rename chain
    A=X X=Y or a repeated A=X A=Y kept X / Y without a word."""
    from tool_modules import load_tool
    report = load_tool('report')
    with pytest.raises(SystemExit, match=re.escape(said)):
        report.main([str(two_method_results), '--out', str(tmp_path / 'table')] + flags)
    assert not (tmp_path / 'table.md').exists()


def test_a_resume_on_other_training_data_is_refused(tiny_cfg, tmp_path):
    """Before: `tools/train.py --resume auto --feature-dir OTHER` (another feature folder,
    annotation copy or val_fraction) continued the run, exit 0, nothing said: its first epochs
    trained on one dataset, its last on another."""
    work_dir = tmp_path / 'run'
    planning_runner(tiny_cfg, work_dir, **{'train_cfg.max_epochs': 1,
                                           'train_cfg.val_interval': 1}).train()
    other = planning_runner(tiny_cfg, work_dir, **{'train_cfg.max_epochs': 2,
                                                   'train_dataloader.dataset.val_fraction': 0.3,
                                                   'val_dataloader.dataset.val_fraction': 0.3},
                            resume=True)
    # refused by the training-options table before the data digests are compared
    with pytest.raises(ValueError, match=r'epoch_1.pth: this config changes options the run was '
                                         r'trained with: train_dataloader.dataset.val_fraction: '
                                         r'0.1 in the run, 0.3 here'):
        other.train()
    same = planning_runner(tiny_cfg, work_dir, **{'train_cfg.max_epochs': 2,
                                                  'train_cfg.val_interval': 1}, resume=True)
    same.train()
    assert same.epoch == 2


def test_a_config_file_inside_the_work_dir_is_not_overwritten(tiny_cfg, tmp_path):
    """Before (data loss): `tools/train.py DIR/mine.py --work-dir DIR` dumped the resolved config
    over mine.py itself (its _base_ inheritance and comments gone)."""
    from mmengine.config import Config
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    mine = work_dir / 'mine.py'
    tiny_cfg.dump(str(mine))
    mine.write_text(mine.read_text() + '# my notes\n')
    before = mine.read_text()
    cfg = Config.fromfile(str(mine))
    planning_runner(cfg, work_dir, **{'train_cfg.max_epochs': 1,
                                      'train_cfg.val_interval': 1}).train()
    assert mine.read_text() == before
    assert (work_dir / 'mine.resolved.py').is_file()

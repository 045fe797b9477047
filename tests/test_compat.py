"""Tests of vpn_plugin.compat, tools/train.py, tools/test.py and tools/dist_train.sh.

Runner-level tests use the toy dataset/model of tests/toy_plugin.py and run the
CLIs in subprocesses (fresh mmengine global state, like a user's shell).
"""
import json
import os
import pickle
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from tool_modules import load_tool, run_logs
from vpn_plugin import compat

REPO_ROOT = Path(__file__).resolve().parents[1]
TESTS_DIR = Path(__file__).resolve().parent
DEFAULT_RUNTIME = REPO_ROOT / 'configs' / '_base_' / 'default_runtime.py'

TOY_CONFIG = """
_base_ = [{base!r}]
custom_imports = dict(imports=['vpn_plugin.mm', 'toy_plugin'], allow_failed_imports=False)
model = dict(type='ToyCompatModel', dim=4)
_loader = dict(batch_size=8, num_workers=0, collate_fn=dict(type='default_collate'))
train_dataloader = dict(**_loader, sampler=dict(type='DefaultSampler', shuffle=True),
                        dataset=dict(type='ToyCompatDataset', num_samples=32))
val_dataloader = dict(**_loader, sampler=dict(type='DefaultSampler', shuffle=False),
                      dataset=dict(type='ToyCompatDataset', num_samples=16, seed=1))
test_dataloader = val_dataloader
val_evaluator = dict(type='ToyCompatAccuracy')
test_evaluator = val_evaluator
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=2, val_interval=1)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1))
param_scheduler = [dict(type='MultiStepLR', milestones=[1], by_epoch=True)]
default_hooks = dict(logger=dict(interval=1))
"""


def subprocess_env():
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [str(TESTS_DIR), str(REPO_ROOT), env.get('PYTHONPATH', '')]).rstrip(os.pathsep)
    env['OMP_NUM_THREADS'] = '1'
    return env


def run_python(args, cwd, timeout=240):
    return subprocess.run([sys.executable, *args], cwd=cwd, env=subprocess_env(),
                          capture_output=True, text=True, timeout=timeout)


def assert_ok(result):
    assert result.returncode == 0, f'stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-8000:]}'


@pytest.fixture
def toy_config(tmp_path):
    path = tmp_path / 'toy_config.py'
    path.write_text(TOY_CONFIG.format(base=str(DEFAULT_RUNTIME)))
    return path


def load_checkpoint(path):
    """mmengine's loader with the fixes applied (idempotent: a test run alone needs it)."""
    from mmengine.runner.checkpoint import _load_checkpoint
    compat.apply()
    return _load_checkpoint(str(path), map_location='cpu')


# --- import-time behaviour ---------------------------------------------------

# `import vpn_plugin.mm` prints nothing: tests/test_import_purity.py's child process (one
# interpreter start for both checks)


def test_apply_is_idempotent():
    from mmengine.dist import utils as dist_utils
    from mmengine.runner.checkpoint import CheckpointLoader
    compat.apply()
    compat.apply()
    local_loader = CheckpointLoader._schemes['']
    assert local_loader.vpn_allow_list
    assert not getattr(local_loader.__wrapped__, 'vpn_allow_list', False)
    assert not getattr(dist_utils._init_dist_pytorch.__wrapped__, 'vpn_cpu_aware', False)


# One interpreter for both checks below (an interpreter start with OpenMMLab: ~5 s CPU):
# mmengine's Config reads an ``mmaction::`` base config first without the fix, then with it;
# then mmaction.models is imported and two models built, a UserWarning anywhere failing it.
WITH_FIX = """
import sys
import warnings
warnings.simplefilter('error', UserWarning)  # e.g. mmcv-lite's missing-ops warning
from mmengine.config import Config
try:
    Config.fromfile(sys.argv[1])
except ModuleNotFoundError as error:
    print('WITHOUT_FIX', error)
import vpn_plugin.mm
cfg = Config.fromfile(sys.argv[1])
print('WITH_FIX', cfg.default_scope, cfg.log_level)
import mmaction.models
from mmaction.registry import MODELS
for name in ('DRN', 'VindLURetrieval'):
    try:
        MODELS.build(dict(type=name))
    except ImportError as error:
        print('BUILD', name, error)
"""


@pytest.fixture(scope='module')
def with_fix_run(tmp_path_factory):
    """:data:`WITH_FIX` run with ``-W default`` on a config whose base is
    ``mmaction::_base_/default_runtime.py``: the finished process."""
    folder = tmp_path_factory.mktemp('with_fix')
    config = folder / 'uses_mmaction_base.py'
    config.write_text("_base_ = ['mmaction::_base_/default_runtime.py']\n")
    # -W default also shows DeprecationWarnings (e.g. torch's own torch.jit ones): none may
    # come from our files (a UserWarning of ours fails the run: WITH_FIX makes it an error)
    return run_python(['-W', 'default', '-c', WITH_FIX, str(config)], cwd=folder)


def test_mmaction_models_imports_only_with_fix_and_no_warning_from_our_files(tmp_path,
                                                                            with_fix_run):
    without_fix = run_python(['-c', 'import mmaction.models'], cwd=tmp_path)
    assert without_fix.returncode != 0  # the 1.2.0 wheel is broken on its own
    assert "No module named 'mmaction.models.localizers.drn'" in without_fix.stderr
    result = with_fix_run
    assert_ok(result)
    assert 'BUILD DRN mmaction.models.localizers.drn is missing' in result.stdout
    assert 'BUILD VindLURetrieval' in result.stdout and 'multi-modal' in result.stdout
    package_dir = str(REPO_ROOT / 'vpn_plugin')
    ours = [line for line in result.stderr.splitlines()
            if line.startswith(package_dir) and 'Warning' in line]
    assert ours == []


def test_adafactor_optimizer_is_still_transformers_once_built():
    """fix_transformers_import defers transformers to the build of mmengine's ``Adafactor``
    (tests/test_import_purity.py: not imported by ``import vpn_plugin.mm``)."""
    from mmengine.optim.optimizer.builder import TRANSFORMERS_OPTIMIZERS
    from mmengine.registry import OPTIMIZERS
    from transformers import Adafactor
    parameter = torch.nn.Parameter(torch.ones(3))
    optimizer = OPTIMIZERS.build(dict(type='Adafactor', params=[parameter], lr=0.1,
                                      relative_step=False, scale_parameter=False))
    assert isinstance(optimizer, Adafactor) and optimizer.defaults['lr'] == 0.1
    assert TRANSFORMERS_OPTIMIZERS == ['Adafactor']


def test_missing_importlib_metadata_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, 'importlib_metadata', None)
    with pytest.raises(ImportError, match="pip install importlib-metadata"):
        compat.fix_undeclared_importlib_metadata()


# --- pkg_resources-free package lookups ---------------------------------------

def test_package_lookups_without_pkg_resources():
    import mmaction
    assert compat.is_installed('mmaction2') and compat.is_installed('mmengine')
    assert not compat.is_installed('no-such-package-vpn')
    assert compat.get_installed_path('mmaction2') == os.path.dirname(mmaction.__file__)
    assert compat.get_installed_path('mmaction') == os.path.dirname(mmaction.__file__)
    assert compat.package2module('mmcv-lite') == 'mmcv'
    with pytest.raises(Exception, match='no-such-package-vpn'):
        compat.get_installed_path('no-such-package-vpn')


def test_mmaction_scheme_base_config(with_fix_run):
    assert_ok(with_fix_run)
    assert 'WITH_FIX mmaction INFO' in with_fix_run.stdout
    import importlib.util
    if importlib.util.find_spec('pkg_resources') is None:  # setuptools >= 81
        assert "WITHOUT_FIX No module named 'pkg_resources'" in with_fix_run.stdout


# --- checkpoints under weights_only=True ------------------------------------------

def test_allow_list_is_exact():
    names = {entry[1] if isinstance(entry, tuple) else f'{entry.__module__}.{entry.__qualname__}'
             for entry in compat.mmengine_checkpoint_globals()}
    assert 'mmengine.logging.history_buffer.HistoryBuffer' in names
    assert 'numpy.dtypes.ObjectDType' not in names
    assert not any(name.startswith(('os.', 'posix.', 'subprocess.')) for name in names)


class _MakesDirectory:
    """Pickles as `os.mkdir(path)`: what a malicious checkpoint would run."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def test_forbidden_global_is_refused_with_clear_error(tmp_path):
    victim = tmp_path / 'created_by_pickle'
    checkpoint = tmp_path / 'evil.pth'
    torch.save({'state_dict': {'w': torch.ones(2)}, 'meta': {'x': _MakesDirectory(str(victim))}},
               checkpoint)
    with pytest.raises(compat.ForbiddenCheckpointGlobalError) as error:
        load_checkpoint(checkpoint)
    assert str(checkpoint) in str(error.value)
    assert f'{os.mkdir.__module__}.mkdir' in str(error.value)
    assert not victim.exists()


def test_getattr_is_restricted_to_history_buffer_statistics(tmp_path):
    from mmengine.logging.history_buffer import HistoryBuffer

    class StatisticsReference:
        def __init__(self, name):
            self.name = name

        def __reduce__(self):
            return getattr, (HistoryBuffer, self.name)

    allowed, forbidden = tmp_path / 'allowed.pth', tmp_path / 'forbidden.pth'
    torch.save({'meta': StatisticsReference('mean')}, allowed)
    torch.save({'meta': StatisticsReference('register_statistics')}, forbidden)
    assert load_checkpoint(allowed)['meta'] == HistoryBuffer.mean
    with pytest.raises(pickle.UnpicklingError, match='register_statistics'):
        load_checkpoint(forbidden)


def test_numpy_checkpoint_values_load(tmp_path):
    from mmengine.logging.history_buffer import HistoryBuffer
    buffer = HistoryBuffer()
    buffer.update(np.float64(0.5))
    path = tmp_path / 'numpy.pth'
    torch.save({'meta': {'hub': buffer, 'best': np.float32(1.5), 'ids': np.arange(3)}}, path)
    loaded = load_checkpoint(path)['meta']
    assert loaded['hub'].mean() == 0.5 and loaded['best'] == np.float32(1.5)
    assert loaded['ids'].tolist() == [0, 1, 2]


def assert_training_log_is_true_short_and_free_of_our_warnings(log: str, work_dir: Path):
    """The log names the backend used, points to the dumped config instead of printing it, and
    no warning comes from vpn_plugin files (run with -W default: DeprecationWarnings show too).
    Checked on the first training of the test below (one toy training for both)."""
    expected_backend = 'nccl' if torch.cuda.is_available() else 'gloo'
    assert f"dist_cfg: {{'backend': '{expected_backend}'}}" in run_logs(work_dir)
    assert 'dist_cfg' not in log  # the environment dump stays off the console
    assert f'Config: written to {work_dir / "toy_config.py"}' in log
    assert (work_dir / 'toy_config.py').is_file()
    assert 'custom_imports' not in log and 'optim_wrapper' not in log  # no config dump
    package_dir = str(REPO_ROOT / 'vpn_plugin')
    ours = [line for line in log.splitlines() if line.startswith(package_dir) and 'Warning' in line]
    assert ours == [] and 'prefix is not set' not in log


def test_train_resume_and_test_with_weights_only(toy_config, tmp_path, monkeypatch, capfd):
    """The training runs in a fresh interpreter (its console log is checked); the resume and
    the test, which load its checkpoints under weights_only=True, run the tools in this
    process (an interpreter start with OpenMMLab: ~5 s CPU each; tools/train.py and
    tools/test.py run as commands in tests/test_train.py, test_hostile_tools.py, ...)."""
    major, minor = (int(part) for part in torch.__version__.split('.')[:2])
    assert (major, minor) >= (2, 6), 'weights_only=True is the torch.load default from 2.6'
    assert os.environ.get('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD') is None
    work_dir = tmp_path / 'work'
    train = [str(toy_config), '--work-dir', str(work_dir)]
    trained = run_python(['-W', 'default', 'tools/train.py', *train, '--tensorboard'],
                         cwd=REPO_ROOT)
    assert_ok(trained)
    assert_training_log_is_true_short_and_free_of_our_warnings(
        trained.stdout + trained.stderr, work_dir)
    assert load_checkpoint(work_dir / 'epoch_2.pth')['meta']['epoch'] == 2
    assert list(work_dir.glob('*/vis_data/events.out.tfevents.*')), 'no TensorBoard log written'

    monkeypatch.setenv('LOCAL_RANK', '0')  # as parse_args sets it in a process of its own
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    monkeypatch.syspath_prepend(str(TESTS_DIR))  # custom_imports: toy_plugin
    capfd.readouterr()
    load_tool('train').main([*train, '--resume', '--cfg-options', 'train_cfg.max_epochs=3'])
    resumed = capfd.readouterr()
    assert 'resumed epoch: 2' in resumed.out + resumed.err
    assert load_checkpoint(work_dir / 'epoch_3.pth')['meta']['epoch'] == 3

    metrics_file, dump_file = tmp_path / 'metrics.json', tmp_path / 'predictions.pkl'
    load_tool('test').main([str(toy_config), str(work_dir / 'epoch_3.pth'), '--work-dir',
                            str(work_dir), '--out-metrics', str(metrics_file),
                            '--out', str(dump_file)])
    accuracy = json.loads(metrics_file.read_text())['toy/accuracy']
    with open(dump_file, 'rb') as file:
        predictions = pickle.load(file)  # written by this test's own run
    assert len(predictions) == 16
    assert accuracy == pytest.approx(100.0 * sum(p == t for p, t in predictions) / 16)


def test_unpatched_mmengine_loader_fails_on_runner_checkpoint(tmp_path):
    """Shows the bug the checkpoint fix covers (mmengine's own loader, weights_only on)."""
    from mmengine.runner.checkpoint import CheckpointLoader
    from mmengine.logging.history_buffer import HistoryBuffer
    buffer = HistoryBuffer()
    buffer.update(1.0)
    path = tmp_path / 'hub.pth'
    torch.save({'message_hub': {'log_scalars': {'loss': buffer}}}, path)
    with pytest.raises(pickle.UnpicklingError):
        CheckpointLoader._schemes[''].__wrapped__(str(path), 'cpu')
    assert load_checkpoint(path)['message_hub']['log_scalars']['loss'].current() == 1.0


# --- tools/train.py command-line handling --------------------------------------------

def test_train_cli_switches_reach_the_config(toy_config, monkeypatch, tmp_path):
    monkeypatch.setenv('LOCAL_RANK', '0')  # parse_args sets it when missing
    monkeypatch.chdir(tmp_path)
    train = load_tool('train')
    args = train.parse_args([str(toy_config), '--seed', '7', '--deterministic', '--tensorboard',
                             '--resume', 'auto', '--cfg-options', 'train_cfg.max_epochs=5'])
    cfg = train.load_config(args)
    assert cfg.work_dir == os.path.join('work_dirs', 'toy_config')
    assert cfg.randomness.seed == 7 and cfg.randomness.deterministic
    assert not cfg.resume and cfg.load_from is None and cfg.train_cfg.max_epochs == 5
    assert cfg.visualizer.vis_backends[-1]['type'] == 'TensorboardVisBackend'
    (tmp_path / 'a.pth').write_bytes(b'')  # --resume rules: tests/test_resume.py
    checkpoint = train.load_config(train.parse_args([str(toy_config), '--resume', 'a.pth']))
    assert checkpoint.resume and checkpoint.load_from == 'a.pth'


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the CPU-only message')
def test_amp_without_gpu_is_a_clear_error(toy_config, monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '0')
    train = load_tool('train')
    with pytest.raises(SystemExit, match='--amp needs a CUDA GPU'):
        train.load_config(train.parse_args([str(toy_config), '--amp']))


# --- CPU multi-process ---------------------------------------------------------------

def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


CPU_DIST = """
import os, torch
import vpn_plugin.mm
from mmengine.dist import init_dist, utils
from mmengine.model import MMDistributedDataParallel
from mmengine.registry import MODEL_WRAPPERS
try:
    utils._init_dist_pytorch.__wrapped__('nccl')
except Exception as error:
    print('WITHOUT_FIX', type(error).__name__)
init_dist('pytorch', backend='nccl')
print('BACKEND', torch.distributed.get_backend())
module = torch.nn.Linear(2, 2)
try:
    MMDistributedDataParallel(module=module, device_ids=[0])
except Exception as error:
    print('PLAIN_DDP', type(error).__name__)
wrapped = MODEL_WRAPPERS.build(dict(type='CPUCompatibleDDP'),
                               default_args=dict(module=module, device_ids=[0]))
print('WRAPPED', type(wrapped).__name__, wrapped.device_ids)
vpn_plugin.compat.shutdown_distributed()
vpn_plugin.compat.shutdown_distributed()  # a no-op once the group is gone
print('SHUT_DOWN', not torch.distributed.is_initialized())
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the CPU-only code path')
def test_cpu_process_group_and_ddp(tmp_path):
    env = dict(RANK='0', LOCAL_RANK='0', WORLD_SIZE='1', MASTER_ADDR='127.0.0.1',
               MASTER_PORT=str(free_port()))
    result = subprocess.run([sys.executable, '-c', CPU_DIST], cwd=tmp_path,
                            env={**subprocess_env(), **env}, capture_output=True,
                            text=True, timeout=120)
    assert_ok(result)
    assert 'WITHOUT_FIX' in result.stdout
    assert 'BACKEND gloo' in result.stdout
    assert 'PLAIN_DDP ValueError' in result.stdout
    assert 'WRAPPED CPUCompatibleDDP None' in result.stdout
    assert 'SHUT_DOWN True' in result.stdout


EXIT_RANK = """
import atexit, logging, os, sys, torch
import vpn_plugin.compat as compat
compat.exit_distributed_rank(5)  # no group was shut down: returns
print('RETURNED')
atexit.register(lambda: print('FINALISED', flush=True))
logging.basicConfig(filename=sys.argv[1], level=logging.INFO)
torch.distributed.init_process_group('gloo')
compat.shutdown_distributed()
logging.info('last record')
print('UNFLUSHED')  # a pipe buffers it: exit_distributed_rank must flush it
compat.exit_distributed_rank(3)
print('NOT REACHED')
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the CPU-only code path')
def test_a_finished_rank_leaves_without_finalisation_but_flushed(tmp_path):
    """A CI run failed after every output was written: a gloo rank aborted while the interpreter
    freed the runner's DDP (SIGABRT, 'terminate called without an active exception')."""
    env = dict(RANK='0', LOCAL_RANK='0', WORLD_SIZE='1', MASTER_ADDR='127.0.0.1',
               MASTER_PORT=str(free_port()))
    log = tmp_path / 'run.log'
    result = subprocess.run([sys.executable, '-c', EXIT_RANK, str(log)], cwd=tmp_path,
                            env={**subprocess_env(), **env}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 3, result.stderr
    assert result.stdout.split() == ['RETURNED', 'UNFLUSHED'], result.stdout
    assert 'last record' in log.read_text()


def test_torchrun_summary_tells_a_crash_from_torchruns_stop():
    """Before: 'no process failed ...; stopped by torchrun then: rank 0 (signal 15), rank 1
    (signal 6)', where rank 1 had aborted on its own and only rank 0 was stopped."""
    from types import SimpleNamespace
    from tool_modules import load_tool
    summary = load_tool('dist_run').failure_summary
    failures = {0: SimpleNamespace(exitcode=-15), 1: SimpleNamespace(exitcode=-6)}
    assert summary(failures) == ('rank 1 (SIGABRT) crashed on a signal; '
                                 'stopped by torchrun then: rank 0 (SIGTERM)')
    failures = {1: SimpleNamespace(exitcode=1), 0: SimpleNamespace(exitcode=-15)}
    assert summary(failures) == ('rank 1 (exit status 1) failed (each printed its message '
                                 'above); stopped by torchrun then: rank 0 (SIGTERM)')


# tools/dist_train.sh on two CPU processes, its clean log included (issue 34): checked on the
# suite's one torchrun training, tests/test_train.py::test_two_process_torchrun_matches_one_process


def test_fileio_deprecation_warnings_are_silenced_and_other_messages_kept(capsys):
    import vpn_plugin.compat_applied  # noqa: F401
    from mmengine.fileio import FileClient
    from mmengine.fileio.file_client import HardDiskBackend, print_log
    from mmengine.logging import MMLogger
    MMLogger.get_instance('fileio_quiet_test')  # a fresh console handler on the captured stdout
    FileClient.infer_client(None, '.')
    HardDiskBackend()
    print_log('a message mmengine really means', logger='current')
    out = capsys.readouterr().out
    assert 'deprecated' not in out and 'a message mmengine really means' in out


def test_config_text_is_formatted_once_per_content(monkeypatch):
    from mmengine.config import Config
    from vpn_plugin.runner import TextCachedConfig
    calls = []
    original = Config.pretty_text.fget
    monkeypatch.setattr(Config, 'pretty_text',
                        property(lambda self: calls.append(1) or original(self)))
    cfg = Config(dict(model=dict(type='X', depth=1)))
    object.__setattr__(cfg, '__class__', TextCachedConfig)
    first = cfg.pretty_text
    assert cfg.pretty_text == first and len(calls) == 1
    cfg.model.depth = 2
    assert 'depth=2' in cfg.pretty_text and len(calls) == 2


def test_the_same_config_text_is_formatted_by_yapf_once(monkeypatch):
    """mmengine formats a config's text with yapf for every runner (a protocol unit's train
    and test runners, a resumed run): the memo answers a repeated text, the same result."""
    from mmengine.config import Config, config as config_module
    from yapf.yapflib.yapf_api import FormatCode
    compat.apply()
    assert config_module.FormatCode.vpn_memoized  # installed by the fixes
    calls = []
    monkeypatch.setattr(config_module, 'FormatCode', compat._memoized_format_code(
        lambda *args, **kwargs: calls.append(args[0]) or FormatCode(*args, **kwargs)))
    monkeypatch.setattr(compat, 'FORMATTED_CONFIG_TEXTS', 2)

    def text_of(**options):  # a new Config object each time: no per-object cache
        return Config(dict(model=dict(type='X', depth=1, **options))).pretty_text
    first = text_of()
    assert text_of() == first and len(calls) == 1
    monkeypatch.setattr(config_module, 'FormatCode', FormatCode)
    assert text_of() == first  # yapf's own answer
    monkeypatch.undo()
    monkeypatch.setattr(config_module, 'FormatCode', compat._memoized_format_code(
        lambda *args, **kwargs: calls.append(args[0]) or FormatCode(*args, **kwargs)))
    monkeypatch.setattr(compat, 'FORMATTED_CONFIG_TEXTS', 2)
    calls.clear()
    texts = [text_of(width=width) for width in (1, 2, 1, 3, 2, 1)]
    assert 'width=3' in texts[3] and texts[0] == texts[2] == texts[5]
    # kept: {1}, {1, 2}, {2, 1} (1 used again), {1, 3}, {3, 2}, {2, 1}: five formatted
    assert len(calls) == 5, calls


def test_launcher_pytorch_outside_torchrun_says_how_to_start_it(toy_config, tmp_path,
                                                               monkeypatch):
    """Today torch's "environment variable RANK expected, but not set" (names no way out).
    tools/train.py runs in this process: its ``SystemExit`` message is what a shell prints
    (exit status 1)."""
    for name in compat.TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('LOCAL_RANK', '0')  # as parse_args sets it in a process of its own
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    monkeypatch.syspath_prepend(str(TESTS_DIR))  # custom_imports: toy_plugin
    work_dir = tmp_path / 'run'
    import multiprocessing
    start_method = multiprocessing.get_start_method(allow_none=True)
    try:
        with pytest.raises(SystemExit) as stopped:
            load_tool('train').main([str(toy_config), '--launcher', 'pytorch', '--work-dir',
                                     str(work_dir)])
    finally:  # mmengine's init_dist sets 'spawn' for the process when none was chosen
        multiprocessing.set_start_method(start_method, force=True)
    assert multiprocessing.get_start_method(allow_none=True) == start_method
    message = stopped.value.code
    assert isinstance(message, str), message  # printed to stderr, exit status 1
    assert message.startswith('error: --launcher pytorch: the environment variable(s) RANK, '
                              'WORLD_SIZE, MASTER_ADDR, MASTER_PORT are not set'), message
    assert 'tools/dist_train.sh' in message and 'RANK expected' not in message
    assert not list(work_dir.glob('*.pth'))


def test_torchrun_environment_names_only_what_is_missing(monkeypatch):
    for name, value in zip(compat.TORCHRUN_VARIABLES, ('0', '1', '127.0.0.1', '29500')):
        monkeypatch.setenv(name, value)
    compat.check_torchrun_environment()
    monkeypatch.delenv('MASTER_PORT')
    with pytest.raises(ValueError, match=r'variable\(s\) MASTER_PORT are not set'):
        compat.check_torchrun_environment()

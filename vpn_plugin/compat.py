"""Workarounds that make mmaction2 1.2.0 + mmengine 0.10.7 work with torch 2.13.

Each ``fix_*`` function covers one upstream bug (named in its first docstring
line), is idempotent and is applied by :func:`apply`, which ``import
vpn_plugin`` calls. Nothing here switches a safety check off globally: the
checkpoint fix only allow-lists the exact types mmengine checkpoints hold.
"""
import functools
import importlib.metadata
import importlib.util
import logging
import os
import pickle
import re
import sys
import threading
import types
import warnings

import numpy as np
import torch

CPU_DDP_WRAPPER = 'CPUCompatibleDDP'


# --- mmaction2: wheel without models/localizers/drn ------------------------

class MissingDRN:
    """Stands in for mmaction2's DRN, whose source the 1.2.0 wheel lacks."""

    def __init__(self, *args, **kwargs):
        raise ImportError(
            'mmaction.models.localizers.drn is missing from the mmaction2 1.2.0 '
            'wheel, so the DRN localizer cannot be built; install mmaction2 from '
            'source if you need it (vpn_plugin does not use DRN).')


def _mmaction_dir():
    spec = importlib.util.find_spec('mmaction')
    if spec is None or not spec.submodule_search_locations:
        raise ImportError('mmaction2 is not installed; run `pip install -e .` '
                          '(setup.cfg pins mmaction2==1.2.0)')
    return list(spec.submodule_search_locations)[0]


def fix_missing_drn_module():
    """mmaction2 1.2.0 wheel omits models/localizers/drn (`import mmaction.models` fails)."""
    name = 'mmaction.models.localizers.drn'
    drn_dir = os.path.join(_mmaction_dir(), 'models', 'localizers', 'drn')
    if name in sys.modules or os.path.isdir(drn_dir):
        return
    package = types.ModuleType(name, 'Placeholder for the DRN package missing from the wheel.')
    package.__path__ = []
    module = types.ModuleType(f'{name}.drn', 'Placeholder: building DRN raises ImportError.')
    module.DRN = MissingDRN
    package.drn = module
    sys.modules[name] = package
    sys.modules[f'{name}.drn'] = module
    from mmaction.registry import MODELS
    # Registered like mmaction's own placeholders: a config naming DRN gets the clear error.
    MODELS.register_module(name='DRN', module=MissingDRN, force=True)


# --- mmaction2: undeclared importlib-metadata -------------------------------

def fix_undeclared_importlib_metadata():
    """mmaction2 1.2.0 imports `importlib_metadata` (mmaction.utils) without declaring it."""
    if importlib.util.find_spec('importlib_metadata') is None:
        raise ImportError(
            "mmaction2 1.2.0 needs the package 'importlib-metadata' but does not "
            "declare it; install it with `pip install importlib-metadata` "
            '(vpn_plugin declares it in setup.cfg)')


# --- mmaction2: VindLU imported whenever transformers is installed ---------

def fix_multimodal_autoimport():
    """mmaction2 1.2.0 imports VindLU (needs timm and transformers<5) whenever transformers>=4.28 is installed."""
    import mmaction.utils.dependency as dependency
    # Too late once mmaction.models.multimodal ran; its VindLU then imported fine.
    if 'mmaction.models.multimodal' not in sys.modules:
        # VindLU names stay registered as placeholders that explain what to install.
        dependency.WITH_MULTIMODAL = False


def fix_mmcv_lite_ops_warning():
    """mmcv-lite 2.1.0 warns on every `import mmaction.models` that its CUDA ops are absent (mmaction never needs them here)."""
    warnings.filterwarnings('ignore', message='Fail to import ``MultiScaleDeformableAttention``',
                            category=UserWarning, module='mmcv')


def _without_fileio_deprecations(print_log):
    def quiet_print_log(msg, *args, **kwargs):
        if not str(msg).startswith(FILEIO_DEPRECATIONS):
            print_log(msg, *args, **kwargs)
    quiet_print_log.quiet = True
    return quiet_print_log


FILEIO_DEPRECATIONS = ('"FileClient" will be deprecated', '"HardDiskBackend" is the alias')


def fix_fileio_deprecation_warnings():
    """mmengine 0.10.7's own CheckpointHook builds a FileClient on every run, which warns that
    FileClient and HardDiskBackend "will be deprecated" (nothing a user can change)."""
    from mmengine.fileio import file_client
    if not getattr(file_client.print_log, 'quiet', False):
        file_client.print_log = _without_fileio_deprecations(file_client.print_log)


# --- mmengine: transformers imported by every process for one optimizer ----

def transformers_adafactor(params, *args, **kwargs):
    """transformers' ``Adafactor`` (mmengine's ``Adafactor`` optimizer), imported when built."""
    from transformers import Adafactor
    return Adafactor(params, *args, **kwargs)


class _RefuseTransformers:
    """A ``sys.meta_path`` finder refusing ``transformers`` to one thread only (the one that
    imports mmengine's optimizer builder in :func:`fix_transformers_import`): other threads
    import transformers as usual meanwhile."""

    def __init__(self):
        self.thread = threading.get_ident()

    def find_spec(self, name, path=None, target=None):
        if name == 'transformers' and threading.get_ident() == self.thread:
            raise ImportError(name=name)  # caught by mmengine's builder: never shown
        return None


_TRANSFORMERS_FIX = threading.Lock()  # one check-import-register at a time


def fix_transformers_import():
    """mmengine 0.10.7 imports transformers (~1.2 s CPU) in every process that imports
    mmengine.optim, only to register its Adafactor optimizer: that import fails in the thread
    importing mmengine.optim here (nothing is hidden from other threads), and ``Adafactor`` is
    registered as a builder importing transformers when built."""
    with _TRANSFORMERS_FIX:
        if 'mmengine.optim.optimizer.builder' in sys.modules or 'transformers' in sys.modules:
            return  # registered by mmengine itself (transformers imported, or nothing to spare)
        refuse = _RefuseTransformers()
        sys.meta_path.insert(0, refuse)  # mmengine's `from transformers import Adafactor` fails
        try:
            import mmengine.optim.optimizer.builder as builder
        finally:
            sys.meta_path.remove(refuse)
        if ('Adafactor' not in builder.TRANSFORMERS_OPTIMIZERS  # another thread's import ran it
                and importlib.util.find_spec('transformers') is not None):
            builder.OPTIMIZERS.register_module(name='Adafactor', module=transformers_adafactor)
            builder.TRANSFORMERS_OPTIMIZERS.append('Adafactor')


# --- mmengine: pkg_resources removed from setuptools >= 81 ------------------

def _distribution(package):
    try:
        return importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def is_installed(package: str) -> bool:
    """Whether `package` is an installed distribution or an importable module."""
    if _distribution(package) is not None:
        return True
    spec = importlib.util.find_spec(package)
    return spec is not None and spec.origin is not None


def package2module(package: str) -> str:
    """Top-level module name of the installed distribution `package`."""
    dist = _distribution(package)
    top_level = dist.read_text('top_level.txt') if dist is not None else None
    if not top_level:
        raise ValueError(f'can not infer the module name of {package}')
    return top_level.split()[0]


def get_installed_path(package: str) -> str:
    """Directory of the installed package `package` (distribution or module name)."""
    spec = importlib.util.find_spec(package.replace('-', '_'))
    if spec is None and _distribution(package) is not None:
        spec = importlib.util.find_spec(package2module(package))
    if spec is None:
        raise importlib.metadata.PackageNotFoundError(package)
    if spec.origin is None:
        raise RuntimeError(f'{package} is a namespace package, which is invalid '
                           'for `get_installed_path`')
    return os.path.dirname(spec.origin)


def fix_pkg_resources_lookups():
    """mmengine 0.10.7 package_utils import pkg_resources, gone in setuptools >= 81 (`mmaction::` configs fail)."""
    import mmengine.config.config
    import mmengine.hub.hub
    import mmengine.utils
    import mmengine.utils.package_utils
    replacements = dict(is_installed=is_installed, get_installed_path=get_installed_path,
                        package2module=package2module)
    for module in (mmengine.utils.package_utils, mmengine.utils, mmengine.config.config,
                   mmengine.hub.hub):
        for name, function in replacements.items():
            if hasattr(module, name):
                setattr(module, name, function)


# --- mmengine + torch >= 2.6: torch.load(weights_only=True) -----------------

class ForbiddenCheckpointGlobalError(pickle.UnpicklingError):
    """A checkpoint pickles a global outside the mmengine allow-list."""


HISTORY_BUFFER_STATISTICS = ('min', 'max', 'current', 'mean')


def _history_buffer_statistic(owner, name):
    """Restricted `builtins.getattr`: HistoryBuffer pickles its statistics methods by name."""
    from mmengine.logging.history_buffer import HistoryBuffer
    allowed = set(HISTORY_BUFFER_STATISTICS) | set(HistoryBuffer._statistics_methods)
    if owner is HistoryBuffer and name in allowed:
        return getattr(owner, name)
    raise pickle.UnpicklingError(
        f'getattr({owner!r}, {name!r}) is not allowed: only the HistoryBuffer '
        f'statistics methods {sorted(allowed)} may be unpickled by name')


def numeric_dtype_classes():
    """numpy.dtypes.*DType classes of bool/int/float/complex (never object) arrays."""
    codes = '?' + np.typecodes['AllInteger'] + np.typecodes['AllFloat']
    return sorted({type(np.dtype(code)) for code in codes}, key=lambda cls: cls.__name__)


def mmengine_checkpoint_globals():
    """Exactly the globals an mmengine Runner checkpoint pickles beyond torch's defaults.

    Found with `torch.serialization.get_unsafe_globals_in_checkpoint` on a Runner
    checkpoint (message hub: HistoryBuffer of numpy arrays, numpy scalars). The
    numpy 1 names (`numpy.core.*`) keep checkpoints written under numpy 1 loadable.
    """
    from mmengine.logging.history_buffer import HistoryBuffer
    reconstruct = np._core.multiarray._reconstruct
    scalar = np._core.multiarray.scalar
    return [HistoryBuffer, np.ndarray, np.dtype, *numeric_dtype_classes(),
            (reconstruct, 'numpy._core.multiarray._reconstruct'),
            (reconstruct, 'numpy.core.multiarray._reconstruct'),
            (scalar, 'numpy._core.multiarray.scalar'),
            (scalar, 'numpy.core.multiarray.scalar'),
            # an array pickled with protocol 5 (torch.save(..., pickle_protocol=5))
            (np._core.numeric._frombuffer, 'numpy._core.numeric._frombuffer'),
            (np._core.numeric._frombuffer, 'numpy.core.numeric._frombuffer'),
            (_history_buffer_statistic, 'builtins.getattr')]


def _forbidden_globals(filename, error, read=None):
    """The globals the checkpoint ``filename`` (as ``read``: its protocol-2 copy) names
    outside the allow-list."""
    if read is not None or (isinstance(filename, str) and os.path.isfile(filename)):
        try:
            if read is not None:
                read.seek(0)
            return torch.serialization.get_unsafe_globals_in_checkpoint(
                filename if read is None else read)
        except Exception:  # not a zip checkpoint: fall back to torch's message
            pass
    return re.findall(r'GLOBAL ([\w.]+)', str(error))


def unpickler_reason(error) -> str:
    """torch's ``weights_only`` failure without its advice to load with
    ``weights_only=False`` (which could run the file's code): only the unpickler's reason."""
    text = str(error)
    names = re.findall(r'GLOBAL ([\w.]+)', text)
    if names:
        return f'it pickles the global(s) {", ".join(sorted(set(names)))}, refused'
    found = re.search(r'WeightsUnpickler error:\s*(.+?)(?:\n\n|$)', text, re.S)
    if found:
        return ' '.join(found.group(1).split())
    return text.split('\n')[0] if 'weights_only' not in text else 'its content does not unpickle'


def _legacy_protocol(filename) -> int:
    """The pickle protocol a checkpoint in torch's legacy (non-zip) format was saved with (its
    first bytes: PROTO n); 0 for a zip checkpoint or anything else."""
    try:
        with open(filename, 'rb') as file:
            head = file.read(2)
    except (OSError, TypeError):
        return 0
    return head[1] if len(head) == 2 and head[0] == 0x80 else 0


def _raise_forbidden(filename, error, read=None):
    names = _forbidden_globals(filename, error, read)
    protocol = _legacy_protocol(filename) if not names else 0
    if protocol > 2:
        raise pickle.UnpicklingError(
            f'cannot load checkpoint {filename}: it was saved in torch\'s legacy (non-zip) '
            f'format with pickle protocol {protocol}, whose opcodes torch\'s weights_only '
            f'unpickler does not read ({unpickler_reason(error)}); expected torch.save\'s '
            'default format (a zip checkpoint, any pickle protocol) or the legacy format with '
            'protocol 2: if you trust the file, torch.load it with weights_only=False and '
            'torch.save it again') from None
    if not names:
        raise pickle.UnpicklingError(
            f'cannot load checkpoint {filename}: it does not unpickle '
            f'({unpickler_reason(error)}); expected a torch checkpoint (.pth written by '
            'torch.save or an mmengine Runner), not e.g. a JSON or text file') from None
    raise ForbiddenCheckpointGlobalError(
        f'checkpoint {filename} pickles the global(s) {", ".join(names)}, which are '
        "not among the types mmengine checkpoints hold (vpn_plugin.compat's "
        'allow-list); refusing to unpickle them because that could run arbitrary '
        'code. If you trust this file, allow-list these types yourself with '
        'torch.serialization.add_safe_globals before loading it.') from None


def _with_checkpoint_allow_list(loader):
    @functools.wraps(loader)
    def load(filename, *args, **kwargs):
        with torch.serialization.safe_globals(mmengine_checkpoint_globals()):
            # a pickle of protocol 3-5: the same checkpoint in the opcodes torch's weights_only
            # unpickler reads (None: torch.save's own protocol 2, read as it is)
            protocol2 = _as_protocol2(filename)
            try:
                if protocol2 is None:
                    return loader(filename, *args, **kwargs)
                return torch.load(protocol2, *args, weights_only=True, **kwargs)
            except pickle.UnpicklingError as error:
                _raise_forbidden(filename, error, protocol2)

    load.vpn_allow_list = True
    return load


# torch.save(..., pickle_protocol=3..5) writes opcodes torch's weights_only unpickler does not
# read (it reads torch.save's default, protocol 2): each has a protocol-2 form of the same value
_STRINGS = ('SHORT_BINUNICODE', 'BINUNICODE', 'BINUNICODE8')
_BYTES = ('SHORT_BINBYTES', 'BINBYTES', 'BINBYTES8', 'BYTEARRAY8')  # protocol 5: an array's data


def _as_protocol2(filename) -> 'io.BytesIO | None':
    """A zip checkpoint (torch.save's format) whose pickle was written with protocol 3-5, as
    the same checkpoint with its pickle in protocol-2 opcodes (``_protocol2_pickle``: the same
    values, read by the same restricted unpickler); None for any other file."""
    import io
    import zipfile
    try:
        with zipfile.ZipFile(filename) as archive:
            names = archive.namelist()
            pickles = [name for name in names if name.endswith('/data.pkl')]
            if len(pickles) != 1:
                return None
            with archive.open(pickles[0]) as member:  # PROTO n: protocol 2 is not read whole
                head = member.read(3)
            if not (len(head) > 2 and head[0] == 0x80 and 3 <= head[1] <= 5):
                return None
            rewritten = _protocol2_pickle(archive.read(pickles[0]))
            if rewritten is None:
                return None
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, 'w', zipfile.ZIP_STORED) as copy:
                for name in names:
                    copy.writestr(name, rewritten if name == pickles[0]
                                  else archive.read(name))
    except (OSError, zipfile.BadZipFile, ValueError, TypeError):
        return None
    buffer.seek(0)
    return buffer


def _protocol2_global(module: str, qualname: str) -> bytes:
    """Protocol 2's pickle of the global ``module.qualname``: GLOBAL, and for a dotted
    qualname (a method: ``HistoryBuffer.min``) ``getattr(parent, name)`` as protocol 2's
    Pickler writes it."""
    import struct
    first, *attributes = qualname.split('.')
    out = b'c' + module.encode() + b'\n' + first.encode() + b'\n'
    for attribute in attributes:
        name = attribute.encode('utf-8', 'surrogatepass')
        out = (b'cbuiltins\ngetattr\n' + out + b'X' + struct.pack('<I', len(name)) + name
               + b'\x86R')
    return out


def _protocol2_pickle(data: bytes) -> 'bytes | None':
    """The pickle ``data`` (protocol 3-5) in protocol-2 opcodes: FRAME dropped, MEMOIZE (and
    protocol 3's BINPUT) as LONG_BINPUT, short/8-byte strings as BINUNICODE, bytes (and
    protocol 5's bytearray of an array's data) as ``_codecs.encode(text, 'latin1')`` (protocol
    2's bytes), STACK_GLOBAL as the global of the two strings it pops (``_protocol2_global``;
    their pushes dropped, a memo slot of a dropped string pushed again by value where it is
    read). Every other opcode is copied; one torch does not read is refused by torch, as is
    every global outside the allow-list (the same restricted unpickler reads the result).
    None for a stream with no such form (torch's refusal of the file then stands)."""
    import pickletools
    import struct
    out = bytearray()
    memo, strings = {}, {}  # old memo index -> new index | the string dropped from the stream
    pushes = []  # (offset in out, string or None, old memo index or None) of the last pushes
    old_index = new_index = 0

    def push_string(text: str) -> None:
        encoded = text.encode('utf-8', 'surrogatepass')
        pushes.append([len(out), text, None])
        out.extend(b'X' + struct.pack('<I', len(encoded)) + encoded)

    ops = list(pickletools.genops(data))
    for number, (op, arg, pos) in enumerate(ops):
        end = ops[number + 1][2] if number + 1 < len(ops) else len(data)
        name = op.name
        if name == 'PROTO':
            out.extend(b'\x80\x02')
        elif name == 'FRAME':
            continue
        elif name in _STRINGS:
            push_string(arg)
        elif name in _BYTES:
            pushes.append([len(out), None, None])
            out.extend(b'c_codecs\nencode\n')
            text = arg.decode('latin1').encode('utf-8', 'surrogatepass')
            out.extend(b'X' + struct.pack('<I', len(text)) + text + b'X\x06\x00\x00\x00latin1'
                       b'\x86R')
        elif name in ('MEMOIZE', 'BINPUT', 'LONG_BINPUT'):  # protocol 3: explicit indices
            index = old_index if name == 'MEMOIZE' else arg
            if pushes and pushes[-1][1] is not None:
                pushes[-1][2] = index
            memo[index] = new_index
            out.extend(b'r' + struct.pack('<I', new_index))
            old_index, new_index = max(old_index, index) + 1, new_index + 1
        elif name in ('BINGET', 'LONG_BINGET'):
            if arg in strings:
                push_string(strings[arg])
            else:
                pushes.append([len(out), None, None])
                out.extend(b'j' + struct.pack('<I', memo[arg]))
        elif name == 'STACK_GLOBAL':
            if len(pushes) < 2 or pushes[-1][1] is None or pushes[-2][1] is None:
                return None  # not the two strings of a global: left to torch's refusal
            (start, module, first), (_, qualname, second) = pushes[-2], pushes[-1]
            del out[start:], pushes[-2:]
            for index, text in ((first, module), (second, qualname)):
                if index is not None:
                    strings[index] = text
            pushes.append([len(out), None, None])
            out.extend(_protocol2_global(module, qualname))
        elif name in ('PUT', 'GET'):  # text-mode memo opcodes: never in protocols 3-5
            return None
        else:
            pushes.append([len(out), None, None])
            out.extend(data[pos:end])
    return bytes(out)


def fix_checkpoint_weights_only():
    """mmengine 0.10.7 torch.load()s checkpoints without an allow-list; torch >= 2.6 (weights_only) rejects them on resume/test."""
    from mmengine.runner.checkpoint import CheckpointLoader
    for prefix, loader in CheckpointLoader._schemes.items():
        if not getattr(loader, 'vpn_allow_list', False):
            CheckpointLoader._schemes[prefix] = _with_checkpoint_allow_list(loader)


# --- mmengine: CPU multi-process (gloo, DDP without device_ids) -------------

def has_accelerator():
    from mmengine.device import get_device
    return get_device() not in ('cpu', 'mps')


# what torchrun sets for each process and ``--launcher pytorch`` reads (torch's env://)
TORCHRUN_VARIABLES = ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')


def check_torchrun_environment() -> None:
    """Refuse ``--launcher pytorch`` in a process torchrun did not start, saying so: torch's
    own "environment variable RANK expected, but not set" names no way out."""
    missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
    if missing:
        raise ValueError(
            f'--launcher pytorch: the environment variable(s) {", ".join(missing)} are not '
            'set, so this process was not started by torchrun, which sets them for each '
            'process. One process needs no launcher option; several start through '
            'tools/dist_train.sh, tools/dist_test.sh or tools/dist_extract.sh, which run '
            'torchrun')


def _cpu_aware_init_dist_pytorch(original):
    @functools.wraps(original)
    def init(backend, init_backend='torch', **kwargs):
        check_torchrun_environment()
        if has_accelerator():
            return original(backend, init_backend=init_backend, **kwargs)
        if init_backend != 'torch':
            raise ValueError(f"dist_cfg.init_backend={init_backend!r} needs a GPU; "
                             "on CPU only 'torch' is supported")
        torch.distributed.init_process_group(
            backend='gloo' if backend == 'nccl' else backend, **kwargs)

    init.vpn_cpu_aware = True
    return init


def fix_cpu_init_dist():
    """mmengine 0.10.7 _init_dist_pytorch calls torch.cuda.set_device and keeps nccl without CUDA."""
    import mmengine.dist.utils as dist_utils
    if not getattr(dist_utils._init_dist_pytorch, 'vpn_cpu_aware', False):
        dist_utils._init_dist_pytorch = _cpu_aware_init_dist_pytorch(dist_utils._init_dist_pytorch)


def _cpu_compatible_ddp_class():
    from mmengine.model import MMDistributedDataParallel

    class CPUCompatibleDDP(MMDistributedDataParallel):
        """MMDistributedDataParallel that drops `device_ids` for a CPU module."""

        def __init__(self, module, device_ids=None, **kwargs):
            first = next(module.parameters(), None)
            if first is None or first.device.type == 'cpu':
                device_ids = None
            with warnings.catch_warnings():
                # torch 2.13 deprecates broadcast_buffers in favour of forward_sync_buffers,
                # which syncs buffers at init even when False; the configs' False (no
                # syncing at all) has no equivalent yet, so it stays, without a warning per rank
                warnings.filterwarnings('ignore', message='`broadcast_buffers` is deprecated',
                                        category=FutureWarning)
                super().__init__(module=module, device_ids=device_ids, **kwargs)

    return CPUCompatibleDDP


def fix_cpu_ddp_wrapper():
    """mmengine 0.10.7 Runner.wrap_model passes device_ids=[LOCAL_RANK], which DDP rejects for CPU modules."""
    # The root registry: Runner.wrap_model looks the type up there without a scope.
    from mmengine.registry import MODEL_WRAPPERS
    if CPU_DDP_WRAPPER not in MODEL_WRAPPERS.module_dict:
        MODEL_WRAPPERS.register_module(name=CPU_DDP_WRAPPER, module=_cpu_compatible_ddp_class())


_SHUT_DOWN_A_GROUP = []  # one entry once shutdown_distributed has destroyed a process group


def shutdown_distributed():
    """mmengine 0.10.7 never destroys the process group; gloo ranks exiting apart can abort (SIGABRT).

    Called by tools/train.py and tools/test.py after the run; a no-op without one.
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
        _SHUT_DOWN_A_GROUP.append(True)


def exit_distributed_rank(status: int = 0):
    """End a rank of a finished multi-process run without interpreter finalisation.

    Objects that still hold the destroyed gloo group (DDP's reducer inside the runner, kept by
    reference cycles) are freed while the interpreter is torn down, where gloo can abort the
    process ("terminate called without an active exception", SIGABRT) after its work is done,
    and torchrun then fails the whole run (pytorch/pytorch#179291 describes the teardown). The
    rank's outputs are written by then: logs and streams are flushed and the process leaves
    with ``status``. A no-op (returns) when no process group was shut down.
    """
    if not _SHUT_DOWN_A_GROUP:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


def is_resuming(runner) -> bool:
    """mmengine 0.10.7 tells hooks' ``after_load_checkpoint`` nothing about why a checkpoint is
    loaded: ``--resume`` (continue the run) and ``load_from`` (start from its weights) look the
    same; only the private ``Runner._resume`` knows."""
    return bool(getattr(runner, '_resume', False))


# --- mmengine: the same config text formatted again by yapf for every runner ---------

FORMATTED_CONFIG_TEXTS = 32  # formatted texts kept per process


def _memoized_format_code(original):
    """yapf's ``FormatCode`` answering a call it has answered before (the same arguments: the
    same unformatted text and style) from a memo of :data:`FORMATTED_CONFIG_TEXTS` entries,
    the least recently used dropped first: the result is the same (yapf is a function of its
    input) and ``(text, changed)`` is immutable."""
    memo, lock = {}, threading.Lock()

    @functools.wraps(original)
    def format_code(*args, **kwargs):
        key = repr((args, sorted(kwargs.items())))
        with lock:
            if key in memo:
                memo[key] = memo.pop(key)  # the most recently used last
                return memo[key]
        result = original(*args, **kwargs)
        with lock:
            memo[key] = result
            while len(memo) > FORMATTED_CONFIG_TEXTS:
                del memo[next(iter(memo))]
        return result
    format_code.vpn_memoized = True
    return format_code


def fix_config_formatting_repeats():
    """mmengine 0.10.7 formats a config's text with yapf (0.1-2 s CPU) for every runner
    (work dir copy, visualizer, message hub): a protocol unit's train and test runners, a
    resumed run, a test suite's trainings format the same text again."""
    from mmengine.config import config
    if not getattr(config.FormatCode, 'vpn_memoized', False):
        config.FormatCode = _memoized_format_code(config.FormatCode)


FIXES = (fix_transformers_import, fix_undeclared_importlib_metadata, fix_missing_drn_module,
         fix_multimodal_autoimport, fix_mmcv_lite_ops_warning, fix_fileio_deprecation_warnings,
         fix_pkg_resources_lookups,
         fix_checkpoint_weights_only, fix_cpu_init_dist, fix_cpu_ddp_wrapper,
         fix_config_formatting_repeats)


def apply():
    """Apply every workaround in :data:`FIXES` (safe to call repeatedly)."""
    for fix in FIXES:
        fix()

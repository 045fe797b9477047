"""The launcher an official training script runs under (written into the temporary copy).

``python _vpn_launch.py SCRIPT ARGS...`` runs ``SCRIPT`` as ``__main__`` with ``ARGS``,
unchanged, after three things that touch no line of the official code:

* every line the script writes to stdout or stderr (``print``, ``logging`` handlers, tqdm) is
  passed through and recorded with its wall-clock time as ``[time, line]`` JSON lines in
  ``$VPN_OFFICIAL_RECORDS`` (the comparison reads epochs, losses, metrics and seconds from them);
* ``torch.set_num_threads($VPN_OFFICIAL_THREADS)``: the same thread count as our side;
* the shims named in ``$VPN_OFFICIAL_SHIMS`` (comma-separated names of :data:`SHIMS`), each one
  listed by the comparison's output with its reason.
"""
from __future__ import annotations

from pathlib import Path

LAUNCHER_NAME = '_vpn_launch.py'

# name -> what it does (printed in the list of changes); the code is in LAUNCHER_SOURCE
SHIMS = {
    'cuda_noop': 'torch.Tensor.cuda and torch.nn.Module.cuda return the object unchanged '
                 '(the script calls .cuda() unconditionally; this machine has no GPU)',
    'stub_clip': "an empty module 'clip' in sys.modules (imported at the top of the script's "
                 'utils, used only by its text-feature extraction; the package needs '
                 'torchvision, which PyPI has no CPU build of for this torch)',
    'gloo_single_process': 'a one-process gloo group is initialised (the script all-reduces '
                           'its losses and metrics even when not distributed; its launch '
                           'flag --multiprocessing-distributed spawns one process per GPU, '
                           'none here, so it is left out)',
    'load_on_cpu': "torch.load(..., map_location='cuda:N') loads onto the CPU",
}

LAUNCHER_SOURCE = r'''"""Written by vpn_plugin (protocol/official/launcher.py); no official code."""
import json, os, runpy, sys, time, types

import torch


class Recorder:
    """Pass-through text stream that records every complete line with its time."""

    def __init__(self, stream, records):
        self.stream, self.records, self.pending = stream, records, ''

    def write(self, text):
        self.stream.write(text)
        self.pending += text
        while '\n' in self.pending:
            line, self.pending = self.pending.split('\n', 1)
            self.records.write(json.dumps([time.time(), line]) + '\n')
            self.records.flush()
        return len(text)

    def flush(self):
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def cuda_noop():
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self


def stub_clip():
    sys.modules['clip'] = types.ModuleType('clip')


def gloo_single_process():
    import tempfile
    import torch.distributed as dist
    store = tempfile.NamedTemporaryFile(prefix='vpn_gloo_', delete=False).name
    dist.init_process_group('gloo', init_method='file://' + store, rank=0, world_size=1)


def load_on_cpu():
    original = torch.load

    def load(*args, **kwargs):
        kwargs['map_location'] = 'cpu'
        return original(*args, **kwargs)
    torch.load = load


records = open(os.environ['VPN_OFFICIAL_RECORDS'], 'a', buffering=1)
sys.stdout, sys.stderr = Recorder(sys.stdout, records), Recorder(sys.stderr, records)
torch.set_num_threads(int(os.environ.get('VPN_OFFICIAL_THREADS', '1')))
for name in filter(None, os.environ.get('VPN_OFFICIAL_SHIMS', '').split(',')):
    globals()[name]()
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
records.write(json.dumps([time.time(), '[vpn launcher] start ' + script]) + '\n')
runpy.run_path(script, run_name='__main__')
'''


def write_launcher(copy_dir: Path) -> Path:
    """Write the launcher into the official copy; returns its path."""
    path = Path(copy_dir) / LAUNCHER_NAME
    path.write_text(LAUNCHER_SOURCE)
    return path


def check_shims(names) -> None:
    """Refuse a shim name the launcher does not know."""
    unknown = sorted(set(names) - set(SHIMS))
    if unknown:
        raise ValueError(f'unknown launcher shims {unknown}; expected names of {sorted(SHIMS)}')

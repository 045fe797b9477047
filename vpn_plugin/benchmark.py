"""What the benchmark tools (``tools/benchmark_epoch.py``, ``tools/benchmark_dvl.py``) print
about the machine, so that every figure names where it was measured. Torch only."""
from __future__ import annotations

import os
import platform

import torch


def device_name(device) -> str:
    """'NVIDIA H100 80GB HBM3 (cuda:0, 79.1 GiB)' or the CPU's model name."""
    device = torch.device(device)
    if device.type == 'cuda':
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return f'{props.name} (cuda:{index}, {props.total_memory / 2**30:.1f} GiB)'
    return f'{_cpu_model()} ({device.type})'


def _cpu_model() -> str:
    try:
        with open('/proc/cpuinfo') as info:
            for line in info:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment_line(device) -> str:
    """One line: device, torch and CUDA versions, torch threads, CPU cores and load."""
    cuda = torch.version.cuda or 'none'
    load = ', '.join(f'{v:.1f}' for v in os.getloadavg()) if hasattr(os, 'getloadavg') else '?'
    return (f'device: {device_name(device)} | torch {torch.__version__} | CUDA {cuda} | '
            f'{torch.get_num_threads()} torch thread(s), {os.cpu_count()} CPU cores, '
            f'load average {load}')


def parse_size(text: str) -> tuple:
    """(B, T, N) of a ``--sizes`` entry 'BxTxN' of the benchmark tools, else ``SystemExit``
    naming the entry and the form."""
    try:
        batch, horizon, num_actions = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise SystemExit(f'--sizes entry {text!r}: expected BxTxN, e.g. 256x3x48') from None
    if min(batch, horizon, num_actions) < 1:
        raise SystemExit(f'--sizes entry {text!r}: B, T and N must be >= 1, e.g. 256x3x48')
    return batch, horizon, num_actions

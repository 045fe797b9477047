"""Time and peak memory of the Differentiable Viterbi Layer, forward + backward.

For each size B x T x N and graph, an MSE loss between the soft plan (temperature 1) and a
random one-hot plan is back-propagated to the emissions. Graphs (``--graphs``): ``sparse`` log
transitions with -inf for missing edges, and ``floor``: ``log(p + 1e-30)`` of the same graph,
whose finite entries 69 nats below their column's best send ours onto its dense fallback.
Methods:

* ``ours``: ``vpn_plugin.core.differentiable_viterbi`` with ``impl='auto'`` (recomputing
  backward, O(B N^2) memory): the level evaluation on the CPU, the dense one elsewhere;
* ``autograd``: a straightforward implementation whose (B, N, N) backpointers of every step
  stay alive for autograd (written below);
* ``ours_dense``, ``ours_levels`` (on request): ours with ``impl='dense'`` (log space, no value
  read back to the host: the device path) or ``impl='levels'`` (the CPU path);
* ``torch_struct``: torch-struct's ``LinearChainCRF(...).marginals`` (node marginals summed
  from the edge marginals; the loss backward is a double backward).

Every (size, method) runs in its own subprocess so that peak memory is its own: on CUDA
``torch.cuda.max_memory_allocated``, on CPU the peak resident set size (``ru_maxrss``), both
minus the figure after the inputs were built. A CPU worker gets an address-space limit
(``--max-gb`` above its start) so that a method that needs too much memory fails with an
out-of-memory error shown in the table instead of exhausting a shared machine.

    .venv/bin/python tools/benchmark_dvl.py                      # B=256, T 3/6, N 48/133/778
    .venv/bin/python tools/benchmark_dvl.py --sizes 64x3x48 64x6x778 --repeats 1
    .venv/bin/python tools/benchmark_dvl.py --graphs floor --methods ours ours_dense autograd
    python tools/benchmark_dvl.py --device cuda --methods ours_levels ours_dense autograd

The first line printed names the device and the torch and CUDA versions.
"""
from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from vpn_plugin.benchmark import environment_line, parse_size  # noqa: E402
from vpn_plugin.core import differentiable_viterbi, pkg_log_transitions  # noqa: E402
from vpn_plugin.errors import (POSITIVE_FLOAT, POSITIVE_INT, checked_device,  # noqa: E402
                               parse_once, tool_main)

warnings.filterwarnings('ignore', message='.*arg_constraints')  # torch-struct's noise
METHODS = ('ours', 'autograd', 'torch_struct', 'ours_dense', 'ours_levels')
DEFAULT_METHODS = ['ours', 'autograd', 'torch_struct']
DEFAULT_SIZES = [f'256x{t}x{n}' for t in (3, 6) for n in (48, 133, 778)]
GRAPHS = ('sparse', 'floor')
LOG_FLOOR = 1e-30


# ----------------------------------------------------------------------------- methods
def autograd_dvl(log_emissions, log_transitions):
    """Soft plan (B, T, N) at temperature 1, plain autograd; keeps every Q_t (B, N, N)."""
    num_actions = log_emissions.shape[-1]
    alpha = log_emissions[:, 0] - math.log(num_actions)
    backpointers = []
    for t in range(1, log_emissions.shape[1]):
        scores = alpha.unsqueeze(1) + log_transitions.t()  # (B, N_to, N_from)
        backpointers.append(torch.softmax(scores, -1))
        alpha = log_emissions[:, t] + torch.logsumexp(scores, -1)
    soft = [torch.softmax(alpha, -1)]
    for q in reversed(backpointers):
        soft.append(torch.bmm(soft[-1].unsqueeze(1), q).squeeze(1))
    return torch.stack(soft[::-1], 1)


def torch_struct_dvl(log_emissions, log_transitions):
    """Node marginals (B, T, N) from torch-struct's linear-chain CRF edge marginals."""
    import torch_struct
    num_actions = log_emissions.shape[-1]
    finite = log_transitions.clamp(min=-1e4)  # its semiring sums are not -inf safe
    potentials = finite.t() + log_emissions[:, 1:, :, None]  # (B, T-1, N_to, N_from)
    first = log_emissions[:, 0] - math.log(num_actions)
    potentials = torch.cat([potentials[:, :1] + first[:, None, None, :], potentials[:, 1:]], 1)
    edges = torch_struct.LinearChainCRF(potentials).marginals  # (B, T-1, N_to, N_from)
    return torch.cat([edges[:, :1].sum(-2), edges.sum(-1)], 1)


def ours_dvl(log_emissions, log_transitions):
    return differentiable_viterbi(log_emissions, log_transitions)[0]


def ours_dense_dvl(log_emissions, log_transitions):
    """Ours on its dense log-space evaluation (the device path; on a CPU the worst case)."""
    return differentiable_viterbi(log_emissions, log_transitions, impl='dense')[0]


def ours_levels_dvl(log_emissions, log_transitions):
    """Ours on its level evaluation (the CPU path), on any device."""
    return differentiable_viterbi(log_emissions, log_transitions, impl='levels')[0]


IMPLEMENTATIONS = dict(ours=ours_dvl, autograd=autograd_dvl, torch_struct=torch_struct_dvl,
                       ours_dense=ours_dense_dvl, ours_levels=ours_levels_dvl)


# ----------------------------------------------------------------------------- inputs
def benchmark_pkg(num_actions: int, out_degree: int = 8, seed: int = 0) -> np.ndarray:
    """Sparse row-stochastic (N, N) graph: i -> i+1 plus random edges (every state reachable)."""
    rng = np.random.default_rng(seed)
    weights = np.zeros((num_actions, num_actions))
    for i in range(num_actions):
        targets = rng.choice(num_actions, min(out_degree, num_actions), replace=False)
        weights[i, targets] = rng.random(len(targets)) + 0.1
        weights[i, (i + 1) % num_actions] += 1.0
    return weights / weights.sum(1, keepdims=True)


def benchmark_log_transitions(num_actions: int, graph: str, seed: int = 0) -> torch.Tensor:
    """(N, N) log transitions of :func:`benchmark_pkg`: -inf edges or a ``log(p + 1e-30)`` floor."""
    pkg = benchmark_pkg(num_actions, seed=seed)
    if graph == 'floor':
        return torch.log(torch.as_tensor(pkg, dtype=torch.float32) + LOG_FLOOR)
    return pkg_log_transitions(pkg)


def make_inputs(batch, horizon, num_actions, device, seed=0, graph='sparse'):
    gen = torch.Generator().manual_seed(seed)
    emissions = torch.randn(batch, horizon, num_actions, generator=gen).log_softmax(-1)
    target = torch.randint(num_actions, (batch, horizon), generator=gen)
    target = torch.nn.functional.one_hot(target, num_actions).float()
    transitions = benchmark_log_transitions(num_actions, graph, seed)
    return emissions.to(device), transitions.to(device), target.to(device)


# ----------------------------------------------------------------------------- worker
def _sync(device):
    if device.startswith('cuda'):
        torch.cuda.synchronize()


def _memory_now(device) -> float:
    """Bytes: CUDA allocated now, or the peak RSS so far on CPU."""
    if device.startswith('cuda'):
        return float(torch.cuda.max_memory_allocated())
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def run_worker(method, batch, horizon, num_actions, device, repeats,
               time_budget: float = math.inf, graph: str = 'sparse') -> dict:
    """Best time over ``repeats`` runs after a warm-up, and the peak memory above the inputs.

    Repeats stop once ``time_budget`` seconds are spent (at least one timed run); a warm-up
    alone longer than the budget is reported itself (``cold``: a single run, no warm-up).
    """
    function = IMPLEMENTATIONS[method]
    emissions, transitions, target = make_inputs(batch, horizon, num_actions, device,
                                                 graph=graph)
    if device.startswith('cuda'):
        torch.cuda.reset_peak_memory_stats()
    baseline = _memory_now(device)
    times = []
    for _ in range(repeats + 1):  # the first run is a warm-up
        if (len(times) > 1 and sum(times) > time_budget) or (times and times[0] > time_budget):
            break
        leaf = emissions.clone().requires_grad_(True)
        _sync(device)
        start = time.perf_counter()
        loss = torch.nn.functional.mse_loss(function(leaf, transitions), target)
        loss.backward()
        _sync(device)
        times.append(time.perf_counter() - start)
        if not torch.isfinite(leaf.grad).all():
            raise FloatingPointError('non-finite gradient')
        del loss, leaf
    peak_mb = (_memory_now(device) - baseline) / 2**20
    if len(times) == 1:
        return dict(time_s=times[0], peak_mb=peak_mb, cold=True)
    return dict(time_s=min(times[1:]), peak_mb=peak_mb)  # best run: least disturbed by load


def _limit_address_space(max_gb: float) -> None:
    with open('/proc/self/status') as status:
        vm_kb = next(int(line.split()[1]) for line in status if line.startswith('VmSize'))
    limit = int(vm_kb * 1024 + max_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def worker_main(args) -> None:
    batch, horizon, num_actions = parse_size(args.worker_size)
    if args.device == 'cpu':
        torch.set_num_threads(args.threads)
        _limit_address_space(args.max_gb)
    try:
        result = run_worker(args.worker, batch, horizon, num_actions, args.device, args.repeats,
                            args.time_budget, args.worker_graph)
    except (MemoryError, torch.OutOfMemoryError) as error:
        result = dict(error=f'out of memory ({type(error).__name__})')
    except ImportError as error:
        result = dict(error=f'not installed ({error.name})')
    except Exception as error:  # noqa: BLE001  (any failure is a table cell, not a crash)
        text = str(error).splitlines()[0][:60] if str(error) else ''
        oom = 'alloc' in text.lower() or 'memory' in text.lower()
        result = dict(error='out of memory' if oom else f'{type(error).__name__}: {text}')
    print(json.dumps(result))


# ----------------------------------------------------------------------------- driver
def run_case(method, size, graph, args) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), '--worker', method,
               '--worker-size', size, '--worker-graph', graph, '--device', args.device,
               '--repeats', str(args.repeats),
               '--max-gb', str(args.max_gb), '--threads', str(args.threads),
               '--time-budget', str(args.time_budget)]
    done = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith('{')]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ['killed'])[-1][:60]
        return dict(error=f'worker failed (rc {done.returncode}): {tail}')
    return json.loads(lines[-1])


def agreement(device, graph) -> str:
    """Max |soft plan difference| of each method to ours on a small case (sanity check)."""
    emissions, transitions, _ = make_inputs(4, 4, 7, device, graph=graph)
    reference = ours_dvl(emissions, transitions)
    parts = []
    for method in METHODS[1:]:
        try:
            diff = (IMPLEMENTATIONS[method](emissions, transitions) - reference).abs().max()
            parts.append(f'{method} {diff.item():.1e}')
        except ImportError as error:
            parts.append(f'{method} not installed ({error.name})')
    return f'max |soft plan - ours| on 4x4x7, {graph}: ' + ', '.join(parts)


def format_cell(result) -> str:
    if 'error' in result:
        return result['error']
    cold = '*' if result.get('cold') else ' '
    return f'{result["time_s"]:8.3f} s{cold}{result["peak_mb"]:9.1f} MB'


@tool_main
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--sizes', nargs='+', default=DEFAULT_SIZES, help='BxTxN entries')
    parser.add_argument('--graphs', nargs='+', default=list(GRAPHS), choices=GRAPHS,
                        help='sparse: -inf for missing edges; floor: log(p + 1e-30)')
    parser.add_argument('--methods', nargs='+', default=DEFAULT_METHODS, choices=METHODS,
                        help="ours_dense / ours_levels: ours with impl='dense' / 'levels' "
                             "('ours' is impl='auto')")
    parser.add_argument('--repeats', type=POSITIVE_INT, default=10,
                        help='timed runs after one warm-up (within --time-budget)')
    parser.add_argument('--time-budget', type=POSITIVE_FLOAT, default=30.0,
                        help='seconds per (size, method) after which repeats stop; a warm-up '
                             'alone longer than this is reported as a single cold run (*)')
    parser.add_argument('--max-gb', type=POSITIVE_FLOAT, default=12.0,
                        help='CPU only: address-space limit of a worker above its start')
    parser.add_argument('--threads', type=POSITIVE_INT, default=torch.get_num_threads())
    parser.add_argument('--worker', choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument('--worker-size', help=argparse.SUPPRESS)
    parser.add_argument('--worker-graph', default='sparse', choices=GRAPHS,
                        help=argparse.SUPPRESS)
    args = parse_once(parser, argv)
    if args.worker:
        return worker_main(args)
    checked_device(args.device)
    for size in args.sizes:  # every entry checked before any is run
        parse_size(size)
    cap = f' address-space cap {args.max_gb:g} GB per worker' if args.device == 'cpu' else ''
    torch.set_num_threads(args.threads)
    print(environment_line(args.device))
    print(f'device={args.device} threads={args.threads} repeats={args.repeats}{cap} '
          f'(best time of forward+backward over the repeats, within {args.time_budget:g} s; '
          '* = one cold run longer than that; peak memory above the inputs)')
    header = f'{"graph B x T x N":>18} | ' + ' | '.join(f'{m:^24}' for m in args.methods)
    for graph in args.graphs:
        print(agreement(args.device, graph))
    print(header + ' | ours mem / autograd | ours time / fastest')
    print('-' * len(header) + '-' * 45)
    for graph in args.graphs:
        for size in args.sizes:
            print(f'{graph + " " + size:>18} | ' + table_row(graph, size, args), flush=True)


def table_row(graph, size, args) -> str:
    """The cells of every method on one (graph, size) case, then the ratios."""
    results = {}
    for method in args.methods:
        results[method] = run_case(method, size, graph, args)
        print(f'  ... {graph} {size} {method}: {format_cell(results[method])}',
              file=sys.stderr, flush=True)
    return ' | '.join(f'{format_cell(results[m]):>24}' for m in args.methods) + ' | ' + \
        ratios(results)


def ratios(results) -> str:
    ours, naive = results.get('ours', {}), results.get('autograd', {})
    ok = {m: r for m, r in results.items() if 'error' not in r}
    memory = (f'{ours["peak_mb"] / naive["peak_mb"]:.2f}'
              if 'error' not in ours and 'peak_mb' in naive and naive['peak_mb'] > 0 else '-')
    fastest = min((r['time_s'] for r in ok.values()), default=None)
    speed = f'{ours["time_s"] / fastest:.2f}' if 'time_s' in ours and fastest else '-'
    return f'{memory:>19} | {speed:>19}'


if __name__ == '__main__':
    main()

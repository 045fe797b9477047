"""The cost of ``config_types.checked_arguments`` on the hot path: µs per call of the DVL forward
and the probability-space Viterbi, with the decorator's argument check and without it (the
function it wraps), per batch of the given size.

    python tools/benchmark_checked_arguments.py [--sizes 256x3x105 1x3x18] [--calls 2000]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from vpn_plugin.errors import POSITIVE_INT, tool_main  # noqa: E402
from vpn_plugin.core import differentiable_viterbi, viterbi_decode_probs  # noqa: E402


def microseconds_per_call(function, args, kwargs, calls: int) -> float:
    """Best of 5 rounds of ``calls`` calls, in µs per call."""
    best = float('inf')
    for _ in range(5):
        begin = time.perf_counter()
        for _ in range(calls):
            function(*args, **kwargs)
        best = min(best, (time.perf_counter() - begin) / calls)
    return best * 1e6


def inputs(batch: int, horizon: int, num_actions: int):
    """Log emissions (B, T, N), a row-stochastic random graph's log transitions (N, N)."""
    generator = torch.Generator().manual_seed(0)
    emissions = torch.randn(batch, horizon, num_actions, generator=generator).log_softmax(-1)
    transitions = torch.rand(num_actions, num_actions, generator=generator).log_softmax(-1)
    return emissions, transitions


@tool_main
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', nargs='+', default=['256x3x105', '1x3x18'],
                        help='BxTxN entries')
    parser.add_argument('--calls', type=POSITIVE_INT, default=2000)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f'{"function":<28} {"B x T x N":<12} {"checked":>10} {"unchecked":>10} {"cost":>8}')
    for size in args.sizes:
        batch, horizon, num_actions = (int(part) for part in size.split('x'))
        emissions, transitions = inputs(batch, horizon, num_actions)
        cases = [('differentiable_viterbi', differentiable_viterbi, (emissions, transitions),
                  dict(temperature=1.0, num_layers=1, impl='auto')),
                 ('viterbi_decode_probs', viterbi_decode_probs,
                  (emissions.exp(), transitions.exp()), {})]
        for name, function, call_args, kwargs in cases:
            checked = microseconds_per_call(function, call_args, kwargs, args.calls)
            unchecked = microseconds_per_call(function.__wrapped__, call_args, kwargs,
                                              args.calls)
            print(f'{name:<28} {size:<12} {checked:>8.1f}µs {unchecked:>8.1f}µs '
                  f'{checked - unchecked:>+6.1f}µs')


if __name__ == '__main__':
    main()

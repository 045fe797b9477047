"""The cost of ``config_types.checked_arguments`` on the hot path, in µs per call.

Measured for the DVL forward and the probability-space Viterbi with the decorator's argument
check and without it (the function it wraps), per batch of the given size, and for the check
alone (the decorator around a function of the same signature that does nothing: end-to-end
differences of a few µs are below the timing noise of a batch).

    python tools/benchmark_checked_arguments.py [--sizes 256x3x105 1x3x18] [--calls 2000]
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from vpn_plugin.benchmark import parse_size  # noqa: E402
from vpn_plugin.errors import POSITIVE_INT, parse_once, tool_main  # noqa: E402
from vpn_plugin.config_types import checked_arguments  # noqa: E402
from vpn_plugin.core import differentiable_viterbi, viterbi_decode_probs  # noqa: E402


def microseconds_per_call(functions, args, kwargs, calls: int) -> list:
    """µs per call of each of ``functions``: the best of 7 rounds of ``calls`` calls, the
    functions taking turns round by round (a load change hits them alike)."""
    best = [float('inf')] * len(functions)
    for _ in range(7):
        for index, function in enumerate(functions):
            begin = time.perf_counter()
            for _ in range(calls):
                function(*args, **kwargs)
            best[index] = min(best[index], (time.perf_counter() - begin) / calls)
    return [seconds * 1e6 for seconds in best]


def check_alone(checked):
    """(the decorator around a no-op of ``checked``'s signature and annotations, the no-op)."""
    def no_op(*args, **kwargs):
        return None
    no_op = functools.update_wrapper(no_op, checked.__wrapped__)
    return checked_arguments(no_op), no_op


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
    args = parse_once(parser, argv)
    for size in args.sizes:  # every entry checked before the first is measured
        parse_size(size)
    torch.set_num_threads(1)
    print(f'{"function":<24} {"B x T x N":<11} {"checked":>11} {"unchecked":>11} '
          f'{"difference":>11} {"check alone":>12}')
    for size in args.sizes:
        batch, horizon, num_actions = parse_size(size)
        emissions, transitions = inputs(batch, horizon, num_actions)
        cases = [('differentiable_viterbi', differentiable_viterbi, (emissions, transitions),
                  dict(temperature=1.0, num_layers=1, impl='auto')),
                 ('viterbi_decode_probs', viterbi_decode_probs,
                  (emissions.exp(), transitions.exp()), {})]
        for name, function, call_args, kwargs in cases:
            checked, unchecked = microseconds_per_call(
                [function, function.__wrapped__], call_args, kwargs, args.calls)
            check, no_op = microseconds_per_call(
                list(check_alone(function)), call_args, kwargs, 20 * args.calls)
            print(f'{name:<24} {size:<11} {checked:>9.1f}µs {unchecked:>9.1f}µs '
                  f'{checked - unchecked:>+9.1f}µs {check - no_op:>10.1f}µs')


if __name__ == '__main__':
    main()

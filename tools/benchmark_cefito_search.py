"""Time CEFITO's exhaustive search: prefix-tree scoring against chunked full sequences.

    nice -n 10 .venv/bin/python tools/benchmark_cefito_search.py --dataset crosstask --horizon 4 \
        --batches 3 --batch-size 4
    nice -n 10 .venv/bin/python tools/benchmark_cefito_search.py --dataset niv --horizon 5 \
        --batch-size 1 --skip-chunked

A full-size energy field (E 1536, H 384, 4 blocks, 6 heads; random weights, random
observations, random 512-d action features: the cost does not depend on them) searches the test
windows of ``<data-root>/<dataset>/splits/test_T<T>*.json``, each over A(c) of its task (the
real taxonomy), as the test loop does: ``--batches`` batches of ``--batch-size`` consecutive
test windows (spread over the file; ``--batches 0``: the whole file), each grouped by task as
the model groups a batch. The whole test pass is extrapolated from the measured time per token
evaluation and each window's |A(c)|; the energies of both scorers are compared (max abs
difference) and so are their top-5 plans. Prints the figures; exits 1 when
the energies differ by more than 1e-5 or the plans differ.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch

from vpn_plugin.core import energy_field, energy_search
from vpn_plugin.datasets import load_taxonomy
from vpn_plugin.errors import (NON_NEGATIVE_INT, POSITIVE_INT, parse_once, path_argument,
                               seed_argument, tool_main)

TAXONOMIES = dict(crosstask='taxonomy_133.json', niv='taxonomy.json', coin='taxonomy.json')
NUM_ACTIONS = dict(crosstask=133, niv=48, coin=778)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', choices=sorted(TAXONOMIES), default='crosstask')
    parser.add_argument('--horizon', type=POSITIVE_INT, default=4)
    parser.add_argument('--data-root', type=path_argument, default='../shared/data')
    parser.add_argument('--batches', type=NON_NEGATIVE_INT, default=1,
                        help='batches timed (0: every window); the rest is extrapolated')
    parser.add_argument('--batch-size', type=POSITIVE_INT, default=6,
                        help='consecutive test windows per batch (the test loop\'s batches)')
    parser.add_argument('--chunk-size', type=POSITIVE_INT, default=50_000)
    parser.add_argument('--threads', type=NON_NEGATIVE_INT, default=0, help='torch threads (0: default)')
    parser.add_argument('--skip-chunked', action='store_true',
                        help='time the prefix tree only (long horizons)')
    parser.add_argument('--repeats', type=POSITIVE_INT, default=2,
                        help='alternating timings of each scorer; the fastest is reported (the '
                        'first call of a process pays one-off allocation costs)')
    parser.add_argument('--seed', type=seed_argument, default=0)
    return parse_once(parser, argv)


def test_windows(data_root: Path, dataset: str, horizon: int) -> list:
    """Task index of every test window of the unified protocol's file."""
    candidates = sorted((data_root / dataset / 'splits').glob(f'test_T{horizon}*.json'))
    if not candidates:
        raise FileNotFoundError(f'{data_root / dataset / "splits"}: no test_T{horizon}*.json; '
                                f'expected the unified protocol\'s test windows at T={horizon}')
    windows = json.loads(candidates[0].read_text())
    return [int(w['id']['task_id']) for w in windows]


def build_field(num_actions: int, horizon: int, seed: int) -> energy_field.EnergyField:
    torch.manual_seed(seed)
    field = energy_field.EnergyField(1536, num_actions, horizon,
                                     torch.randn(num_actions, 512), 384, 4, 6)
    return field.eval()


def time_scorer(field, batches, lists, horizon, scorer, chunk_size, seed):
    """(seconds, {(batch, window): energies (|A|^T,)}) of one scorer over batches of task ids,
    each grouped by task."""
    generator = torch.Generator().manual_seed(seed)
    tables, seconds = {}, 0.0
    for number, tasks in enumerate(batches):
        start = energy_field.normalize_observation(torch.randn(len(tasks), 1536,
                                                               generator=generator))
        goal = energy_field.normalize_observation(torch.randn(len(tasks), 1536,
                                                              generator=generator))
        began = time.perf_counter()
        with torch.no_grad():
            for task, members in energy_search.group_by_task(torch.tensor(tasks)):
                table = energy_search.energy_table(field, start[members], goal[members],
                                                   torch.tensor(lists[task]), horizon, scorer,
                                                   chunk_size)
                for row, member in enumerate(members.tolist()):
                    tables[number, member] = table[row]
        seconds += time.perf_counter() - began
    return seconds, tables


def batches_of(tasks: list, count: int, size: int) -> list:
    """``count`` runs of ``size`` consecutive task ids spread over ``tasks`` (0: all)."""
    if count <= 0 or count * size >= len(tasks):
        return [tasks[i:i + size] for i in range(0, len(tasks), size)]
    last = len(tasks) - size
    starts = [round(i * last / max(1, count - 1)) for i in range(count)]
    return [tasks[s:s + size] for s in starts]


@tool_main
def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    data_root = Path(args.data_root)
    taxonomy = load_taxonomy(data_root / args.dataset / TAXONOMIES[args.dataset])
    lists = {t: tuple(a) for t, a in enumerate(taxonomy.task_actions)}
    all_tasks = test_windows(data_root, args.dataset, args.horizon)
    batches = batches_of(all_tasks, args.batches, args.batch_size)
    chosen = [t for batch in batches for t in batch]
    sizes_all = [len(lists[t]) for t in all_tasks]
    sizes = [len(lists[t]) for t in chosen]
    cost_all = energy_search.search_cost(sizes_all, args.horizon)
    cost = energy_search.search_cost(sizes, args.horizon)
    print(f'{args.dataset} T={args.horizon}: {len(all_tasks)} test windows, '
          f'{cost_all["sequences"]:,.0f} sequences in all (max {max(sizes_all)}^{args.horizon}'
          f' = {max(sizes_all) ** args.horizon:,} per window); timing {len(batches)} batch(es), '
          f'{len(chosen)} windows of tasks {sorted(set(chosen))} ({cost["sequences"]:,.0f} '
          f'sequences), torch threads {torch.get_num_threads()}')
    field = build_field(NUM_ACTIONS[args.dataset], args.horizon, args.seed)
    scorers = ('tree',) if args.skip_chunked else ('tree', 'chunked')
    seconds = {scorer: [] for scorer in scorers}
    for _ in range(args.repeats):
        for scorer in scorers:
            elapsed, tables = time_scorer(field, batches, lists, args.horizon, scorer,
                                          args.chunk_size, args.seed)
            seconds[scorer].append(elapsed)
            if scorer == 'tree':
                tree = tables
            else:
                chunked = tables
    tree_s = min(seconds['tree'])
    tree_rate = cost['tree_tokens'] / tree_s
    print(f'prefix tree: {tree_s:.2f} s for {len(chosen)} windows ({tree_rate:,.0f} token '
          f'evaluations/s; runs {", ".join(f"{t:.1f}" for t in seconds["tree"])} s); whole test '
          f'pass ~{cost_all["tree_tokens"] / tree_rate:,.0f} s')
    if args.skip_chunked:
        return 0
    chunk_s = min(seconds['chunked'])
    chunk_rate = cost['full_tokens'] / chunk_s
    print(f'chunked full sequences: {chunk_s:.2f} s ({chunk_rate:,.0f} token evaluations/s; '
          f'runs {", ".join(f"{t:.1f}" for t in seconds["chunked"])} s); whole test pass '
          f'~{cost_all["full_tokens"] / chunk_rate:,.0f} s')
    diff = max(float((tree[i] - chunked[i]).abs().max()) for i in tree)
    same_plans = all(torch.equal(energy_search.select_top_k(tree[i][None], 5)[0],
                                 energy_search.select_top_k(chunked[i][None], 5)[0])
                     for i in tree)
    print(f'speed-up {chunk_s / tree_s:.2f}x on the timed windows '
          f'(whole pass, extrapolated: {cost_all["full_tokens"] / chunk_rate:,.0f} s -> '
          f'{cost_all["tree_tokens"] / tree_rate:,.0f} s); energies max abs diff {diff:.2e}; '
          f'top-5 plans {"identical" if same_plans else "DIFFER"}')
    return 0 if diff <= 1e-5 and same_plans else 1


if __name__ == '__main__':
    sys.exit(main())

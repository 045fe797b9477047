"""KEPP's procedure-knowledge graph and its path retrieval, plain python/numpy (the official
``PKG/graph_creation.py`` of Ravindu-Yasas-Nagasinghe/KEPP, mode ``train_out_n`` then
``validate``).

Graph (:func:`build_graph`): videos given as (video id, action sequence); a repeated video id
keeps its first position and its last sequence (a dict, as the official reading of the action
list). Every consecutive pair (self-loops included) adds 1 to its edge; each node's out-edge
weights are then divided by their sum (float64). Nodes are the actions of some pair, in order
of first appearance (the source of a pair before its target); each node's successors are in
order of first insertion. That order decides ties.

Retrieval (:func:`top_paths`): every walk of exactly T nodes ``s = v_1 -> ... -> v_T = e`` along
existing edges (nodes may repeat; ``e`` and ``s`` may also occur inside), in depth-first order
over successors in insertion order; weight = product of its T-1 edge weights, multiplied left to
right; sorted by weight, descending, stably (ties keep depth-first order); the first two are
kept. One walk -> it twice; none (or s / e not a node: the official ``find_top_n_paths``
returns no path then, "Skip if start or end node is not in the graph") -> the fallback
``[s, .., s, e, .., e]`` twice (s at steps t < T/2, e after: ``[s, s, e, e]`` at T = 4 as the
official code); :func:`retrieve` says which ('none' or 'unseen').

Generalisation: the official retrieval is hard-wired to T = 4 (``max_path_length=4``); here the
walk length is the run's horizon T (3..6 in the configs); at T = 4 it is exactly the official
function. ``PathRetriever`` caches the answer per (first, last) pair and counts fallbacks.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .pkg import _integer_ids

NUM_PATHS = 2  # the official n=2 of validate_graph_final
PATH_PROBABILITIES = (2 / 3, 1 / 3)  # official PKGLabelOnehot / LLMLabelOnehot weights


class KEPPGraph:
    """A weighted digraph with ordered nodes and successors (module docstring).

    ``nodes``: list of action ids in insertion order; ``successors[u]``: list of (v, weight)
    in insertion order (float64 weights; each non-empty list sums to 1 within the rounding of
    ``weights_dtype``, the precision a graph file stored them in: float16 weights miss 1 by
    float16 rounding)."""

    def __init__(self, nodes: Sequence[int], successors: Dict[int, List[Tuple[int, float]]],
                 weights_dtype=np.float64):
        self.weights_dtype = np.dtype(weights_dtype)
        self.nodes = [int(n) for n in nodes]
        self.successors = {int(u): [(int(v), float(w)) for v, w in successors.get(u, [])]
                           for u in self.nodes}
        self._node_set = set(self.nodes)
        self._csr = None

    def has_node(self, node: int) -> bool:
        return int(node) in self._node_set

    def edges(self) -> List[Tuple[int, int, float]]:
        """(u, v, weight) in networkx order: nodes in order, successors in order."""
        return [(u, v, w) for u in self.nodes for v, w in self.successors[u]]

    def csr(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(indptr (M+1,), targets (E,), weights (E,), adjacency (M, M) bool) over node ids
        0..M-1 (M = largest id + 1), successors in insertion order; built once."""
        if self._csr is None:
            size = max(self.nodes, default=-1) + 1
            counts = np.zeros(size + 1, np.int64)
            for u in self.nodes:
                counts[u + 1] = len(self.successors[u])
            rows = [self.successors.get(u, []) for u in range(size)]
            targets = np.asarray([v for row in rows for v, _ in row], np.int64)
            weights = np.asarray([w for row in rows for _, w in row], np.float64)
            adjacency = np.zeros((size, size), bool)
            for u in self.nodes:
                adjacency[u, [v for v, _ in self.successors[u]]] = True
            self._csr = (np.cumsum(counts), targets, weights, adjacency)
        return self._csr

    @property
    def num_edges(self) -> int:
        return sum(len(s) for s in self.successors.values())

    def to_arrays(self, num_actions: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights (N, N) float64, node_rank (N,) int64, successor_rank (N, N) int64): the
        graph as arrays (rank -1: absent) for a checkpoint; :func:`graph_from_arrays` inverts."""
        self.check_actions(num_actions)
        weights = np.zeros((num_actions, num_actions), np.float64)
        node_rank = np.full(num_actions, -1, np.int64)
        successor_rank = np.full((num_actions, num_actions), -1, np.int64)
        for rank, u in enumerate(self.nodes):
            node_rank[u] = rank
            for position, (v, w) in enumerate(self.successors[u]):
                weights[u, v], successor_rank[u, v] = w, position
        return weights, node_rank, successor_rank

    def check_actions(self, num_actions: int, source: str = 'the PKG') -> None:
        if self.nodes and not 0 <= min(self.nodes) <= max(self.nodes) < num_actions:
            raise ValueError(f'{source} has action ids in [{min(self.nodes)}, '
                             f'{max(self.nodes)}] but the model has num_actions={num_actions} '
                             f'(expected ids 0..{num_actions - 1})')


def build_graph(videos: Iterable[Tuple[object, Sequence[int]]]) -> KEPPGraph:
    """The KEPP graph of (video id, action sequence) pairs (module docstring)."""
    sequences: Dict[object, List[int]] = {}
    for video, sequence in videos:  # first position, last sequence; 0.5 is no action id
        sequences[video] = _integer_ids(sequence, f'video {video!r} sequence').tolist()
    counts: Dict[int, Dict[int, int]] = {}
    for sequence in sequences.values():
        for u, v in zip(sequence[:-1], sequence[1:]):
            counts.setdefault(u, {})
            counts.setdefault(v, {})
            counts[u][v] = counts[u].get(v, 0) + 1
    successors = {}
    for u, row in counts.items():
        total = sum(row.values())
        successors[u] = [(v, count / total) for v, count in row.items()]
    return KEPPGraph(list(counts), successors)


def graph_from_arrays(weights: np.ndarray, node_rank: np.ndarray,
                      successor_rank: np.ndarray) -> KEPPGraph:
    """Inverse of :meth:`KEPPGraph.to_arrays`."""
    nodes = [int(n) for n in np.argsort(node_rank, kind='stable') if node_rank[n] >= 0]
    successors = {}
    for u in nodes:
        targets = np.flatnonzero(successor_rank[u] >= 0)
        order = targets[np.argsort(successor_rank[u, targets], kind='stable')]
        successors[u] = [(int(v), float(weights[u, v])) for v in order]
    return KEPPGraph(nodes, successors)


def walk_arrays(graph: KEPPGraph, start: int, end: int, horizon: int
                ) -> Tuple[np.ndarray, np.ndarray]:
    """(walks (W, T) int64, weights (W,) float64): every walk of exactly ``horizon`` nodes from
    ``start`` to ``end`` in depth-first order, its weight the product of its edge weights
    multiplied left to right (as ``np.prod``). Built level by level: each prefix's successors
    in insertion order, prefixes in order, which is the depth-first order of the full walks;
    prefixes that cannot reach ``end`` in the steps left are dropped."""
    if horizon < 2:
        raise ValueError(f'KEPP path retrieval: horizon={horizon}; expected T >= 2')
    empty = np.zeros((0, horizon), np.int64), np.zeros(0, np.float64)
    if not (graph.has_node(start) and graph.has_node(end)):
        return empty
    indptr, targets, weights, adjacency = graph.csr()
    reach = [np.zeros(len(adjacency), bool)]  # reach[k][u]: a walk of exactly k edges to end
    reach[0][end] = True
    for _ in range(horizon - 1):
        reach.append(adjacency @ reach[-1])
    if not reach[horizon - 1][start]:
        return empty
    paths = np.array([[start]], np.int64)
    products = np.ones(1, np.float64)
    for level in range(1, horizon):
        last = paths[:, -1]
        counts = indptr[last + 1] - indptr[last]
        rows = np.repeat(np.arange(len(paths)), counts)
        edges = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) \
            + np.repeat(indptr[last], counts)
        keep = reach[horizon - 1 - level][targets[edges]]
        rows, edges = rows[keep], edges[keep]
        step = weights[edges]
        products = step if level == 1 else products[rows] * step
        paths = np.concatenate([paths[rows], targets[edges][:, None]], 1)
    return paths, products


def all_walks(graph: KEPPGraph, start: int, end: int, horizon: int
              ) -> List[Tuple[List[int], float]]:
    """Every walk of exactly ``horizon`` nodes from ``start`` to ``end`` with its weight, in
    depth-first order (:func:`walk_arrays`)."""
    paths, products = walk_arrays(graph, start, end, horizon)
    return [(path, float(w)) for path, w in zip(paths.tolist(), products)]


def top_paths(graph: KEPPGraph, start: int, end: int, horizon: int, count: int = NUM_PATHS
              ) -> List[Tuple[List[int], float]]:
    """The official ``find_top_n_paths``: the ``count`` heaviest walks, sorted stably (ties
    keep the depth-first order)."""
    paths, products = walk_arrays(graph, start, end, horizon)
    order = np.argsort(-products, kind='stable')[:count]
    return [(paths[i].tolist(), float(products[i])) for i in order]


def fallback_path(start: int, end: int, horizon: int) -> List[int]:
    """``[s, .., s, e, .., e]``: s at steps t < T/2, e after (official ``[s, s, e, e]``)."""
    return [int(start) if 2 * t < horizon else int(end) for t in range(horizon)]


FALLBACK_KINDS = ('none', 'unseen')  # the kinds of :func:`retrieve` answered by the fallback


def unseen_actions(graph: KEPPGraph, start: int, end: int) -> List[str]:
    """'start action 77' / 'end action 77' of the pair's actions that are no node of the graph
    (no training video holds a transition from or to them)."""
    return [f'{role} action {int(a)}' for role, a in (('start', start), ('end', end))
            if not graph.has_node(a)]


def retrieve(graph: KEPPGraph, start: int, end: int, horizon: int) -> Tuple[List[List[int]], str]:
    """(two paths of ``horizon`` nodes, kind 'many' / 'one' / 'none' / 'unseen'): the official
    ``validate_graph_final`` at any horizon (module docstring); the fallback of 'none' (no
    walk between two nodes) and of 'unseen' (the start or end action is no node of the graph:
    :func:`unseen_actions`) is the same, as in the official code."""
    paths = [path for path, _ in top_paths(graph, start, end, horizon)]
    if not paths:
        kind = 'unseen' if unseen_actions(graph, start, end) else 'none'
        return [fallback_path(start, end, horizon)] * NUM_PATHS, kind
    if len(paths) == 1:
        return paths * NUM_PATHS, 'one'
    return paths, 'many'


class PathRetriever:
    """Retrieval on one graph at one horizon, cached by (first, last) pair.

    ``fallback_pairs``: the pairs without a walk (their fallback is used); ``fallback_windows``:
    how many queries got a fallback."""

    def __init__(self, graph: KEPPGraph, horizon: int):
        self.graph, self.horizon = graph, horizon
        self.cache: Dict[Tuple[int, int], Tuple[np.ndarray, str]] = {}
        self.fallback_pairs: List[Tuple[int, int]] = []
        self.fallback_windows = 0

    def paths(self, start: int, end: int) -> Tuple[np.ndarray, bool]:
        """((2, T) int64 paths, whether the fallback was used) of one pair."""
        key = (int(start), int(end))
        if key not in self.cache:
            paths, kind = retrieve(self.graph, key[0], key[1], self.horizon)
            self.cache[key] = (np.asarray(paths, np.int64), kind)
            if kind in FALLBACK_KINDS:
                self.fallback_pairs.append(key)
        paths, kind = self.cache[key]
        self.fallback_windows += kind in FALLBACK_KINDS
        return paths, kind in FALLBACK_KINDS

    def batch(self, first: Sequence[int], last: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
        """((B, 2, T) int64 paths, (B,) bool fallback used) of B (first, last) pairs."""
        results = [self.paths(s, e) for s, e in zip(first, last)]
        return (np.stack([p for p, _ in results]) if results
                else np.zeros((0, NUM_PATHS, self.horizon), np.int64),
                np.asarray([f for _, f in results], bool))


def path_block(paths: np.ndarray, num_actions: int,
               probabilities: Sequence[float] = PATH_PROBABILITIES) -> np.ndarray:
    """(B, T, N) float32: per step a zero vector, then ``v[path_k[t]] = probabilities[k]`` for
    k = 0, 1 in turn, written over, not added (official ``PKGLabelOnehot``): where the two paths
    agree the entry is the last probability (1/3). ``paths`` (B, 2, T) int."""
    paths = np.asarray(paths, np.int64)
    batch, count, steps = paths.shape
    block = np.zeros((batch, steps, num_actions), np.float32)
    rows, times = np.arange(batch)[:, None], np.arange(steps)[None, :]
    for k in range(count):
        block[rows, times, paths[:, k]] = np.float32(probabilities[k])
    return block

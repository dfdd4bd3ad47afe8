"""Legal execution orders of an instance graph: topological, seeded random, adversarial.

- `topo`: submission order (the order the orchestration submits; every edge points forward).
- `random`: repeatedly run a uniformly chosen ready task (seeded), and shuffle SPMD blocks.
- `adversarial`: run each task as early as its deps allow: among ready tasks the one submitted
  last goes first, writers (any write/atomic access) before pure readers, SPMD blocks in
  reverse. A consumer whose edge to its producer is missing then runs before the producer,
  and a writer whose edge from an earlier reader is missing overwrites before that read.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence

import networkx as nx

from pgraph.ir.instances import InstanceGraph
from pgraph.kinds import AccessKind

ORDERS = ("topo", "random", "adversarial")


def topo_order(graph: nx.DiGraph) -> list[int]:
    """Submission order; falls back to a topological sort if some edge points backward."""
    order = sorted(graph.nodes)
    if all(u < v for u, v in graph.edges):
        return order
    return list(nx.lexicographical_topological_sort(graph))


def random_order(graph: nx.DiGraph, seed: int) -> list[int]:
    """A uniformly-chosen-ready-task legal order, reproducible from `seed`."""
    rng = random.Random(seed)
    indeg = {n: graph.in_degree(n) for n in graph.nodes}
    ready = sorted(n for n, k in indeg.items() if k == 0)
    out = []
    while ready:
        i = rng.randrange(len(ready))
        ready[i], ready[-1] = ready[-1], ready[i]
        n = ready.pop()
        out.append(n)
        for s in sorted(graph.successors(n)):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    if len(out) != graph.number_of_nodes():
        raise ValueError("the graph has a cycle")
    return out


def _writers(ig: InstanceGraph) -> set[int]:
    out = set()
    for node, blocks in ig.blocks.items():
        if any(acc[AccessKind.WRITE] or acc[AccessKind.ATOMIC] for acc in blocks):
            out.add(node)
    return out


def adversarial_order(graph: nx.DiGraph, ig: InstanceGraph) -> list[int]:
    """Latest-submitted ready task first, writers before pure readers (see module doc)."""
    writers = _writers(ig)
    indeg = {n: graph.in_degree(n) for n in graph.nodes}
    heap = [(-int(n in writers), -n) for n, k in indeg.items() if k == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _w, neg = heapq.heappop(heap)
        n = -neg
        out.append(n)
        for s in graph.successors(n):
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (-int(s in writers), -s))
    if len(out) != graph.number_of_nodes():
        raise ValueError("the graph has a cycle")
    return out


def block_permutation(kind: str, seed: int) -> object:
    """`block_order(node, n)` for Executor.run: identity, seeded shuffle or reverse."""
    if kind == "topo":
        return None
    if kind == "adversarial":
        return lambda node, n: range(n - 1, -1, -1)
    rng = random.Random(seed ^ 0x5EED)

    def shuffled(node: int, n: int) -> Sequence[int]:
        idx = list(range(n))
        rng.shuffle(idx)
        return idx

    return shuffled


def make_order(kind: str, graph: nx.DiGraph, ig: InstanceGraph, seed: int) -> list[int]:
    """The order `kind` ('topo', 'random', 'adversarial') of `graph` (seed used by 'random')."""
    if kind == "topo":
        return topo_order(graph)
    if kind == "random":
        return random_order(graph, seed)
    if kind == "adversarial":
        return adversarial_order(graph, ig)
    raise ValueError(f"unknown order '{kind}' (known: {', '.join(ORDERS)})")

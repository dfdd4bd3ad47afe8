"""Happens-before over the instance graph: bitsets on small graphs, bounded searches on large ones.

Tasks are submitted in program order and every edge of an analysed graph runs from an earlier
submit to a later one (PG032 and PG013 stop the pipeline otherwise), so instance ids are a
topological order. On a graph of at most BITSET_NODES instances `Reach` keeps the ancestor
set of every instance as a Python-int bitset (N^2/2 bits: 36 MiB at the limit). A larger
graph (a `--full` expansion of a 40-layer prefill has 351,091 instances: the bitsets would
take 7.7 GB) answers each question by a search that only walks instances that can lie on a
path: ids between the two ends and topological levels below the target's. Questions come in
batches (every conflicting pair of the race rule, the predecessors of one consumer), so one
search serves all the questions about one instance.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from pgraph.kinds import InternalError
from pgraph.plan.base import Fact, Pass, Plan

#: Largest graph whose ancestor sets are kept as bitsets (N^2/2 bits = 36 MiB at 24,576).
BITSET_NODES = 24_576


class Reach(Fact):
    """Happens-before of one graph: `before(a, b)` when a path a -> ... -> b exists (any provenance).

    `succ`/`pred` are the adjacency lists (sorted), `level` the topological level (0 for an
    instance without predecessors, else 1 + the largest level of its predecessors), `anc`
    the ancestor bitsets when the graph has at most BITSET_NODES instances, else None.
    """

    def __init__(self, succ: list[list[int]], pred: list[list[int]], anc: list[int] | None = None) -> None:
        self.succ = succ
        self.pred = pred
        self.n = len(succ)
        self.level = [0] * self.n
        for v in range(self.n):
            ps = pred[v]
            if ps:
                self.level[v] = 1 + max(self.level[u] for u in ps)
        self.anc = anc
        self._stamp = [0] * self.n
        self._epoch = 0

    # ---- single questions ----
    def before(self, a: int, b: int) -> bool:
        """True when a path a -> ... -> b exists."""
        if self.anc is not None:
            return bool(self.anc[b] >> a & 1)
        if a >= b or self.level[a] >= self.level[b]:
            return False
        return b in self.descendants_among(a, [b])

    def ordered(self, a: int, b: int) -> bool:
        """True when a happens before b or b before a."""
        return self.before(a, b) or self.before(b, a)

    # ---- batches ----
    def ordered_pairs(self, pairs: Iterable[tuple[int, int]]) -> list[bool]:
        """`ordered(a, b)` for each (a, b) with a < b: a direct edge, else one search per distinct a."""
        if self.anc is not None:
            anc = self.anc
            return [bool(anc[b] >> a & 1) or bool(anc[a] >> b & 1) for a, b in pairs]
        out: list[bool] = []
        pending: dict[int, list[int]] = defaultdict(list)
        where: list[tuple[int, int, int]] = []
        succ, level = self.succ, self.level
        for a, b in pairs:
            if a >= b:
                raise InternalError(f"ordered_pairs expects a < b, got ({a}, {b})")
            adj = succ[a]
            i = bisect.bisect_left(adj, b)
            if i < len(adj) and adj[i] == b:
                out.append(True)
            elif level[a] >= level[b]:
                out.append(False)
            else:
                where.append((len(out), a, b))
                pending[a].append(b)
                out.append(False)
        reached = {a: self.descendants_among(a, bs) for a, bs in pending.items()}
        for k, a, b in where:
            out[k] = b in reached[a]
        return out

    def ordered_mask(self, first: Any, second: Any) -> Any:
        """`ordered_pairs` of the pairs (first[k], second[k]) given as NumPy int64 arrays, as a
        bool array: the direct edges and the level test with arrays (a --full prefill has 1.6
        million conflicting pairs, 97 % of them direct edges), the rest by `ordered_pairs`."""
        import numpy as np

        lens = np.fromiter((len(adj) for adj in self.succ), dtype=np.int64, count=self.n)
        heads = np.repeat(np.arange(self.n, dtype=np.int64), lens)
        tails = np.fromiter(itertools.chain.from_iterable(self.succ), dtype=np.int64, count=int(lens.sum()))
        edges = heads << 32 | tails  # sorted: producers ascending, each successor list sorted
        keys = first << 32 | second
        out = np.zeros(len(keys), dtype=bool)
        if len(edges):
            at = np.minimum(np.searchsorted(edges, keys), len(edges) - 1)
            out = edges[at] == keys
        level = np.asarray(self.level, dtype=np.int64)
        rest = np.nonzero(~out & (level[first] < level[second]))[0]
        if len(rest):
            out[rest] = self.ordered_pairs(zip(first[rest].tolist(), second[rest].tolist()))
        return out

    def descendants_among(self, a: int, targets: Iterable[int]) -> set[int]:
        """The instances of `targets` (all after `a`) that `a` reaches: one forward search that
        never leaves the ids up to the last target nor the levels below the highest target's."""
        want = {t for t in targets if t > a}
        if not want:
            return set()
        bound = max(want)
        top = max(self.level[t] for t in want)
        found: set[int] = set()
        stamp = self._fresh()
        seen, succ, level = self._stamp, self.succ, self.level
        stack = [a]
        while stack:
            u = stack.pop()
            for w in succ[u]:
                if w > bound or seen[w] == stamp or level[w] > top:
                    continue
                seen[w] = stamp
                if w in want:
                    found.add(w)
                    if len(found) == len(want):
                        return found
                stack.append(w)
        return found

    def implied_predecessors(self, v: int) -> set[int]:
        """Direct predecessors u of `v` that also reach v through another predecessor (u -> w -> ... -> v)."""
        preds = self.pred[v]
        if len(preds) < 2:
            return set()
        if self.anc is not None:
            union = 0
            for w in preds:
                union |= self.anc[w]
            return {u for u in preds if union >> u & 1}
        # every instance reached backwards from the predecessors' own predecessors is an
        # ancestor of some predecessor; ids below the first predecessor cannot be one of them
        # ... nor levels below the lowest predecessor's (a path only climbs levels)
        low = preds[0]
        level = self.level
        floor = min(level[u] for u in preds)
        stamp = self._fresh()
        seen, pred = self._stamp, self.pred
        stack = []
        for w in preds:
            for x in pred[w]:
                if x >= low and seen[x] != stamp and level[x] >= floor:
                    seen[x] = stamp
                    stack.append(x)
        while stack:
            u = stack.pop()
            for x in pred[u]:
                if x >= low and seen[x] != stamp and level[x] >= floor:
                    seen[x] = stamp
                    stack.append(x)
        return {u for u in preds if seen[u] == stamp}

    def related(self, v: int) -> set[int]:
        """Every instance ordered with `v` (its ancestors and descendants), `v` excluded."""
        out: set[int] = set()
        for adj in (self.succ, self.pred):
            stack = [v]
            while stack:
                u = stack.pop()
                for w in adj[u]:
                    if w not in out:
                        out.add(w)
                        stack.append(w)
        out.discard(v)
        return out

    def _fresh(self) -> int:
        self._epoch += 1
        return self._epoch


def adjacency(plan: Plan) -> tuple[list[list[int]], list[list[int]]]:
    """Sorted successor and predecessor lists of `plan`'s graph as it is now."""
    g = plan.graph
    n = len(g.instances)
    succ = [sorted(g.succ[u]) for u in range(n)]
    pred = [sorted(g.pred[v]) for v in range(n)]
    for u, adj in enumerate(succ):
        if adj and adj[0] <= u:
            raise InternalError(f"edge {u} -> {adj[0]} runs against submission order in the analysed graph")
    return succ, pred


def ancestors(plan: Plan, bitset_nodes: int | None = None) -> Reach:
    """The Reach of `plan`'s graph as it is now (bitsets up to `bitset_nodes` instances)."""
    succ, pred = adjacency(plan)
    limit = BITSET_NODES if bitset_nodes is None else bitset_nodes
    if len(succ) > limit:
        return Reach(succ, pred)
    anc = [0] * len(succ)
    for v, ps in enumerate(pred):
        bits = 0
        for u in ps:
            bits |= anc[u] | (1 << u)
        anc[v] = bits
    return Reach(succ, pred, anc)


class ReachPass(Pass):
    """Produces Reach (after the cycle check: the graph is a DAG in submission order)."""

    name = "reach"
    produces = (Reach,)

    def run(self, plan: Plan) -> None:
        plan.put(ancestors(plan))

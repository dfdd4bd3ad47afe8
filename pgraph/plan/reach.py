"""Happens-before over the instance graph: bitsets on small graphs, id ranges on large ones.

Tasks are submitted in program order and every edge of an analysed graph runs from an earlier
submit to a later one (PG032 and PG013 stop the pipeline otherwise), so instance ids are a
topological order. On a graph of at most BITSET_NODES instances `Reach` keeps the ancestor
set of every instance as a Python-int bitset (N^2/2 bits: 36 MiB at the limit). A larger
graph (a `--full` expansion of a 40-layer prefill has 351,091 instances: the bitsets would
take 7.7 GB) keeps each ancestor set as sorted ranges (`RangeSets`, of ranks: the ids of the
instances that have successors, renumbered): a task's ancestors are runs of earlier
submissions (every tile of a dequant phase, rows 0..t of a KV-cache append, the whole previous
layer), so the sets of a prefill hold 12 to 14 ranges on average whatever its size, and a
question is one binary search. A set of more than RANGE_CAP ranges is widened to RANGE_CAP by
filling its narrowest gaps: it then holds every ancestor and some non-ancestors (`loose`), and
a yes it gives is settled by a backward search that only enters instances whose own set holds
the source (every instance of a path does), so every answer is exact. Under PGRAPH_REFERENCE=1
a large graph is answered by the reference, bounded searches instead: ids between the two ends
and topological levels below the target's, one search per source for a batch of questions
(`Reach(succ, pred)`).
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pgraph.fastpath import reference_mode
from pgraph.kinds import InternalError
from pgraph.plan.base import Fact, Pass, Plan

#: Largest graph whose ancestor sets are kept as bitsets (N^2/2 bits = 36 MiB at 24,576).
BITSET_NODES = 24_576
#: Most ranges one instance's ancestor set keeps above BITSET_NODES; a wider set is widened
#: (`loose`): a grid's sets grow with its side; the largest of a prefill window holds 34 ranges
#: (351k tasks, and 34 in its --full expansion), 58 (668k tasks).
RANGE_CAP = 256
#: A consumer with at most this many predecessors is asked pairwise (one binary search per
#: pair) by `implied_predecessors`; a larger fan-in merges its predecessors' ranges once.
PAIRWISE_PREDS = 16

Ranges = Sequence[int]
"""Half-open id ranges (s0, e0, s1, e1, ...), sorted, disjoint and not touching."""


class RangeSets:
    """The ancestor sets of every instance as ranges of ranks, packed. An instance without
    successors (an isolated alloc task) is nobody's ancestor, so the ranks number the others in
    id order (`rank[x]`, -1 for those) and their ids leave no hole in the sets: the 40 layers of
    a --full prefill each hold one such task, which would split every later set 40 times.
    Instance v's flat ranges are `flat[start[v]:start[v + 1]]` (int32, 8 bytes a range: a --full
    prefill's 351,091 sets take ~25 MB), `loose[v]` 1 where the set was widened and may hold
    non-ancestors."""

    def __init__(self, succ: list[list[int]]) -> None:
        n = len(succ)
        self.rank = array("i", bytes(4 * n))
        k = 0
        for x, adj in enumerate(succ):
            if adj:
                self.rank[x] = k
                k += 1
            else:
                self.rank[x] = -1
        self.flat = array("i")
        self.start = array("q", bytes(8 * (n + 1)))
        self.loose = bytearray(n)

    def of(self, v: int) -> Ranges:
        """Instance v's flat ranges (of ranks)."""
        return self.flat[self.start[v]:self.start[v + 1]]

    def holds(self, v: int, x: int) -> bool:
        """True when instance v's set holds instance x."""
        r = self.rank[x]
        lo = self.start[v]
        return r >= 0 and (bisect.bisect_right(self.flat, r, lo, self.start[v + 1]) - lo) & 1 == 1


def in_ranges(ranges: Ranges, x: int) -> bool:
    """True when id `x` lies in one of `ranges`."""
    return bisect.bisect_right(ranges, x) & 1 == 1


def union_ranges(parts: Iterable[Ranges], points: Iterable[int] = ()) -> list[int]:
    """The union of the range sets `parts` and the single ids `points`, as a flat list of ranges."""
    items: list[tuple[int, int]] = []
    for r in parts:
        items.extend(zip(r[0::2], r[1::2]))
    items.extend((x, x + 1) for x in points)
    if not items:
        return []
    items.sort()
    out: list[int] = []
    cs, ce = items[0]
    for s, e in items:
        if s <= ce:
            if e > ce:
                ce = e
        else:
            out.append(cs)
            out.append(ce)
            cs, ce = s, e
    out.append(cs)
    out.append(ce)
    return out


def add_range(flat: list[int], s: int, e: int) -> None:
    """Add the range [s, e) to the flat ranges `flat` in place (merging what it overlaps or touches)."""
    i = bisect.bisect_left(flat, s)
    if i & 1:  # s inside a range, or at its end: start there
        i -= 1
        s = flat[i]
    j = bisect.bisect_right(flat, e)
    if j & 1:  # e inside a range, or at its start: end at its end
        e = flat[j]
        j += 1
    flat[i:j] = (s, e)


def widen(ranges: Sequence[int], cap: int) -> list[int]:
    """`ranges` (flat) reduced to at most `cap` ranges by filling the narrowest gaps: a superset."""
    k = len(ranges) // 2
    if k <= cap:
        return list(ranges)
    # gap i lies between range i and range i + 1; keep the cap - 1 widest (the earliest on ties)
    gaps = sorted(range(k - 1), key=lambda i: (ranges[2 * i + 1] - ranges[2 * i + 2], i))
    keep = sorted(gaps[:cap - 1])
    out = [ranges[0]]
    for i in keep:
        out.append(ranges[2 * i + 1])
        out.append(ranges[2 * i + 2])
    out.append(ranges[-1])
    return out


class Reach(Fact):
    """Happens-before of one graph: `before(a, b)` when a path a -> ... -> b exists (any provenance).

    `succ`/`pred` are the adjacency lists (sorted), `level` the topological level (0 for an
    instance without predecessors, else 1 + the largest level of its predecessors). One of
    three representations answers (every answer is the same, tests/unit/test_reach.py):
    `anc`, the ancestor bitsets (graphs of at most BITSET_NODES instances); `ranges`, each
    instance's ancestors as sorted half-open ranges of ranks (`RangeSets`), `loose[v]` 1 where
    the set was widened to RANGE_CAP ranges and may hold non-ancestors (`interval_reach`); or,
    neither given, bounded searches (the reference above BITSET_NODES, PGRAPH_REFERENCE=1).
    """

    def __init__(self, succ: list[list[int]], pred: list[list[int]], anc: list[int] | None = None,
                 ranges: RangeSets | None = None) -> None:
        self.succ = succ
        self.pred = pred
        self.n = len(succ)
        self.level = [0] * self.n
        for v in range(self.n):
            ps = pred[v]
            if ps:
                self.level[v] = 1 + max(self.level[u] for u in ps)
        self.anc = anc
        self.ranges = ranges
        self.loose = ranges.loose if ranges is not None else None
        self._stamp = [0] * self.n
        self._epoch = 0

    # ---- single questions ----
    def before(self, a: int, b: int) -> bool:
        """True when a path a -> ... -> b exists."""
        if self.anc is not None:
            return bool(self.anc[b] >> a & 1)
        if a >= b or self.level[a] >= self.level[b]:
            return False
        if self.ranges is not None:
            return self._in_ancestors(a, b)
        return b in self.descendants_among(a, [b])

    def ordered(self, a: int, b: int) -> bool:
        """True when a happens before b or b before a."""
        return self.before(a, b) or self.before(b, a)

    def _in_ancestors(self, a: int, b: int) -> bool:
        """Range mode, a < b: a's id in b's set settles it unless the set is loose; a loose yes
        is searched backwards from b through the instances whose sets hold a."""
        assert self.ranges is not None
        flat, start, loose = self.ranges.flat, self.ranges.start, self.ranges.loose
        right = bisect.bisect_right
        ra = self.ranges.rank[a]
        lo = start[b]
        if ra < 0 or not (right(flat, ra, lo, start[b + 1]) - lo) & 1:
            return False
        if not loose[b]:
            return True
        pred, level = self.pred, self.level
        floor = level[a]
        stamp = self._fresh()
        seen = self._stamp
        stack = [b]
        while stack:
            x = stack.pop()
            for y in pred[x]:
                if y == a:
                    return True
                if y < a or seen[y] == stamp or level[y] <= floor:
                    continue
                lo = start[y]
                if not (right(flat, ra, lo, start[y + 1]) - lo) & 1:
                    continue
                if not loose[y]:
                    return True  # y's exact set holds a, and y reaches b
                seen[y] = stamp
                stack.append(y)
        return False

    # ---- batches ----
    def ordered_pairs(self, pairs: Iterable[tuple[int, int]]) -> list[bool]:
        """`ordered(a, b)` for each (a, b) with a < b: a direct edge, else one search per distinct a."""
        if self.anc is not None:
            anc = self.anc
            return [bool(anc[b] >> a & 1) or bool(anc[a] >> b & 1) for a, b in pairs]
        if self.ranges is not None:
            out: list[bool] = []
            level, before = self.level, self._in_ancestors
            for a, b in pairs:
                if a >= b:
                    raise InternalError(f"ordered_pairs expects a < b, got ({a}, {b})")
                out.append(level[a] < level[b] and before(a, b))
            return out
        out = []
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
        if self.ranges is not None:
            return self._implied_by_ranges(preds)
        return self._implied_by_search(preds)

    def _implied_by_ranges(self, preds: list[int]) -> set[int]:
        """Range mode: u is implied when another predecessor's set holds u (only a later one
        can). A loose set's yes is asked again exactly, through `_in_ancestors`."""
        assert self.ranges is not None
        rs = self.ranges
        if any(rs.loose[w] for w in preds):
            if len(preds) > PAIRWISE_PREDS:
                return self._implied_by_search(preds)
            return {u for i, u in enumerate(preds) if any(self._in_ancestors(u, w) for w in preds[i + 1:])}
        if len(preds) <= PAIRWISE_PREDS:
            holds = rs.holds
            return {u for i, u in enumerate(preds) if any(holds(w, u) for w in preds[i + 1:])}
        union = union_ranges(rs.of(w) for w in preds)
        return {u for u in preds if in_ranges(union, rs.rank[u])}

    def _implied_by_search(self, preds: list[int]) -> set[int]:
        """Search mode: one backward search from the predecessors' own predecessors."""
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


def interval_reach(succ: list[list[int]], pred: list[list[int]], cap: int | None = None) -> Reach:
    """The range-mode Reach of a graph whose ids are a topological order (every edge u -> v has
    u < v): each instance's ancestors as at most `cap` ranges, built in id order from its
    predecessors' sets (the union of theirs and their own ids), loose where widened (`cap`:
    RANGE_CAP when None)."""
    cap = RANGE_CAP if cap is None else cap
    n = len(pred)
    rs = RangeSets(succ)
    flat, start, loose, rank = rs.flat, rs.start, rs.loose, rs.rank
    for v in range(n):
        ps = pred[v]
        if ps and len(ps) == 1:  # the one predecessor's set, and its rank above every rank in it
            p = ps[0]
            q = rank[p]
            lo, hi = start[p], start[p + 1]
            if hi > lo and flat[hi - 1] == q:
                flat.extend(flat[lo:hi])
                flat[-1] = q + 1
            elif hi - lo < 2 * cap:
                flat.extend(flat[lo:hi])
                flat.append(q)
                flat.append(q + 1)
            else:
                flat.extend(widen([*flat[lo:hi], q, q + 1], cap))
                loose[v] = 1
            if loose[p]:
                loose[v] = 1
        elif ps:
            full = [p for p in ps if start[p + 1] > start[p]]
            if len(full) > 1:
                merged = union_ranges((flat[start[p]:start[p + 1]] for p in full), [rank[p] for p in ps])
            else:  # one predecessor with ancestors (a row's norm), the others sources (seeds, weights)
                merged = flat[start[full[0]]:start[full[0] + 1]].tolist() if full else []
                for p in ps:
                    add_range(merged, rank[p], rank[p] + 1)
            if len(merged) > 2 * cap:
                merged = widen(merged, cap)
                loose[v] = 1
            elif any(loose[p] for p in ps):
                loose[v] = 1
            flat.extend(merged)
        start[v + 1] = len(flat)
    return Reach(succ, pred, ranges=rs)


def ancestors(plan: Plan, bitset_nodes: int | None = None) -> Reach:
    """The Reach of `plan`'s graph as it is now: bitsets up to `bitset_nodes` instances
    (BITSET_NODES), id ranges above (bounded searches under PGRAPH_REFERENCE=1)."""
    succ, pred = adjacency(plan)
    limit = BITSET_NODES if bitset_nodes is None else bitset_nodes
    if len(succ) > limit:
        return Reach(succ, pred) if reference_mode("interval-reach") else interval_reach(succ, pred)
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

"""Definite writes (PG122): every element a task reads is written before it on every legal order.

An allocation is carved from the reused ring heap (docs/upstream.md §5.2) and nothing the
spec does not declare initialises it (the NumPy executor poisons it), so a task that reads an element of an `alloc` buffer no earlier task
wrote computes on garbage. External tensors are the orchestration's inputs: they are
initialised by the caller and never checked.

**Every legal order.** The runtime may run the tasks in any order that respects the edges of
the instance graph (explicit, carried, inferred, creator). For a reader `r`, the order "every
ancestor of `r`, then `r`" is legal, and in it exactly the ancestors have run: so an element
is written before `r` on every legal order exactly when some *ancestor* of `r` writes it. A
writer that can run after `r` (unordered with it, or after it) does not cover it. Instance ids
are a topological order, so only writers submitted before `r` can be ancestors.

**Gap and race.** An element that an earlier-submitted writer writes, but no ancestor, is a
race of that writer with `r` (PG100/PG101 report it, and their fix, an edge, also covers the
read); this rule reports the elements no earlier-submitted writer writes at all (the gap), so
one mistake is one error. For an atomic add (a read-modify-write of a seeded accumulator,
which reads too), an unordered atomic add is no race (atomic adds need no order among
themselves), so only a plain write is taken as the race's.

What counts: a write or an atomic add writes its box (an atomic add into an unseeded
accumulator is reported itself, as a read); a read or an atomic add reads its box. An
`indirect` access is taken at its bound both ways: the planner cannot see which elements the
index tensors pick, and the spec states the bound (the rows of live sequences).

Cost: per buffer, the writes are indexed by their interval in one dimension (the one whose
intervals are most distinct, as the SPMD overlap index does), or by flat offsets across views
of different shapes. A read first tries its direct predecessors' writes (one covering box
settles it: the common case, and the chain of inout writers); only otherwise does it query
the index, test which overlapping writers are ancestors (the ancestor bitsets, or one
backward search bounded by the lowest candidate), and subtract their boxes from its own by a
sweep over the boxes' breakpoints, dimension by dimension (linear in the boxes for a tiling).
Under PGRAPH_REFERENCE=1 (pgraph.fastpath) the shortcut and the index are skipped: every
earlier write of the buffer is a candidate and each is asked `Reach.before` alone (the
property test holds both to the brute-force oracle).
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence

import attrs

from pgraph import records
from pgraph.diagnostics import Note
from pgraph.fastpath import reference_mode
from pgraph.ir.instances import Box, BufferKey, flat, runs
from pgraph.ir.program import Dispatch, Program
from pgraph.ir.queries import root, roots
from pgraph.kinds import AccessKind, Direction, Storage
from pgraph.plan.base import Fact, Pass, Plan
from pgraph.plan.reach import Reach
from pgraph.source import Span

#: Flat intervals [lo, hi) of one buffer (the runs of a box, across views of other shapes).
Runs = list[tuple[int, int]]

#: Gap records reported per (reader dispatch, buffer): the diagnostics name the first.
_WRITES = (AccessKind.WRITE, AccessKind.ATOMIC)
_READS = (AccessKind.READ, AccessKind.ATOMIC)


@records.value
@attrs.frozen(repr=False, eq=False)
class Gap:
    """Elements one task reads that no task submitted before it writes.

    `reader` is the instance, `kind` its access (read, or an atomic add), `tensor`/`box` the
    region it reads (in that tensor's coordinates), `buffer` the buffer instance. `missing` are
    the unwritten parts as disjoint boxes of `tensor` (when every name of the buffer has one
    shape), else `()` and `flat_missing` holds them as flat element intervals of the buffer.
    `writers` are the ancestors of the reader that write the rest of the box (instance ids,
    ascending), each with the part of the box it covers.
    """

    reader: int
    kind: AccessKind
    tensor: str
    box: Box
    buffer: BufferKey
    missing: tuple[Box, ...]
    flat_missing: tuple[tuple[int, int], ...]
    writers: tuple[tuple[int, str, Box], ...]
    #: the first block of the reader that reads `box`
    block: int = 0


@records.value
@attrs.frozen(repr=False, eq=False)
class DefiniteWrites(Fact):
    """Every read of an allocated buffer that is not covered by earlier writes (PG122), in
    reader order."""

    gaps: list[Gap]


class _Write:
    """One write (or atomic add) of a buffer: instance, tensor name, box, flat runs."""

    __slots__ = ("node", "kind", "tensor", "box", "runs")

    def __init__(self, node: int, kind: AccessKind, tensor: str, box: Box, flat_runs: Runs | None) -> None:
        self.node, self.kind, self.tensor, self.box, self.runs = node, kind, tensor, box, flat_runs


def _empty(box: Box) -> bool:
    for lo, hi in box:  # noqa: SIM110  (hot path: no generator)
        if lo >= hi:
            return True
    return False


def uncovered(box: Box, parts: Sequence[Box]) -> list[Box]:
    """The elements of `box` no box of `parts` covers, as disjoint boxes (empty: covered).

    A sweep over the breakpoints of `parts` in the first dimension: each slab between two
    breakpoints is covered by the parts that span it, which the rest of the dimensions decide
    in turn; neighbouring slabs with the same result merge. A tiling of n boxes costs O(n log n)."""
    clipped = []
    for b in parts:
        c = tuple((max(x0, y0), min(x1, y1)) for (x0, x1), (y0, y1) in zip(box, b))
        if not _empty(c):
            clipped.append(c)
    if _empty(box):
        return []
    return [tuple(g) for g in _uncovered(list(box), clipped, 0)]


def _uncovered(box: list[tuple[int, int]], parts: list[Box], d: int) -> list[list[tuple[int, int]]]:
    if not parts:
        return [box[d:]]
    if d == len(box):
        return []
    lo, hi = box[d]
    cuts = sorted({lo, hi, *(p[d][0] for p in parts), *(p[d][1] for p in parts)})
    starts = sorted(parts, key=lambda p: p[d][0])
    out: list[list[tuple[int, int]]] = []
    prev: list[list[tuple[int, int]]] | None = None
    prev_lo = lo
    k = 0
    active: list[Box] = []
    for a, c in itertools.pairwise(cuts):
        while k < len(starts) and starts[k][d][0] <= a:
            active.append(starts[k])
            k += 1
        active = [p for p in active if p[d][1] > a]
        inner = _uncovered(box, [p for p in active if p[d][1] >= c], d + 1)
        if prev is not None and inner != prev:
            out.extend([(prev_lo, a), *g] for g in prev)
            prev_lo = a
        elif prev is None:
            prev_lo = a
        prev = inner
    if prev is not None:
        out.extend([(prev_lo, hi), *g] for g in prev)
    return out


def uncovered_runs(want: Runs, parts: Iterable[Runs]) -> Runs:
    """The parts of the sorted flat intervals `want` that no interval of `parts` covers."""
    cover = sorted(iv for p in parts for iv in p)
    merged: Runs = []
    for lo, hi in cover:
        if merged and lo <= merged[-1][1]:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    out: Runs = []
    starts = [lo for lo, _ in merged]
    for lo, hi in want:
        k = max(bisect.bisect_right(starts, lo) - 1, 0)
        cur = lo
        while cur < hi:
            while k < len(merged) and merged[k][1] <= cur:
                k += 1
            if k < len(merged) and merged[k][0] <= cur:
                cur = merged[k][1]
                continue
            end = min(merged[k][0], hi) if k < len(merged) else hi
            out.append((cur, end))
            cur = end
    return out


class _BufferIndex:
    """The writes of one buffer by their interval in one dimension (or flat offsets), for the
    writes that overlap a read box: `prefix_hi[k]` is the largest end among the first k+1, so a
    query walks back only while an earlier write can still reach it."""

    def __init__(self, writes: list[_Write], dim: int | None) -> None:
        self.dim = dim
        keyed = sorted(writes, key=lambda w: (self._interval(w.box, w.runs), w.node))
        ivs = [self._interval(w.box, w.runs) for w in keyed]
        self.writes = keyed
        self.los = [iv[0] for iv in ivs]
        self.his = [iv[1] for iv in ivs]
        self.prefix_hi = list(itertools.accumulate(self.his, max))

    def _interval(self, box: Box, flat_runs: Runs | None) -> tuple[int, int]:
        if self.dim is not None:
            return box[self.dim]
        if not flat_runs:
            return 0, 1  # rank 0: the one element
        return flat_runs[0][0], flat_runs[-1][1]

    def overlapping(self, lo: int, hi: int) -> list[_Write]:
        """The writes whose interval meets [lo, hi)."""
        out = []
        k = bisect.bisect_left(self.los, hi) - 1
        while k >= 0 and self.prefix_hi[k] > lo:
            if self.his[k] > lo:
                out.append(self.writes[k])
            k -= 1
        return out


def ancestors_among(reach: Reach, r: int, nodes: Iterable[int]) -> set[int]:
    """The instances of `nodes` (each submitted before `r`) from which a path reaches `r`: the
    ancestor bitset of `r` when `reach` keeps bitsets, else one backward search from `r` that
    never leaves the ids from the lowest of `nodes` on nor the levels from the lowest of theirs."""
    want = {u for u in nodes if u < r}
    if not want:
        return set()
    if reach.anc is not None:
        bits = reach.anc[r]
        if len(want) <= 32:
            return {u for u in want if bits >> u & 1}
        digits = bin(bits)[:1:-1]  # bit u is digits[u]: one pass over the bitset, not one shift per node
        return {u for u in want if u < len(digits) and digits[u] == "1"}
    pred, level = reach.pred, reach.level
    found = want.intersection(pred[r])
    if len(found) == len(want):
        return found
    floor = min(want)
    low = min(level[u] for u in want)
    seen = {r}
    stack = [r]
    while stack:
        v = stack.pop()
        for u in pred[v]:
            if u < floor or u in seen or level[u] < low:
                continue
            seen.add(u)
            if u in want:
                found.add(u)
                if len(found) == len(want):
                    return found
            stack.append(u)
    return found


def _explicit_roots(d: Dispatch, p: Program) -> tuple[frozenset[str], frozenset[str]]:
    """The buffers (roots) `d` names in access clauses (any kind; such a buffer's arguments imply
    nothing) and in `reads` clauses."""
    named: set[str] = set()
    read: set[str] = set()
    for a in d.accesses:
        if a.explicit:
            named.update(roots(p, a.region.tensor))
            if a.kind is AccessKind.READ:
                read.update(roots(p, a.region.tensor))
    return frozenset(named), frozenset(read)


def scratch_buffers(plan: Plan, node: int, explicit: tuple[frozenset[str], frozenset[str]]) -> set[BufferKey]:
    """The buffer instances task `node` passes as `inout` without an access clause and reads no
    other way (no `in` argument, no `reads` clause): the kernel may write them before it reads
    them (the attention's query, which its rope phase writes, and its workspace), so their
    implied reads are not checked."""
    named, read = explicit
    p = plan.program
    inout: set[BufferKey] = set()
    other: set[BufferKey] = set()
    for ab in plan.graph.args.get(node, ()):
        if root(p, ab.tensor) in named:
            continue
        if ab.param.direction is Direction.INOUT:
            inout.add(ab.buffer)
        elif ab.param.direction is Direction.IN:
            other.add(ab.buffer)
    if not inout:
        return inout
    for block in plan.graph.blocks.get(node, ()):
        for tensor, key, _box, _indirect in block.get(AccessKind.READ, ()):
            if root(p, tensor) in read:
                other.add(key)
    return inout - other


def _touches(plan: Plan) -> dict[BufferKey, list[tuple[int, AccessKind, str, Box, int]]]:
    """Allocated buffer -> every distinct (instance, kind, tensor, box, first block) of it,
    non-empty boxes (the implied reads of `scratch_buffers` left out)."""
    p = plan.program
    alloc: dict[str, bool] = {}
    explicit = {d.name: _explicit_roots(d, p) for d in p.dispatches}
    inout = {d.name for d in p.dispatches
             if any(a.region is not None and a.param.direction is Direction.INOUT for a in d.args)}
    out: dict[BufferKey, list[tuple[int, AccessKind, str, Box, int]]] = defaultdict(list)
    instances = plan.graph.instances
    read = AccessKind.READ
    for node, blocks in plan.graph.blocks.items():
        name = instances[node].dispatch
        skip = scratch_buffers(plan, node, explicit[name]) if name in inout else ()
        seen: set[tuple[AccessKind, str, Box, BufferKey]] | None = set() if len(blocks) > 1 else None
        for b, block in enumerate(blocks):
            for kind, items in block.items():
                for tensor, key, box, _indirect in items:
                    is_alloc = alloc.get(key[0])
                    if is_alloc is None:
                        t = p.tensors.get(key[0])
                        is_alloc = alloc[key[0]] = t is not None and t.storage is Storage.ALLOC
                    if not is_alloc or (kind is read and key in skip):
                        continue
                    for lo, hi in box:
                        if lo >= hi:
                            break
                    else:
                        if seen is not None:  # the blocks of a grid: each distinct access once
                            entry = (kind, tensor, box, key)
                            if entry in seen:
                                continue
                            seen.add(entry)
                        out[key].append((node, kind, tensor, box, b))
    return out


def _conflicts(writer: AccessKind, reader: AccessKind) -> bool:
    """A write of kind `writer` unordered with a read of kind `reader` is a race (PG100)."""
    return writer is AccessKind.WRITE or reader is AccessKind.READ


def find_gaps(plan: Plan, reach: Reach) -> list[Gap]:
    """Every read of an allocated buffer with elements no earlier-submitted task writes (module docstring)."""
    p = plan.program
    gaps: list[Gap] = []
    reference = reference_mode("writes-shortcuts")
    for key, touches in _touches(plan).items():
        names = {t for _, _, t, _, _ in touches}
        shapes = {p.tensors[t].shape for t in names}
        boxed = len(shapes) == 1
        writes: list[_Write] = []
        reads: list[tuple[int, AccessKind, str, Box, int]] = []
        for node, kind, tensor, box, block in touches:
            if kind in _WRITES:
                wr = None if boxed else _flat_runs(box, p.tensors[tensor].shape)
                writes.append(_Write(node, kind, tensor, box, wr))
            if kind in _READS:
                reads.append((node, kind, tensor, box, block))
        if not reads:
            continue
        dim = None
        if boxed:
            rank = len(next(iter(shapes)))
            dim = max(range(rank), key=lambda d: (len({w.box[d] for w in writes}), -d)) if rank else None
        buf = _Buffer(writes, boxed, dim)
        for r, kind, tensor, box, block in reads:
            gap = _read_gap(p, reach, key, r, kind, tensor, box, buf, reference)
            if gap is not None:
                gaps.append(attrs.evolve(gap, block=block))
    gaps.sort(key=lambda g: (g.reader, str(g.buffer), g.box))
    return gaps


def _flat_runs(box: Box, shape: tuple[int, ...]) -> Runs:
    """The flat runs of a box (its bounding interval past MAX_RUNS: may cover, never reports)."""
    got = runs(box, shape)
    return got if got is not None else [flat(box, shape)]


#: Earlier writes of a buffer a read tries nearest-first, each alone (a covering ancestor settles
#: it: a chain of writers ordered through dummies), before the index query.
NEAR_WRITES = 16


class _Buffer:
    """The writes of one buffer: by instance, in submission order, and indexed per kind (a write,
    an atomic add) by their interval (`_BufferIndex`)."""

    def __init__(self, writes: list[_Write], boxed: bool, dim: int | None) -> None:
        self.writes, self.boxed, self.dim = writes, boxed, dim
        self.by_node: dict[int, list[_Write]] = defaultdict(list)
        for w in writes:
            self.by_node[w.node].append(w)
        self.order = sorted(writes, key=lambda w: w.node)
        self.nodes = [w.node for w in self.order]
        self._index: dict[AccessKind, _BufferIndex | None] | None = None  # built on the first query

    def covers(self, w: _Write, box: Box, want: Runs) -> bool:
        """True when write `w` alone holds every element of the read (`box`, or its flat runs `want`)."""
        if self.boxed:
            for (o0, o1), (i0, i1) in zip(w.box, box):  # noqa: SIM110  (hot path: no generator)
                if i0 < o0 or o1 < i1:
                    return False
            return True
        return w.runs is not None and not uncovered_runs(want, [w.runs])

    def candidates(self, r: int, box: Box, want: Runs, kind: AccessKind) -> list[_Write]:
        """The writes of `kind` submitted before `r` whose interval meets the read's."""
        if self._index is None:
            self._index = {}
            for k in _WRITES:
                of_kind = [w for w in self.writes if w.kind is k]
                self._index[k] = _BufferIndex(of_kind, self.dim) if of_kind else None
        idx = self._index[kind]
        if idx is None:
            return []
        if self.boxed:
            lo, hi = box[self.dim] if self.dim is not None else (0, 1)
        else:
            lo, hi = want[0][0], want[-1][1]
        return [w for w in idx.overlapping(lo, hi) if w.node < r]


def _read_gap(p: Program, reach: Reach, key: BufferKey, r: int, kind: AccessKind, tensor: str, box: Box,
              buf: _Buffer, reference: bool = False) -> Gap | None:
    """The Gap of one read, or None when earlier writes (ancestors, or racing ones) cover it.

    Cheapest first: a covering write of a direct predecessor; one of the NEAR_WRITES nearest
    earlier writes that covers and is an ancestor; the plain writes that meet the read (a seed
    under a thousand atomic adds settles an accumulator's read without the adds); then every
    write and atomic add that meets it."""
    shape = p.tensors[tensor].shape
    boxed = buf.boxed
    want: Runs = [] if boxed else (runs(box, shape) or [])
    if not boxed and not want:
        return None  # too many runs to list: not checked
    if reference:  # PGRAPH_REFERENCE=1: every earlier write, each ancestor asked alone
        cands = [w for w in buf.writes if w.node < r]
        before = {w.node for w in cands if reach.before(w.node, r)}
        return _gap(p, key, r, kind, tensor, box, cands, before, boxed, want)
    preds = reach.pred[r]
    direct = preds if len(preds) <= len(buf.by_node) else [u for u in buf.by_node if u in set(preds)]
    for u in direct:
        for w in buf.by_node.get(u, ()):
            if buf.covers(w, box, want):
                return None
    k = bisect.bisect_left(buf.nodes, r) - 1
    for w in buf.order[max(k - NEAR_WRITES + 1, 0):k + 1][::-1]:
        if buf.covers(w, box, want) and reach.before(w.node, r):
            return None
    cands = buf.candidates(r, box, want, AccessKind.WRITE)
    before = ancestors_among(reach, r, {w.node for w in cands})
    mine = [w for w in cands if w.node in before]
    if mine and (not uncovered(box, [w.box for w in mine]) if boxed
                 else not uncovered_runs(want, [w.runs for w in mine if w.runs])):
        return None
    atomics = buf.candidates(r, box, want, AccessKind.ATOMIC)
    before |= ancestors_among(reach, r, {w.node for w in atomics})
    return _gap(p, key, r, kind, tensor, box, cands + atomics, before, boxed, want)


def _gap(p: Program, key: BufferKey, r: int, kind: AccessKind, tensor: str, box: Box, cands: list[_Write],
         before: set[int], boxed: bool, want: Runs) -> Gap | None:
    """The Gap of a read given the earlier writes that may meet it (`cands`) and which of them
    are its ancestors (`before`), or None when they (or racing ones) cover it."""
    mine = [w for w in cands if w.node in before]
    if boxed:
        missing = uncovered(box, [w.box for w in mine])
        if missing:
            racing = [w.box for w in cands if w.node not in before and _conflicts(w.kind, kind)]
            missing = [g for m in missing for g in uncovered(m, racing)] if racing else missing
        if not missing:
            return None
        return Gap(r, kind, tensor, box, key, tuple(missing), (), _writers(mine, box, boxed, p, tensor))
    gap = uncovered_runs(want, [w.runs for w in mine if w.runs])
    if gap:
        gap = uncovered_runs(gap, [w.runs for w in cands if w.node not in before and w.runs
                                   and _conflicts(w.kind, kind)])
    if not gap:
        return None
    return Gap(r, kind, tensor, box, key, (), tuple(gap), _writers(mine, box, boxed, p, tensor))


def _writers(mine: list[_Write], box: Box, boxed: bool, p: Program, tensor: str) -> tuple[tuple[int, str, Box], ...]:
    """(instance, tensor, part of the read box it writes) of each covering ancestor, ascending."""
    out = []
    for w in sorted(mine, key=lambda w: (w.node, w.box)):
        if boxed:
            part = tuple((max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(w.box, box))
            if not _empty(part):
                out.append((w.node, tensor, part))
        else:
            out.append((w.node, w.tensor, w.box))
    return tuple(out)


# ---- reporting --------------------------------------------------------------------------------


def region_text(tensor: str, box: Box, shape: tuple[int, ...]) -> str:
    """`normed0[:, 5118:5120]`: a box of a tensor, a whole dimension written `:`."""
    dims = [":" if (lo, hi) == (0, n) else f"{lo}:{hi}" for (lo, hi), n in zip(box, shape)]
    return f"{tensor}[{', '.join(dims)}]" if dims else tensor


def access_span(d: Dispatch, tensor: str, p: Program, kinds: tuple[AccessKind, ...]) -> Span:
    """Where dispatch `d` states an access of `tensor` (a name of its buffer) of one of `kinds`."""
    want = root(p, tensor)
    for acc in d.accesses:
        if acc.kind in kinds and (acc.region.tensor == tensor or root(p, acc.region.tensor) == want):
            return acc.span
    for arg in d.args:
        if arg.region is not None and (arg.region.tensor == tensor or root(p, arg.region.tensor) == want):
            return arg.span
    return d.span


def tiling_note(plan: Plan, gap: Gap, writer_dispatch: str, nodes: Sequence[int]) -> str | None:
    """Why a tiling leaves the gap, when it does: the writes of `writer_dispatch` (its instances
    `nodes`) on the buffer are equal tiles from 0 along one dimension that stop short of the extent."""
    if not gap.missing:
        return None
    p, g = plan.program, plan.graph
    shape = p.tensors[gap.tensor].shape
    first = gap.missing[0]
    dims = [d for d, (lo, hi) in enumerate(first) if (lo, hi) != (0, shape[d])]
    if len(dims) != 1:
        return None
    d = dims[0]
    tiles = sorted({acc.box[d] for node in nodes
                    for block in g.blocks.get(node, []) for kind in _WRITES for acc in block.get(kind, [])
                    if acc.buffer == gap.buffer and len(acc.box) == len(shape)})
    if len(tiles) < 2 or tiles[0][0] != 0:
        return None
    width = tiles[0][1] - tiles[0][0]
    if any(hi - lo != width or lo != k * width for k, (lo, hi) in enumerate(tiles)):
        return None
    end = tiles[-1][1]
    if end >= shape[d] or end != first[d][0]:
        return None
    return (f"'{writer_dispatch}' writes {len(tiles)} tiles of {width} in dimension {d} of {gap.tensor}: "
            f"{len(tiles)} x {width} = {end} of its {shape[d]} (a tile count that does not divide the extent "
            f"leaves {shape[d] - end})")


class DefiniteWritesPass(Pass):
    """PG122: a task reads elements of an allocated buffer that no task ordered before it writes
    (module docstring); one diagnostic per reader dispatch and buffer."""

    name = "definite-writes"
    requires = (Reach,)
    produces = (DefiniteWrites,)

    def run(self, plan: Plan) -> None:
        gaps = find_gaps(plan, plan.get(Reach))
        plan.put(DefiniteWrites(gaps))
        groups: dict[tuple[str, str], list[Gap]] = defaultdict(list)
        for gap in gaps:
            groups[(plan.graph.instances[gap.reader].dispatch, gap.buffer[0])].append(gap)
        members: dict[str, list[int]] = defaultdict(list)
        if gaps:
            for inst in plan.graph.instances:
                members[inst.dispatch].append(inst.id)
        for (_dispatch, _buffer), found in groups.items():
            self.report(plan, found, members)

    @staticmethod
    def report(plan: Plan, found: list[Gap], members: dict[str, list[int]]) -> None:
        p, g = plan.program, plan.graph
        gap = found[0]
        inst = g.instances[gap.reader]
        d = p.dispatch(inst.dispatch)
        shape = p.tensors[gap.tensor].shape
        verb = "reads" if gap.kind is AccessKind.READ else "atomically adds to (reads)"
        if gap.missing:
            holes = [region_text(gap.tensor, m, shape) for m in gap.missing]
        else:
            holes = [f"elements {lo}..{hi} of buffer {gap.buffer[0]}" for lo, hi in gap.flat_missing]
        hole = holes[0] + (f" and {len(holes) - 1} more part(s)" if len(holes) > 1 else "")
        tasks = sum(g.instances[x].weight for x in {x.reader for x in found})  # the real tasks they stand for
        more = f" ({tasks:,} reading tasks)" if tasks > 1 else ""
        who = f"block {gap.block} of '{inst.label}'" if inst.blocks > 1 else f"'{inst.label}'"
        message = (f"{who} {verb} {region_text(gap.tensor, gap.box, shape)}, but no task ordered before "
                   f"it writes {hole}{more}")
        notes: list[Note] = []
        by_dispatch: dict[str, list[tuple[int, str, Box]]] = defaultdict(list)
        for node, tensor, part in gap.writers:
            by_dispatch[g.instances[node].dispatch].append((node, tensor, part))
        for name, parts in by_dispatch.items():
            wd = p.dispatch(name)
            shown = ", ".join(region_text(t, b, p.tensors[t].shape) for _, t, b in parts[:3])
            extra = f" and {len(parts) - 3} more" if len(parts) > 3 else ""
            notes.append(Note(f"'{g.instances[parts[0][0]].label}' writes the rest before it: {shown}{extra}",
                              access_span(wd, parts[0][1], p, _WRITES)))
            why = tiling_note(plan, gap, name, members[name])
            if why:
                notes.append(Note(why))
        if not gap.writers:
            notes.append(Note(f"no task ordered before '{inst.label}' writes any of "
                              f"{region_text(gap.tensor, gap.box, shape)}"))
        plan.bag.add(
            "PG122", message, access_span(d, gap.tensor, p, (gap.kind,)), notes,
            hint="an allocation holds stale heap contents until a task writes it: extend "
                 "the writes that precede the read to cover the gap, or write the gap with a task the reader "
                 "depends on; a tensor the caller fills is declared `external`")

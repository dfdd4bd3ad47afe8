"""Data hazards: races (PG100), manual-scope boundaries (PG101), SPMD block overlap (PG102)
and false serialization of disjoint writers in auto scopes (PG103).

A race is two task instances whose per-block regions of one buffer overlap, at least one
writing, with no path between them in the instance graph. Paths include inferred edges,
which exist only between auto-scope tasks (simpler `compute_task_fanin`: RAW and InOut
WAW, never WAR), so an unordered write-after-read in an auto scope is a race too.
Atomic-add writers of one accumulator need no order among themselves.
"""

from __future__ import annotations

import array
import bisect
import itertools
import sys
from collections import defaultdict
from typing import Any, Literal, NamedTuple

import attrs

from pgraph import records
from pgraph.diagnostics import Fix, Note
from pgraph.expr import free_vars
from pgraph.fastpath import reference_mode
from pgraph.ir.instances import BlockAccesses, Box, BufferKey, Instance, box_intersection, flat, overlap
from pgraph.ir.program import Dispatch, Program
from pgraph.ir.queries import root
from pgraph.kinds import AccessKind, Direction, InternalError, ScopeMode, TaskKind
from pgraph.plan import race_frontier
from pgraph.plan.base import Fact, Pass, Plan
from pgraph.plan.fixes import add_dep, declare_taskids, fix, submitted_before, widen_selection
from pgraph.plan.reach import Reach, ancestors
from pgraph.source import Span

KIND_WORD = {AccessKind.READ: "reads", AccessKind.WRITE: "writes", AccessKind.ATOMIC: "atomically adds to"}

#: (kind, box, tensor name) of one instance's access to one buffer.
Touch = tuple[AccessKind, Box, str]


@records.value
@attrs.frozen(repr=False, eq=False)
class Conflict:
    """Two instances (a < b in submission order) whose accesses to one buffer overlap, one writing."""

    first: int
    second: int
    first_kind: AccessKind
    first_box: Box
    first_tensor: str
    second_kind: AccessKind
    second_box: Box
    second_tensor: str


@records.value
@attrs.frozen(repr=False, eq=False)
class Conflicts(Fact):
    """Every conflicting instance pair, ordered by buffer and pair; independent of the edges (so
    mutation tests reuse it). Pair k is `first[k]` < `second[k]` on `buffers[buffer[k]]`; a
    --full prefill has about 1.6 million, so they are kept as columns and `conflict(plan, k)`
    describes one (the first conflicting accesses, in access order) when a race needs it."""

    first: array.array
    second: array.array
    buffer: array.array
    buffers: list[BufferKey]
    #: buffer index -> its touches, for the buffers whose pairs are too many to list (more than
    #: PAIR_LIMIT estimated): `find_races` asks `race_frontier.frontier_races` for their races
    dense: dict[int, list[NodeTouch]] = attrs.field(factory=dict)

    def __len__(self) -> int:
        return len(self.first)

    def conflict(self, plan: Plan, k: int) -> Conflict:
        """The Conflict record of pair k."""
        return conflict_of(plan, self.first[k], self.second[k], self.buffers[self.buffer[k]])

    def records(self, plan: Plan) -> list[Conflict]:
        """Every Conflict record (for tests and small graphs)."""
        return [self.conflict(plan, k) for k in range(len(self))]


def conflict_of(plan: Plan, a: int, b: int, key: BufferKey) -> Conflict:
    """The Conflict record of instances a < b on buffer `key`: their first conflicting touches,
    in access order."""
    hit = _conflict(node_touches(plan, a, key), node_touches(plan, b, key), plan.program)
    if hit is None:
        raise InternalError(f"instances {a} and {b} were paired without a conflicting access")
    (ka, ba, ta), (kb, bb, tb) = hit
    return Conflict(a, b, ka, ba, ta, kb, bb, tb)


@records.value
@attrs.frozen(repr=False, eq=False)
class Race:
    """An unordered conflicting pair; `boundary` when one side is in a manual scope and the other is not."""

    conflict: Conflict
    boundary: bool
    buffer: BufferKey | None = None

    @property
    def first(self) -> int:
        """The earlier instance."""
        return self.conflict.first

    @property
    def second(self) -> int:
        """The later instance."""
        return self.conflict.second


@records.value
@attrs.frozen(repr=False, eq=False)
class Races(Fact):
    """Every race the planner found (reported per dispatch pair and tensor as PG100/PG101)."""

    races: list[Race]


#: (instance, kind, box, tensor name) of one touch of a buffer.
NodeTouch = tuple[int, AccessKind, Box, str]


def touches_by_buffer(plan: Plan) -> dict[BufferKey, list[NodeTouch]]:
    """buffer -> every distinct touch of it, by instance in id order and then in access order."""
    out: dict[BufferKey, list[NodeTouch]] = defaultdict(list)
    for node, blocks in plan.graph.blocks.items():
        if len(blocks) == 1:
            seen_one: set[tuple[AccessKind, Box, str, BufferKey]] = set()
            for kind, items in blocks[0].items():
                for tensor, key, box, _indirect in items:
                    if len(items) > 1 or len(seen_one):
                        entry = (kind, box, tensor, key)
                        if entry in seen_one:
                            continue
                        seen_one.add(entry)
                    else:
                        seen_one.add((kind, box, tensor, key))
                    out[key].append((node, kind, box, tensor))
            continue
        seen: set[tuple[AccessKind, Box, str, BufferKey]] = set()
        for block in blocks:
            for kind, items in block.items():
                for tensor, key, box, _indirect in items:
                    entry = (kind, box, tensor, key)
                    if entry not in seen:
                        seen.add(entry)
                        out[key].append((node, kind, box, tensor))
    return out


def node_touches(plan: Plan, node: int, buffer: BufferKey) -> list[Touch]:
    """The touches of one instance on one buffer: distinct (kind, box, tensor), in block and access order."""
    out: list[Touch] = []
    seen: set[Touch] = set()
    for block in plan.graph.blocks.get(node, []):
        for kind, items in block.items():
            for tensor, key, box, _indirect in items:
                entry = (kind, box, tensor)
                if key == buffer and entry not in seen:
                    seen.add(entry)
                    out.append(entry)
    return out


def _conflict(a: list[Touch], b: list[Touch], p: Program) -> tuple[Touch, Touch] | None:
    for ta in a:
        for tb in b:
            if ta[0] is AccessKind.READ and tb[0] is AccessKind.READ:
                continue
            if ta[0] is AccessKind.ATOMIC and tb[0] is AccessKind.ATOMIC:
                continue
            if overlap(ta[1], ta[2], tb[1], tb[2], p):
                return ta, tb
    return None


#: Kinds whose touches may conflict: a write with anything, an atomic add with a read
#: (atomic adds of one accumulator form one class: they need no order among themselves).
_PARTNERS = {
    AccessKind.WRITE: (AccessKind.READ, AccessKind.WRITE, AccessKind.ATOMIC),
    AccessKind.ATOMIC: (AccessKind.WRITE, AccessKind.READ),
    AccessKind.READ: (AccessKind.WRITE, AccessKind.ATOMIC),
}


class _Item(NamedTuple):
    lo: int          # the swept interval
    hi: int
    lo2: int         # a second interval that must overlap too (a second dimension, else the same)
    hi2: int
    node: int
    kind: AccessKind
    box: Box
    tensor: str


def _sweep_cost(ivs: list[tuple[int, int]]) -> int:
    """About how many pairs of the intervals `ivs` overlap: what sweeping them would examine."""
    los = sorted(lo for lo, _ in ivs)
    return sum(bisect.bisect_left(los, hi) - bisect.bisect_left(los, lo) for lo, hi in ivs)


def _sweep(items: list[_Item], pairs: set[tuple[int, int]], p: Program, cross_names: bool) -> None:
    """Add to `pairs` every (a, b), a < b, of two instances with overlapping touches of kinds
    that conflict, among `items` (their intervals: dimensions of one tensor, or flat offsets
    across views). With `cross_names`, only touches of different tensor names are paired
    (same-name pairs are swept per dimension). Active touches are kept per kind, so
    read-read and atomic-atomic pairs are never formed."""
    items.sort(key=lambda it: (it.lo, it.node))
    active: dict[AccessKind, list[_Item]] = {AccessKind.READ: [], AccessKind.WRITE: [], AccessKind.ATOMIC: []}
    for it in items:
        lo, lo2, hi2, node = it.lo, it.lo2, it.hi2, it.node
        for kind in _PARTNERS[it.kind]:
            alive = [o for o in active[kind] if o.hi > lo]
            active[kind] = alive
            for o in alive:
                if o.node == node or o.lo2 >= hi2 or lo2 >= o.hi2:
                    continue
                a, b = (o.node, node) if o.node < node else (node, o.node)
                if (a, b) in pairs:
                    continue
                if cross_names:
                    if o.tensor != it.tensor and overlap(o.box, o.tensor, it.box, it.tensor, p):
                        pairs.add((a, b))
                    continue
                # one tensor, no empty side (filtered): the boxes overlap where every dimension does
                for (x0, x1), (y0, y1) in zip(o.box, it.box):
                    if x0 >= y1 or y0 >= x1:
                        break
                else:
                    pairs.add((a, b))
        active[it.kind].append(it)


#: Touches of one tensor name from which the sweep's dimensions are chosen by their overlap
#: (`_sweep_cost`); below, the first two are swept (the pairs are the same either way).
SWEEP_CHOICE_TOUCHES = 32

#: Touches of one tensor name from which its pairs are found with NumPy (`_numpy_pairs`): the
#: import (~0.1 s) pays off only on big buffers (a --full prefill's caches have 15,360); once
#: NumPy is loaded, from NUMPY_LOADED_TOUCHES on.
NUMPY_TOUCHES = 2048
NUMPY_LOADED_TOUCHES = 64


def conflicting_keys(touches: list[NodeTouch], p: Program, numpy: bool | None = None) -> Any:
    """Instance pairs (a < b) of one buffer with overlapping touches of conflicting kinds, as
    sorted keys a << 32 | b (instance ids are below 2**31): a list, or a NumPy int64 array when
    a name was paired with NumPy.

    The same pairs as testing every writer against every other instance, found by sweeping
    the touches' intervals: per tensor name in the dimension whose intervals overlap least,
    filtered by the next best (a box overlaps only where every dimension does), and flat
    element offsets between views of one buffer with different names (`instances.overlap`
    compares those flat). A name with at least NUMPY_TOUCHES touches (or any, with
    `numpy=True`; none with `numpy=False`) is paired by `_numpy_pairs` instead of the sweep.
    """
    by_name: dict[str, list[NodeTouch]] = defaultdict(list)
    for t in touches:
        for lo, hi in t[2]:
            if lo >= hi:
                break  # an empty side touches nothing
        else:
            by_name[t[3]].append(t)
    pairs: set[tuple[int, int]] = set()
    vectored = []
    threshold = NUMPY_LOADED_TOUCHES if "numpy" in sys.modules else NUMPY_TOUCHES
    fast = not reference_mode("race-numpy")  # PGRAPH_REFERENCE=1: the sweep for every name (docs/architecture.md)
    for name, named in by_name.items():
        rank = len(named[0][2])
        if numpy or (numpy is None and fast and len(named) >= threshold):
            try:
                vectored.append(_numpy_pairs(named, rank))
                continue
            except OverflowError:  # a coordinate past int64 (a huge tensor): the sweep's exact ints
                pass
        if rank == 0:  # every touch covers the one element
            items = [_Item(0, 1, 0, 1, n, kind, box, name) for n, kind, box, _ in named]
        else:
            d1 = d2 = 0
            if rank > 1 and len(named) < SWEEP_CHOICE_TOUCHES:
                d1, d2 = 0, 1  # any two dimensions give the same pairs; few touches, little to gain
            elif rank > 1:
                dims = sorted(range(rank), key=lambda d: (_sweep_cost([t[2][d] for t in named]), d))
                d1, d2 = dims[0], dims[1]
            items = [_Item(box[d1][0], box[d1][1], box[d2][0], box[d2][1], n, kind, box, name)
                     for n, kind, box, _ in named]
        _sweep(items, pairs, p, cross_names=False)
    if len(by_name) > 1:
        flat_items = []
        for name, named in by_name.items():
            shape = p.tensors[name].shape
            for n, kind, box, _ in named:
                lo, hi = flat(box, shape)
                flat_items.append(_Item(lo, hi, lo, hi, n, kind, box, name))
        _sweep(flat_items, pairs, p, cross_names=True)
    keys = sorted(a << 32 | b for a, b in pairs)
    if not vectored:
        return keys
    import numpy as np

    return np.unique(np.concatenate([np.array(keys, dtype=np.int64), *vectored]))


#: candidate pairs `_numpy_pairs` tests at a time (bounds its temporary arrays to ~100 MB)
_CHUNK = 2_000_000


def _numpy_pairs(named: list[NodeTouch], rank: int) -> Any:
    """The conflicting pairs among the touches of one tensor name (non-empty boxes), as sorted
    unique int64 keys a << 32 | b: `_sweep` with arrays.

    Conflicting kinds are a write with anything and an atomic add with a read, so the pairs
    come from two products, writes x all and atomic adds x reads. Each product takes the pairs
    that overlap in the dimension `_sweep` would sweep, as ranges of a sorted array: those
    whose B interval starts inside the A interval, and those whose A interval starts strictly
    inside the B interval (disjoint, together every overlapping pair); then keeps the pairs of
    two instances whose boxes overlap in every dimension.
    """
    import numpy as np

    n = len(named)
    node = np.fromiter((t[0] for t in named), dtype=np.int64, count=n)
    code = {AccessKind.READ: 0, AccessKind.WRITE: 1, AccessKind.ATOMIC: 2}
    kind = np.fromiter((code[t[1]] for t in named), dtype=np.int8, count=n)
    if rank:
        chain = itertools.chain.from_iterable
        box = np.fromiter(chain(chain(t[2] for t in named)), dtype=np.int64, count=n * rank * 2).reshape(n, rank, 2)
        cost = [_numpy_sweep_cost(box[:, d, 0], box[:, d, 1]) for d in range(rank)]
        d1 = min(range(rank), key=lambda d: (cost[d], d))
        lo, hi = box[:, d1, 0], box[:, d1, 1]
    else:
        box = np.zeros((n, 0, 2), dtype=np.int64)
        lo, hi = np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64)
    everyone = np.arange(n)
    found = [np.zeros(0, dtype=np.int64)]
    for a_set, b_set in ((everyone[kind == 1], everyone), (everyone[kind == 2], everyone[kind == 0])):
        if not len(a_set) or not len(b_set):
            continue
        sides: tuple[tuple[Any, Any, bool, Literal["left", "right"]], ...] = (
            (a_set, b_set, True, "left"), (b_set, a_set, False, "right"))
        for src, other, first_side, start_side in sides:
            order = other[np.argsort(lo[other], kind="stable")]
            sorted_lo = lo[order]
            begin = np.searchsorted(sorted_lo, lo[src], side=start_side)
            end = np.searchsorted(sorted_lo, hi[src], side="left")
            count = np.maximum(end - begin, 0)
            total = np.cumsum(count)
            done = 0
            while done < len(src):  # chunks of about _CHUNK candidates
                base = int(total[done - 1]) if done else 0
                stop = int(np.searchsorted(total, base + _CHUNK, side="right"))
                stop = max(stop, done + 1)
                c = count[done:stop]
                i = np.repeat(src[done:stop], c)
                offs = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c) + np.repeat(begin[done:stop], c)
                j = order[offs]
                if not first_side:
                    i, j = j, i  # keep i on the A side
                keep = node[i] != node[j]
                for d in range(rank):
                    keep &= (box[i, d, 0] < box[j, d, 1]) & (box[j, d, 0] < box[i, d, 1])
                ni, nj = node[i[keep]], node[j[keep]]
                found.append(np.minimum(ni, nj) << 32 | np.maximum(ni, nj))
                done = stop
    return np.unique(np.concatenate(found))


def _numpy_sweep_cost(lo: Any, hi: Any) -> int:
    """`_sweep_cost` of the intervals (lo[k], hi[k]), with arrays."""
    import numpy as np

    los = np.sort(lo)
    return int((np.searchsorted(los, hi, side="left") - np.searchsorted(los, lo, side="left")).sum())


#: Racing instance pairs kept per (buffer, earlier dispatch, later dispatch) beyond the
#: RACE_WITNESSES a diagnostic may count: one more says that there are more (PG100/PG101
#: then say "more than RACE_WITNESSES instance pairs").
RACE_WITNESSES = 100

#: A buffer whose conflicting pairs `pair_estimate` puts above this is not listed pair by pair:
#: `race_frontier.frontier_races` finds its races from its touches in submission order.
PAIR_LIMIT = 100_000


def pair_estimate(touches: list[NodeTouch], p: Program) -> int:
    """An upper bound (up to ties) on the overlapping conflicting pairs of one buffer's touches:
    per tensor name the fewest pairs overlapping in one dimension (a write with any touch, an
    atomic add with a read), plus the pairs of flat intervals across names."""
    by_name: dict[str, list[NodeTouch]] = defaultdict(list)
    for t in touches:
        by_name[t[3]].append(t)
    total = 0
    for named in by_name.values():
        rank = len(named[0][2])
        if rank == 0:
            total += _kind_cost([(t[1], 0, 1) for t in named])
        else:
            total += min(_kind_cost([(t[1], *t[2][d]) for t in named]) for d in range(rank))
    if len(by_name) > 1:
        shapes = {name: p.tensors[name].shape for name in by_name}
        total += _kind_cost([(t[1], *flat(t[2], shapes[t[3]])) for t in touches])
    return total


def _kind_cost(items: list[tuple[AccessKind, int, int]]) -> int:
    """Pairs of conflicting kinds among the intervals (kind, lo, hi) where one starts inside the other."""
    los: dict[AccessKind, list[int]] = {k: sorted(lo for kind, lo, _ in items if kind is k) for k in AccessKind}
    if not los[AccessKind.WRITE] and not los[AccessKind.ATOMIC]:
        return 0
    total = 0
    for kind, lo, hi in items:
        for other in _PARTNERS[kind]:
            col = los[other]
            if col:
                total += bisect.bisect_left(col, hi) - bisect.bisect_left(col, lo)
    return total


def conflicts(plan: Plan) -> Conflicts:
    """Every conflicting instance pair (a < b): overlapping regions of one buffer, one writing.

    Computed once per plan (a Conflicts fact): it does not depend on the edges. Ordered by
    buffer, then pair.
    """
    if plan.has(Conflicts):
        return plan.get(Conflicts)
    p = plan.program
    first, second, buffer = array.array("q"), array.array("q"), array.array("q")
    buffers: list[BufferKey] = []
    dense: dict[int, list[NodeTouch]] = {}
    listed = reference_mode("race-frontier")  # PGRAPH_REFERENCE=1: every buffer's pairs listed (docs/architecture.md)
    for key, touches in sorted(touches_by_buffer(plan).items(), key=lambda kv: str(kv[0])):
        if not listed and pair_estimate(touches, p) > PAIR_LIMIT:
            dense[len(buffers)] = touches
            buffers.append(key)
            continue
        keys = conflicting_keys(touches, p)
        if not len(keys):
            continue
        buffers.append(key)
        if isinstance(keys, list):
            first.extend(k >> 32 for k in keys)
            second.extend(k & 0xFFFFFFFF for k in keys)
            buffer.extend(itertools.repeat(len(buffers) - 1, len(keys)))
        else:  # NumPy int64 keys: the columns are int64 too
            import numpy as np

            first.frombytes((keys >> 32).astype(np.int64).tobytes())
            second.frombytes((keys & 0xFFFFFFFF).astype(np.int64).tobytes())
            buffer.frombytes(np.full(len(keys), len(buffers) - 1, dtype=np.int64).tobytes())
    fact = Conflicts(first, second, buffer, buffers, dense)
    plan.put(fact)
    return fact


def find_races(plan: Plan, reach: Reach | None = None) -> list[Race]:
    """The unordered conflicting instance pairs (the whole analysis, no reporting), by buffer
    and pair; at most RACE_WITNESSES + 1 per (buffer, earlier dispatch, later dispatch).

    `reach` defaults to the happens-before of the graph as it is now (so a caller that edits
    `plan.graph.graph` gets the races of the edited graph). A listed buffer's witnesses are its
    first racing pairs; a dense buffer's (`race_frontier`) are all of them when there are at most
    RACE_WITNESSES, else RACE_WITNESSES + 1 of them.
    """
    reach = reach or ancestors(plan)
    manual = {s.id for s in plan.program.scopes if s.mode is ScopeMode.MANUAL}
    found = conflicts(plan)
    instances = plan.graph.instances
    if "numpy" in sys.modules and len(found) >= 10_000 and not reference_mode("reach-mask"):  # the arrays' way (NumPy is loaded)
        import numpy as np

        ordered = reach.ordered_mask(np.frombuffer(found.first, dtype=np.int64),
                                     np.frombuffer(found.second, dtype=np.int64))
        unordered = np.nonzero(~ordered)[0].tolist()
    else:
        unordered = [k for k, ok in enumerate(reach.ordered_pairs(zip(found.first, found.second))) if not ok]
    kept: dict[tuple[int, str, str], int] = defaultdict(int)
    picked: list[tuple[int, int, int]] = []  # (buffer index, first, second)
    for k in unordered:
        a, b, i = found.first[k], found.second[k], found.buffer[k]
        group = (i, instances[a].dispatch, instances[b].dispatch)
        if kept[group] <= RACE_WITNESSES:
            kept[group] += 1
            picked.append((i, a, b))
    if found.dense:
        pred = plan.graph.pred

        def before(a: int, b: int) -> bool:
            return a in pred[b] or reach.before(a, b)

        def dispatch_of(n: int) -> str:
            return instances[n].dispatch

        for i, touches in found.dense.items():
            picked.extend((i, a, b) for a, b in
                          race_frontier.frontier_races(touches, plan.program, dispatch_of, before, RACE_WITNESSES))
        picked.sort()
    races = []
    for i, a, b in picked:
        c = conflict_of(plan, a, b, found.buffers[i])
        ia, ib = instances[a], instances[b]
        boundary = ia.scope != ib.scope and (ia.scope in manual or ib.scope in manual)
        races.append(Race(c, boundary, found.buffers[i]))
    return races


def _access_span(d: Dispatch, tensor: str, p: Program) -> Span:
    want = root(p, tensor)
    for acc in d.accesses:
        if acc.region.tensor == tensor or root(p, acc.region.tensor) == want:
            return acc.span
    return d.span


def box_text(box: Box) -> str:
    """`[0:8, 0:64]`."""
    return "[" + ", ".join(f"{lo}:{hi}" for lo, hi in box) + "]"


def overlap_text(c: Conflict, p: Program) -> str:
    """The common elements of a conflict: a box of one tensor, or flat element offsets across views."""
    if c.first_tensor == c.second_tensor:
        return f"{c.first_tensor}{box_text(box_intersection(c.first_box, c.second_box))}"
    fa = flat(c.first_box, p.tensors[c.first_tensor].shape)
    fb = flat(c.second_box, p.tensors[c.second_tensor].shape)
    return f"elements {max(fa[0], fb[0])}..{min(fa[1], fb[1])} of buffer {root(p, c.first_tensor)}"


class RacePass(Pass):
    """PG100/PG101: report unordered conflicting pairs, one diagnostic per dispatch pair and tensor."""

    name = "races"
    requires = (Reach,)
    produces = (Races, Conflicts)

    def run(self, plan: Plan) -> None:
        races = find_races(plan, plan.get(Reach))
        plan.put(Races(races))
        groups: dict[tuple[str, str, str], list[Race]] = defaultdict(list)
        for r in races:
            da = plan.graph.instances[r.first].dispatch
            db = plan.graph.instances[r.second].dispatch
            groups[(da, db, r.conflict.second_tensor)].append(r)
        for (da, db, _tensor), rs in sorted(groups.items()):
            self.report(plan, p_da=da, p_db=db, rs=rs)

    def report(self, plan: Plan, p_da: str, p_db: str, rs: list[Race]) -> None:
        p = plan.program
        r = rs[0]
        c = r.conflict
        ia, ib = plan.graph.instances[r.first], plan.graph.instances[r.second]
        dpa, dpb = p.dispatch(p_da), p.dispatch(p_db)
        # a window-expanded loop shows two iterations: the pairs it finds are real, later
        # iterations hold more (`Options(full=True)` counts them all)
        windowed = not plan.graph.full and any(
            plan.graph.instances[n].weight > 1 for x in rs for n in (x.first, x.second))
        more = (f" (more than {RACE_WITNESSES} instance pairs)" if len(rs) > RACE_WITNESSES else
                f" ({len(rs)} instance pair{'s' if len(rs) > 1 else ''} or more: only two iterations of the "
                "loop are expanded)" if windowed else f" ({len(rs)} instance pairs)" if len(rs) > 1 else "")
        what = (f"'{ib.label}' {KIND_WORD[c.second_kind]} {c.second_tensor}{box_text(c.second_box)} and "
                f"'{ia.label}' {KIND_WORD[c.first_kind]} {c.first_tensor}{box_text(c.first_box)} "
                f"(overlap {overlap_text(c, p)}), with no path between them{more}")
        notes = [Note(f"'{ia.label}' {KIND_WORD[c.first_kind]} {c.first_tensor} here",
                      _access_span(dpa, c.first_tensor, p))]
        fix, edits = race_hint(plan, dpa, dpb, ia, ib, c.first_tensor)
        span = _access_span(dpb, c.second_tensor, p)
        if r.boundary:
            plan.bag.add(
                "PG101", f"across a manual-scope boundary: {what}", span, notes,
                hint=f"the runtime infers no edge into or out of a manual scope (simpler: MANUAL skips creator, "
                     f"lookup and registration); {fix}", fix=edits)
            return
        if p.scopes[ib.scope].mode is ScopeMode.MANUAL:
            why = "in a manual scope only explicit and carried edges order tasks"
        elif c.first_kind is AccessKind.READ:
            why = ("the runtime infers read-after-write and InOut write-after-write, never write-after-read; "
                   "order the writer after the reader with a dep (do not promote the reader to InOut)")
        else:
            why = "no inferred or explicit edge orders them"
        plan.bag.add("PG100", f"race: {what}", span, notes, hint=f"{why}; {fix}", fix=edits)


def _region_vars(d: Dispatch, tensor: str, p: Program) -> set[str]:
    """The names the regions of `d`'s accesses to `tensor` (or a view of its buffer) are written in."""
    want = root(p, tensor)
    out: set[str] = set()
    for acc in d.accesses:
        if acc.region.tensor == tensor or root(p, acc.region.tensor) == want:
            for dim in acc.region.dims or ():
                out |= set().union(*(free_vars(e) for e in (dim.a, dim.b) if e is not None))
    return out


def _own_region(p: Program, d: Dispatch, tensor: str, ia: Instance, ib: Instance) -> str:
    """'give each iteration its own region', unless the region already moves with the loops whose
    iterations race (then the regions of those iterations overlap: make them disjoint)."""
    differ = {p.loops[lid].axis.var for lid, x, y in zip(ia.loops, ia.iters, ib.iters) if x != y}
    moving = sorted(differ & _region_vars(d, tensor, p))
    if moving:
        return (f"make the regions of the iterations disjoint (each iteration has its own region, through "
                f"{', '.join(f'`{v}`' for v in moving)}, but two of them overlap)")
    return "give each iteration its own region"


@records.shared_repr
@attrs.frozen(repr=False, eq=False)
class RacePairs(Fact):
    """The races as (earlier, later) instance pairs by (earlier, later) dispatch: what the hint of
    one dispatch pair's race reads (`race_hint`), built once per plan from its Races."""

    races: Races
    pairs: dict[tuple[str, str], list[tuple[Instance, Instance]]]


def _pairs(plan: Plan) -> dict[tuple[str, str], list[tuple[Instance, Instance]]]:
    """The RacePairs of the plan's Races (built on first use, again when the Races are new)."""
    races = plan.get(Races)
    if plan.has(RacePairs) and plan.get(RacePairs).races is races:
        return plan.get(RacePairs).pairs
    got: dict[tuple[str, str], list[tuple[Instance, Instance]]] = defaultdict(list)
    inst = plan.graph.instances
    for r in races.races:
        a, b = inst[r.first], inst[r.second]
        got[(a.dispatch, b.dispatch)].append((a, b))
    plan.put(RacePairs(races, got))
    return got


def race_hint(plan: Plan, dpa: Dispatch, dpb: Dispatch, ia: Instance, ib: Instance, tensor: str
              ) -> tuple[str, Fix | None]:
    """The fix a race's hint proposes (which must remove the race when applied) and, where it is
    mechanical, its edits. In order of preference: the consumer's dep slice on the producer
    widened to exactly the tiles it misses (`pgraph.plan.fixes.widen_selection`: no new dep, no
    edge beyond the missing ones); the producer added to the consumer's deps (when a dep there
    names the racing task: same iteration of every loop around both, declared before); else
    the structural advice, with no edits."""
    p = plan.program
    producer = dpa.tileset
    if dpa.tileset == dpb.tileset:
        if ia.iters != ib.iters:
            return (f"two iterations of '{producer}' touch the same elements and nothing orders the "
                    f"iterations: {_own_region(p, dpa, tensor, ia, ib)}, or order them with a loop carry "
                    f"(`carry prev = <a task before the loop> then {producer}` and `deps(prev)` on "
                    f"'{producer}')"), None
        return (f"the tasks of '{producer}' are never ordered among themselves: give each task its own "
                "region, accumulate with `atomic_add` into a seeded accumulator, or split the declaration "
                "in two with a dep between them"), None
    if any(dep.target == producer for dep in dpb.deps) and dpa.loops and not set(dpa.loops) <= set(dpb.loops):
        return (f"'{dpb.name}' already depends on '{producer}', but from outside its loop that names the last "
                f"iteration only, and earlier iterations touch the same elements: order the iterations of "
                f"'{producer}' with a loop carry (`carry prev = <a task before the loop> then {producer}` and "
                f"`deps(prev)` on '{producer}') so that the last one waits for all, or "
                f"{_own_region(p, dpa, tensor, ia, ib)}"), None
    wide = widen_selection(plan, dpb, producer, _pairs(plan).get((dpa.name, dpb.name), []))
    if wide is not None:
        edits, text = wide
        return (f"widen the dep of '{dpb.tileset}' on '{producer}' to `{producer}[{text}]`: its slice misses "
                "the tiles it races with, and no other dep or edge is needed"), edits
    fix_text = f"add `{producer}` to the deps of '{dpb.tileset}'"
    outer = dpa.scope not in p.ancestors(dpb.scope)
    if outer:
        fix_text += (f" and declare `taskids {producer}` in a scope enclosing both (its scope has closed "
                     "when the consumer is submitted)")
    order = [d.name for d in p.dispatches]
    same_iteration = set(dpa.loops) <= set(dpb.loops) and all(
        dict(zip(ib.loops, ib.iters)).get(lid) == v for lid, v in zip(ia.loops, ia.iters))
    if not same_iteration or order.index(dpa.name) > order.index(dpb.name) or not submitted_before(plan, producer, dpb):
        if same_iteration:  # some producer tasks are submitted after the consumer (an interleave)
            return (f"order '{ia.label}' before '{ib.label}' with a dep on the producer's tiles it races with "
                    f"(`{producer}[...]`): a dep on all of '{producer}' would name tasks submitted after "
                    f"'{dpb.name}'"), None
        # a dep names the producer of the consumer's own iteration, declared before it: not this one
        return (f"order '{ia.label}' before '{ib.label}': a dep names the task of the consumer's own iteration, "
                f"so carry it across the loop (`carry prev = <a task before the loop> then {producer}` and "
                f"`deps(prev)` on '{dpb.tileset}')"), None
    dep = add_dep(p.tilesets[dpb.tileset], producer)
    if not outer:
        return fix_text, fix(dep)
    common = next(s for s in p.ancestors(dpa.scope) if s in p.ancestors(dpb.scope))
    return fix_text, fix(dep, declare_taskids(p.scopes[common], producer))


class SpmdOverlapPass(Pass):
    """PG102: blocks of one SPMD grid must not touch overlapping regions, one of them writing.

    The blocks of a grid run at once, in no order: a block writing what another block reads or
    writes is a race inside one task. Atomic adds among themselves are exempt (an accumulator),
    and so are sync_start grids: their blocks launch together and synchronise internally (the
    attention extern's SyncAll), so they act as one unit. Indirect accesses are exempt too:
    their box only bounds a scatter or gather whose disjointness rests on the index tensor
    (#762 rope_qkv's KV append through slot_mapping).
    """

    name = "spmd-block-overlap"

    def run(self, plan: Plan) -> None:
        p = plan.program
        done: set[str] = set()
        for inst in plan.graph.instances:
            if inst.kind is not TaskKind.SPMD or inst.dispatch in done or inst.blocks < 2:
                continue
            done.add(inst.dispatch)
            blocks = plan.graph.blocks.get(inst.id, [])
            d = p.dispatch(inst.dispatch)
            if d.sync_start:
                continue  # a sync_start cohort runs as one unit with an internal barrier
            clash = self.first_clash(blocks, p)
            if clash is None:
                continue
            (i, kind_i, tensor_i, box_i), (j, kind_j, tensor_j, box_j) = clash
            names = [a.var for a in d.block_axes]
            if kind_i is AccessKind.WRITE and kind_j is AccessKind.WRITE:
                what = f"both write {tensor_i}{box_text(box_i)}"
            else:
                what = (f"block {i} {KIND_WORD[kind_i]} {tensor_i}{box_text(box_i)} and block {j} "
                        f"{KIND_WORD[kind_j]} {tensor_j}{box_text(box_j)}")
            plan.bag.add(
                "PG102",
                f"blocks {i} and {j} of SPMD grid '{d.name}' ({', '.join(names)}) {what}",
                _access_span(d, tensor_i, p),
                hint="SPMD blocks are never ordered among themselves; touch disjoint slices, accumulate with "
                     "atomic_add into a seeded accumulator, or make the blocks separate tasks with deps",
            )

    @staticmethod
    def first_clash(blocks: list[BlockAccesses], p: Program
                    ) -> tuple[tuple[int, AccessKind, str, Box], tuple[int, AccessKind, str, Box]] | None:
        """The first block pair (i, j), i < j, whose accesses conflict, with the two accesses.

        Same answer as comparing every pair of blocks, without the quadratic cost on large
        grids: per buffer, the reads, writes and atomic adds are each indexed by one dimension
        (`_WriteIndex`), and every access of block i meets only the overlapping accesses it can
        conflict with (reads never meet reads, atomic adds never meet atomic adds).
        """
        accesses: list[list[tuple[AccessKind, str, BufferKey, Box]]] = [
            [(kind, t, k, box) for kind in (AccessKind.WRITE, AccessKind.ATOMIC, AccessKind.READ)
             for t, k, box, indirect in b.get(kind, []) if not indirect]
            for b in blocks]
        names: dict[BufferKey, set[str]] = defaultdict(set)
        groups: dict[tuple[BufferKey, AccessKind], list[tuple[int, str, Box]]] = defaultdict(list)
        for i, accs in enumerate(accesses):
            for kind, t, k, box in accs:
                names[k].add(t)
                groups[(k, kind)].append((i, t, box))
        index = {gk: _WriteIndex(entries, p, len(names[gk[0]]) > 1) for gk, entries in groups.items()}
        partners = {AccessKind.READ: (AccessKind.WRITE, AccessKind.ATOMIC),
                    AccessKind.ATOMIC: (AccessKind.WRITE, AccessKind.READ),
                    AccessKind.WRITE: (AccessKind.WRITE, AccessKind.ATOMIC, AccessKind.READ)}
        # block i meets every block it conflicts with, earlier or later: the first i with a later
        # partner gives the first pair (a pair with an earlier partner was found at that partner)
        for i, accs in enumerate(accesses):
            best = None
            for kind, t, k, box in accs:
                for other in partners[kind]:
                    idx = index.get((k, other))
                    if idx is None:
                        continue
                    for j, tj, bj in idx.clashing(t, box):
                        if j > i and (best is None or j < best[0][0]):
                            best = ((j, other, tj, bj), (i, kind, t, box))
            if best is not None:
                return best[1], best[0]
        return None


class _WriteIndex:
    """Accesses of one kind to one buffer sorted by their interval in one dimension, for overlap queries.

    One tensor name: the dimension with the most distinct intervals (the one the blocks
    slice). Several names (views of one buffer): the flat element interval, as `instances.overlap`
    compares them. `prefix_hi[k]` is the largest interval end among the first k+1 entries,
    so a query walks back only while an earlier write can still reach it.
    """

    def __init__(self, entries: list[tuple[int, str, Box]], p: Program, views: bool = False) -> None:
        self.p = p
        names = {t for _, t, _ in entries}
        dim: int | None = None
        if len(names) == 1 and not views:  # `views`: queries may name another view of the buffer
            rank = len(entries[0][2])
            if rank:
                dim = max(range(rank), key=lambda d: (len({box[d] for _, _, box in entries}), -d))
        self.dim = dim
        keyed = sorted(((self.interval(t, box), i, t, box) for i, t, box in entries), key=lambda e: (e[0], e[1]))
        self.los = [iv[0] for iv, _, _, _ in keyed]
        self.his = [iv[1] for iv, _, _, _ in keyed]
        self.entries = [(i, t, box) for _, i, t, box in keyed]
        self.prefix_hi = list(itertools.accumulate(self.his, max))

    def interval(self, tensor: str, box: Box) -> tuple[int, int]:
        if self.dim is not None:
            return box[self.dim]
        if not box or any(a >= b for a, b in box):
            return (-1, 1 << 126)  # `instances.overlap` on boxes with an empty side: compare with everything
        return flat(box, self.p.tensors[tensor].shape)

    def clashing(self, tensor: str, box: Box) -> list[tuple[int, str, Box]]:
        """The entries (block, tensor, box) whose box overlaps `box` of `tensor` (by `instances.overlap`)."""
        lo, hi = self.interval(tensor, box)
        out = []
        k = bisect.bisect_left(self.los, hi) - 1
        while k >= 0 and self.prefix_hi[k] > lo:
            if self.his[k] > lo:
                j, t, b = self.entries[k]
                if overlap(box, tensor, b, t, self.p):
                    out.append((j, t, b))
            k -= 1
        return out


@records.value
@attrs.frozen(repr=False, eq=False)
class FalseSerializations(Fact):
    """The `parallel` dispatches whose tasks the runtime orders one after another (PG103,
    `false_serializations`): dispatch name -> (written root tensors, output count), in program
    order. The simulator makes each of their tasks wait on the previous one of its loop iteration."""

    dispatches: dict[str, tuple[list[str], int]]


def false_serializations(plan: Plan) -> list[tuple[Dispatch, list[str], int]]:
    """(dispatch, written root tensors, output count) of every `parallel` dispatch whose tasks the
    runtime orders one after another (the rule of FalseSerializationPass, which records it as the
    FalseSerializations fact)."""
    p = plan.program
    out = []
    for d in p.dispatches:
        if d.kind is not TaskKind.PARALLEL or d.task_count < 2 or p.scopes[d.scope].mode is ScopeMode.MANUAL:
            continue
        outputs = [a for a in d.args if a.region is not None and a.param.direction is not Direction.IN]
        roots = {root(p, a.region.tensor) for a in outputs if a.region and a.region.tensor in p.tensors}
        if len(outputs) < 2 or not roots:
            continue
        out.append((d, sorted(roots), len(outputs)))
    return out


class FalseSerializationPass(Pass):
    """PG103: disjoint-slice writers in an auto scope that the runtime cannot prove disjoint.

    pypto passes whole tensors (no per-task window) to a task with several outputs (R4:
    window externalization needs "no two outputs on one parent"), and simpler's overlap
    test falls back to OTHER for differing dtype/ndims/strides or non row-major views, so
    such writers get WAW edges and run one after another (dcr_xgamma, #546). A manual
    scope infers nothing, so the rule is silent there.
    """

    name = "false-serialization"
    produces = (FalseSerializations,)

    def run(self, plan: Plan) -> None:
        found = false_serializations(plan)
        plan.put(FalseSerializations({d.name: (roots, n_outputs) for d, roots, n_outputs in found}))
        for d, roots, n_outputs in found:
            plan.bag.add(
                "PG103",
                f"the {d.task_count} tasks of '{d.name}' write disjoint slices of {', '.join(roots)}, but a "
                f"task with {n_outputs} outputs gets whole-tensor arguments: the runtime orders them one after "
                "another",
                d.span,
                [Note("pypto windows per-task slices only for a single output (R4); simpler's overlap test then sees "
                      "the whole tensor")],
                hint=f"make '{d.name}' one SPMD grid (`spmd {d.name}[...]`): its blocks run in parallel "
                     "(dcr_xgamma: 5 serial at-tasks ~35 us -> spmd(5) ~4 us, #546)",
            )

"""The edges of the instance graph: declared deps to producer tasks, TensorMap inference.

Explicit and carried deps select logical tiles, which map to (dispatch, task index) through
the tile set's waves (`TileMaps`); each dep of each instance gives its producers
(`dep_producers`, `tile_producers`), added to the builder as one fan-in. Auto-scope tasks get
TensorMap edges in submission order (`inferred_edges`, simpler `compute_task_fanin`: creator
edge, then a lookup for INPUT/INOUT, then registration of INOUT and OUTPUT_EXISTING).
Functions of the expansion's state (`ExpansionState`), passed explicitly.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pgraph.expand import tensormap
from pgraph.expand.builder import AllocSites, GraphBuilder
from pgraph.expand.state import ExpansionState
from pgraph.expr import EvalError
from pgraph.fastpath import reference_mode
from pgraph.ir import program as ir
from pgraph.ir.instances import ArgBox, DepIssue, Instance, covers, created_by, tensormap_overlap
from pgraph.ir.queries import Box, BufferKey, axis_values
from pgraph.kinds import DepKind, Direction, Provenance, ScopeMode, Storage, TaskKind

TileMap = dict[tuple[int, ...], tuple[str, tuple[int, ...]]]

_MISSING = object()


class TileMaps:
    """Logical tile coordinate -> (dispatch, task index) per tile set, and the producers'
    iterations per (producer, consumer, consumer iterations): kept under the state's memo
    (a fast path; the reference makes each at every dep)."""

    def __init__(self, st: ExpansionState) -> None:
        self.st = st
        self.maps: dict[str, TileMap] = st.memo_table()
        #: per dep id: (the dep, its tile set, its tile map, one entry per task)
        self.deps: dict[int, tuple[ir.DepRef, ir.TileSet, TileMap, bool]] = st.memo_table()
        self.producer_iters: dict[tuple[str, str, tuple[int, ...]], tuple[int, ...] | None] = st.memo_table()

    def tile_map(self, name: str) -> TileMap:
        """Logical tile coordinate -> (dispatch, task index) of tile set `name`."""
        cached = self.maps.get(name) if self.st.memo else None
        if cached is not None:
            return cached
        p = self.st.p
        ts = p.tilesets[name]
        out: TileMap = {}
        pos = {a.var: i for i, a in enumerate(ts.axes)}
        for dname in ts.dispatches:
            d = p.dispatch(dname)
            task_pos = [pos[a.var] for a in d.task_axes]
            box = {a.var: a for a in (*d.task_axes, *d.block_axes)}
            for coord in axis_values(tuple(box[a.var] for a in ts.axes)):
                out[coord] = (dname, tuple(coord[i] for i in task_pos))
        if self.st.memo:
            self.maps[name] = out
        return out

    def dep(self, dep: ir.DepRef) -> tuple[ir.TileSet, TileMap, bool]:
        """(tile set, tile map, one entry per task) of a tile dep."""
        got = self.deps.get(id(dep)) if self.st.memo else None
        if got is None:
            ts = self.st.p.tilesets[dep.target]
            got = (dep, ts, self.tile_map(dep.target), ts.kind in (TaskKind.AT, TaskKind.SPMD))
            if self.st.memo:
                self.deps[id(dep)] = got  # the dep is kept alive
        return got[1], got[2], got[3]

    def consumer_producer_iters(self, producer: str, consumer: ir.Dispatch, consumer_iters: tuple[int, ...],
                                iters_by_loop: dict[int, int]) -> tuple[int, ...] | None:
        """`producer_iters` of dispatch `producer` seen from `consumer` at its iterations."""
        if not self.st.memo:
            return producer_iters(self.st, self.st.p.dispatch(producer), iters_by_loop)
        pk = (producer, consumer.name, consumer_iters)
        got = self.producer_iters.get(pk, _MISSING)
        if got is _MISSING:
            got = self.producer_iters[pk] = producer_iters(self.st, self.st.p.dispatch(producer), iters_by_loop)
        return got  # type: ignore[return-value]


def producer_iters(st: ExpansionState, producer: ir.Dispatch, consumer_iters: dict[int, int]
                   ) -> tuple[int, ...] | None:
    """The producer's loop iterations seen from the consumer (the last one outside its loops)."""
    out = []
    for lid in producer.loops:
        v = consumer_iters.get(lid)
        if v is None:
            v = st.last_iteration(lid)
            if v is None:
                return None
        out.append(v)
    return tuple(out)


def resolve_deps(st: ExpansionState, b: GraphBuilder) -> None:
    """Add the EXPLICIT and CARRIED edges of every instance's deps, in submission order."""
    p = st.p
    maps = TileMaps(st)
    dispatches = {d.name: (d, [st.loops[lid].axis.var for lid in d.loops], [a.var for a in d.task_axes],
                           [ir.dep_dedup_key(p, dep) for dep in d.deps])
                  for d in p.dispatches if d.deps}
    for inst in list(b.instances):
        if inst.kind is TaskKind.ALLOC:
            continue
        got = dispatches.get(inst.dispatch)
        if got is None:
            continue
        d, loop_vars, task_vars, keys = got
        iters_by_loop = dict(zip(d.loops, inst.iters))
        env = dict(zip(loop_vars, inst.iters))
        for var, v in zip(task_vars, inst.index):
            env[var] = v
        merged: set[tuple[str, str]] = set()
        for dep, key in zip(d.deps, keys):
            if key is not None:  # a single TaskId named twice in one list is one entry (pypto dedups)
                if key in merged:
                    continue
                merged.add(key)
            try:
                found = None
                if dep.kind is DepKind.TILES:
                    found = tile_producers(maps, b.by_key, inst, d, dep, iters_by_loop, env)
                if found is None:
                    found = dep_producers(maps, b.by_key, inst, d, dep, iters_by_loop, env)
                if found is not None:
                    b.fan_in(found[0], inst.id, found[1], dep.span)
            except EvalError as e:
                st.eval_issue(inst.label, e)


ByKey = dict[tuple[str, tuple[int, ...], tuple[int, ...]], int]


def tile_producers(maps: TileMaps, by_key: ByKey, inst: Instance, d: ir.Dispatch, dep: ir.DepRef,
                   iters_by_loop: dict[int, int], env: dict[str, int]) -> tuple[list[int], Provenance] | None:
    """`dep_producers` of a tile dep whose selection is compiled and answers in range; None when
    `dep_producers` must decide (an issue to record, or no compiled selection)."""
    st = maps.st
    ts, tmap, per_task = maps.dep(dep)
    fn = st.selection_function(d, dep, ts)
    if fn is None:
        return None
    try:
        ranges = fn(env)
    except Exception:  # noqa: BLE001 - dep_producers evaluates it exactly (and records the issue)
        return None
    count = 1
    for r, axis in zip(ranges, ts.axes):
        n = len(r)
        if n and (r.start < axis.lo or r.stop > axis.hi):
            return None
        count *= n
    if not count:
        return None
    st.work += count
    # one tile (`rms[t]`): no product, nothing to fold
    coords = [tuple(r.start for r in ranges)] if count == 1 else itertools.product(*ranges)
    return _producers(maps, by_key, tmap, coords, d, inst.iters, iters_by_loop, per_task and count > 1), \
        Provenance.EXPLICIT


def _producers(maps: TileMaps, by_key: ByKey, tmap: TileMap, coords: Iterable[tuple[int, ...]], d: ir.Dispatch,
               consumer_iters: tuple[int, ...], iters_by_loop: dict[int, int], once: bool) -> list[int]:
    """The producer instances of tiles `coords` seen from `d` at `iters_by_loop` (each once when
    `once`; a tile without an instance, or a producer outside the window, gives none)."""
    out: list[int] = []
    seen: set[int] = set()
    producers: dict[str, Any] = {}  # producer dispatch -> its iterations (per call: few dispatches)
    for coord in coords:
        dname, index = tmap[coord]
        piters = producers.get(dname, _MISSING)
        if piters is _MISSING:
            piters = producers[dname] = maps.consumer_producer_iters(dname, d, consumer_iters, iters_by_loop)
        if piters is None:
            continue
        node = by_key.get((dname, piters, index))
        if node is None:
            continue
        if once:
            if node in seen:
                continue
            seen.add(node)
        out.append(node)
    return out


def _carry_target(st: ExpansionState, dep: ir.DepRef, iters_by_loop: dict[int, int]) -> tuple[str, dict[int, int]]:
    """(tile set, producer-side loop iterations) of a carry dep: INIT in the loop's first
    iteration (or after a loop that ran none), else NEXT of the previous iteration."""
    p = st.p
    carry = p.carries[dep.target]
    lp = p.carry_loop(dep.target)
    value = iters_by_loop.get(lp.id)
    iters = dict(iters_by_loop)
    if value is None:  # after the loop (as a tensor carry): NEXT of the last iteration, INIT if none ran
        last = st.last_iteration(lp.id)
        value = lp.axis.lo if last is None else last + 1
    if value == lp.axis.lo:
        iters.pop(lp.id, None)
        return carry.init, iters
    iters[lp.id] = value - 1
    # the slot is refreshed at the end of the carry loop's iteration: a NEXT inside an inner loop
    # is the one of that inner loop's last iteration, whatever iteration of it the consumer stands in
    for lid in st.nested_loops[lp.id]:
        iters.pop(lid, None)
    return carry.next, iters


def dep_producers(maps: TileMaps, by_key: ByKey, inst: Instance, d: ir.Dispatch, dep: ir.DepRef,
                  iters_by_loop: dict[int, int], env: dict[str, int]) -> tuple[list[int], Provenance] | None:
    """The producers of one dep of one instance, one per dep entry, and the edges' provenance:
    the tiles it selects mapped to producer tasks; None (an issue recorded) when it selects
    none or a range leaves the tile space."""
    st = maps.st
    prov, target, iters = Provenance.EXPLICIT, dep.target, iters_by_loop
    if dep.kind is DepKind.CARRY:
        prov = Provenance.CARRIED
        target, iters = _carry_target(st, dep, iters_by_loop)
    ts = st.p.tilesets[target]
    tiles: Iterable[tuple[int, ...]]
    if dep.kind is DepKind.TILES:
        ranges = st.selection(d, dep, ts, env)
        count = 1
        for i, (r, axis) in enumerate(zip(ranges, ts.axes)):
            n = len(r)
            if r.stop < r.start:  # a backwards selection: PG006, as a backwards range
                sel = (dep.sels or ())[i]
                st.issue(DepIssue("backwards", sel.span, d.name, ts.name, axis.var, r.start, r.stop),
                         (f"backwards {d.name} {r.start}..{r.stop}", sel.span))
                return None
            if n and (r.start < axis.lo or r.stop > axis.hi):
                sel = (dep.sels or ())[i]
                st.issue(DepIssue("range", sel.span, d.name, ts.name, axis.var, r.start, r.stop),
                         (f"range {d.name} {r.start}..{r.stop}", sel.span))
                return None
            count *= n
        tiles = itertools.product(*ranges)
    else:
        count = math.prod(a.size for a in ts.axes)
        tiles = axis_values(ts.axes)
    st.work += count
    if not count:
        st.issue(DepIssue("empty", dep.span, d.name, ts.name), ("empty", dep.span))
        return None
    # One dep entry per selected tile of a tile array (parallel, dummy, tiles: the reference's
    # TaskId arrays with one slot per tile); one entry per task for an `at` or `spmd`
    # declaration and for a carry (a single TaskId).
    per_task = dep.kind is DepKind.CARRY or ts.kind in (TaskKind.AT, TaskKind.SPMD)
    tmap = maps.tile_map(target)
    out: list[int] = []
    seen: set[int] = set()
    producer_its: dict[str, tuple[int, ...] | None] = {}
    for coord in tiles:
        dname, index = tmap[coord]
        if dname not in producer_its:
            producer_its[dname] = producer_iters(st, st.p.dispatch(dname), iters)
        piters = producer_its[dname]
        if piters is None:
            continue
        node = by_key.get((dname, piters, index))
        if node is None or (per_task and node in seen):
            continue
        seen.add(node)
        out.append(node)
    return out, prov


def inferred_edges(st: ExpansionState, instances: Sequence[Instance], args: dict[int, list[ArgBox]],
                   alloc_of: AllocSites) -> Iterator[tuple[int, int, Provenance]]:
    """The TensorMap edges (producer, consumer, provenance) of auto-scope tasks, in submission
    order (simpler compute_task_fanin): the creator edge from each argument's alloc task, the
    lookup of INPUT and INOUT arguments among the live entries of their buffer (an INOUT that
    covers an entry of the same layout replaces it), then registration of INOUT and
    OUTPUT_EXISTING."""
    p = st.p
    made = created_by(p, instances, args)

    def owner(buf: BufferKey) -> int | None:
        return made[buf] if buf in made else alloc_node(p, alloc_of, buf)

    if not reference_mode("tensormap-index"):
        yield from tensormap.inferred_edges(p, instances, args, owner)
        return
    entries: dict[BufferKey, list[tuple[Box, int, str]]] = {}
    for inst in instances:
        if inst.kind in (TaskKind.ALLOC, TaskKind.DUMMY):
            continue
        if p.scopes[inst.scope].mode is ScopeMode.MANUAL:
            continue
        register = []
        for arg in args.get(inst.id, []):
            alloc = owner(arg.buffer)
            if alloc == inst.id:
                continue  # the creating OUTPUT: no creator edge, no lookup, no TensorMap entry
            if alloc is not None:
                yield alloc, inst.id, Provenance.CREATOR
            if ir.manual_dep(p, arg.buffer[0]):
                continue  # `manual_dep`: the creator edge only; no lookup, no TensorMap entry
            direction = arg.param.direction
            live = entries.get(arg.buffer, [])
            if direction is not Direction.OUT:  # INPUT and INOUT look up; OUTPUT_EXISTING does not
                keep = []
                for box, producer, tname in live:
                    if producer != inst.id and tensormap_overlap(box, tname, arg.box, arg.tensor, p):
                        yield producer, inst.id, Provenance.INFERRED
                        same_layout = p.tensors[tname].shape == p.tensors[arg.tensor].shape
                        if direction is not Direction.IN and same_layout and covers(arg.box, box):
                            continue  # an INOUT that covers the entry replaces it
                    keep.append((box, producer, tname))
                entries[arg.buffer] = keep
            if direction is not Direction.IN:
                register.append((arg.buffer, arg.box, arg.tensor))
        for buf, box, tname in register:
            entries.setdefault(buf, []).append((box, inst.id, tname))


def alloc_node(p: ir.Program, alloc_of: AllocSites, buffer: BufferKey) -> int | None:
    """The alloc task that created buffer instance `buffer` (None for external buffers)."""
    t = p.tensors[buffer[0]]
    if t.storage is not Storage.ALLOC or t.scope is None:
        return None
    return alloc_of.get((t.scope, ir.alloc_group(p, t), t.loops, buffer[1]))

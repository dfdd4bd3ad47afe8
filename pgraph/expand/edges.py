"""The edges of the instance graph: declared deps to producer tasks, TensorMap inference.

Explicit and carried deps select logical tiles, which map to (dispatch, task index) through
the tile set's waves; auto-scope tasks get TensorMap edges in submission order (simpler
`compute_task_fanin`: creator edge, then a lookup for INPUT/INOUT, then registration of
INOUT and OUTPUT_EXISTING). Functions of the running `Expander`, passed explicitly.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pgraph.expand import tensormap
from pgraph.expand.compiled import SelFn, selection_function
from pgraph.expr import EvalError
from pgraph.fastpath import reference_mode
from pgraph.ir import program as ir
from pgraph.ir.instances import DepIssue, Instance, covers, tensormap_overlap
from pgraph.ir.instances import _provenance_set as provenance_set
from pgraph.ir.queries import Box, BufferKey, axis_values
from pgraph.kinds import DepKind, Direction, Provenance, ScopeMode, Storage, TaskKind

if TYPE_CHECKING:
    from pgraph.expand.expander import Expander

TileMap = dict[tuple[int, ...], tuple[str, tuple[int, ...]]]


def tile_map(ex: Expander, name: str, cache: dict[str, TileMap]) -> TileMap:
    """Logical tile coordinate -> (dispatch, task index) of tile set `name`."""
    cached = cache.get(name)
    if cached is not None:
        return cached
    ts = ex.p.tilesets[name]
    out: TileMap = {}
    pos = {a.var: i for i, a in enumerate(ts.axes)}
    for dname in ts.dispatches:
        d = ex.p.dispatch(dname)
        task_pos = [pos[a.var] for a in d.task_axes]
        box = {a.var: a for a in (*d.task_axes, *d.block_axes)}
        for coord in axis_values(tuple(box[a.var] for a in ts.axes)):
            out[coord] = (dname, tuple(coord[i] for i in task_pos))
    cache[name] = out
    return out


def select_tiles(ex: Expander, d: ir.Dispatch, dep: ir.DepRef, ts: ir.TileSet,
                 env: dict[str, int]) -> list[tuple[int, ...]] | None:
    """The tile coordinates a dep selects; None (an issue recorded) when a range leaves the tile space."""
    ranges = ex.ev.selection(dep.sels, ts.axes, env)
    for r, sel, axis in zip(ranges, dep.sels or (), ts.axes):
        if r.stop < r.start:  # a backwards selection: PG006, as a backwards range
            ex.issue(DepIssue("backwards", sel.span, d.name, ts.name, axis.var, r.start, r.stop),
                     (f"backwards {d.name} {r.start}..{r.stop}", sel.span))
            return None
        if len(r) and (r.start < axis.lo or r.stop > axis.hi):
            ex.issue(DepIssue("range", sel.span, d.name, ts.name, axis.var, r.start, r.stop),
                     (f"range {d.name} {r.start}..{r.stop}", sel.span))
            return None
    return list(itertools.product(*ranges))


def producer_iters(ex: Expander, producer: ir.Dispatch, consumer_iters: dict[int, int]) -> tuple[int, ...] | None:
    """The producer's loop iterations seen from the consumer (the last one outside its loops)."""
    out = []
    for lid in producer.loops:
        v = consumer_iters.get(lid)
        if v is None:
            v = ex.last_iteration(lid)
            if v is None:
                return None
        out.append(v)
    return tuple(out)


def resolve_deps(ex: Expander) -> None:
    """Add the EXPLICIT and CARRIED edges of every instance's deps."""
    cache: dict[str, TileMap] = {}
    selections: dict[int, SelFn | None] = {}
    fast: _FastDeps = {}
    dispatches = {d.name: (d, [ex.loops[lid].axis.var for lid in d.loops], [a.var for a in d.task_axes],
                           [ir.dep_dedup_key(ex.p, dep) for dep in d.deps])
                  for d in ex.p.dispatches if d.deps}
    for inst in list(ex.g.instances):
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
                if dep.kind is not DepKind.TILES or not _tiles_fast(ex, inst, d, dep, iters_by_loop, env, cache,
                                                                   selections, fast):
                    resolve_dep(ex, inst, d, dep, iters_by_loop, env, cache, selections)
            except EvalError as e:
                ex.eval_issue(inst.label, e)


#: per dep: (tile set, tile map, one entry per task, compiled selection); per (producer,
#: consumer, consumer iterations): the producer's iterations
_FastDeps = dict[Any, Any]


def _tiles_fast(ex: Expander, inst: Instance, d: ir.Dispatch, dep: ir.DepRef, iters_by_loop: dict[int, int],
                env: dict[str, int], cache: dict[str, TileMap], selections: dict[int, SelFn | None],
                fast: _FastDeps) -> bool:
    """`resolve_dep` of a tile dep whose selection is compiled and answers in range; False when
    `resolve_dep` must decide (an issue to record, or no compiled selection)."""
    key = id(dep)
    info = fast.get(key)
    if info is None:
        ts = ex.p.tilesets[dep.target]
        _selection(ex, d, dep, ts, env, selections)  # compiles it (or records that it cannot be)
        info = fast[key] = (ts, tile_map(ex, dep.target, cache), ts.kind in (TaskKind.AT, TaskKind.SPMD),
                            selections.get(key))
    ts, tmap, per_task, fn = info
    if fn is None:
        return False
    try:
        ranges = fn(env)
    except Exception:  # noqa: BLE001 - resolve_dep evaluates it exactly (and records the issue)
        return False
    count = 1
    for r, axis in zip(ranges, ts.axes):
        n = len(r)
        if n and (r.start < axis.lo or r.stop > axis.hi):
            return False
        count *= n
    if not count:
        return False
    ex.work += count
    g = ex.g
    by_key, succ, pred = g.by_key, g.succ, g.pred
    me, span = inst.id, dep.span
    mine = pred[me]
    # one tile (`rms[t]`): no product, nothing to fold
    coords = [tuple(r.start for r in ranges)] if count == 1 else itertools.product(*ranges)
    seen: set[int] | None = set() if per_task and count > 1 else None
    producers: dict[str, Any] = {}  # producer dispatch -> its iterations (per call: few dispatches)
    for coord in coords:
        dname, index = tmap[coord]
        piters = producers.get(dname, _MISSING)
        if piters is _MISSING:
            pk = (dname, d.name, inst.iters)
            piters = fast.get(pk, _MISSING)
            if piters is _MISSING:
                piters = fast[pk] = producer_iters(ex, ex.p.dispatch(dname), iters_by_loop)
            producers[dname] = piters
        if piters is None:
            continue
        node = by_key.get((dname, piters, index))
        if node is None:
            continue
        if seen is not None:
            if node in seen:
                continue
            seen.add(node)
        if node in mine:
            g.add_edge(node, me, Provenance.EXPLICIT, span)
        else:  # a new explicit edge: `InstanceGraph.add_edge` inlined
            data = {"prov": _EXPLICIT_ONLY, "entries": 1, "span": span}
            succ[node][me] = data
            mine[node] = data
    return True


_EXPLICIT_ONLY = provenance_set(frozenset(), Provenance.EXPLICIT)


_MISSING = object()


def _selection(ex: Expander, d: ir.Dispatch, dep: ir.DepRef, ts: ir.TileSet, env: dict[str, int],
               selections: dict[int, SelFn | None]) -> list[range]:
    """`Evaluator.selection` of `dep` at `env`, through its compiled function when it has one."""
    key = id(dep)
    if key not in selections:
        fast = ex.fast_dispatch.get(d.name)
        selections[key] = selection_function(dep.sels, ts.axes) if fast else None
    fn = selections[key]
    if fn is not None:
        try:
            return fn(env)
        except Exception:  # noqa: BLE001 - the Evaluator gives the exact answer or error
            pass
    return ex.ev.selection(dep.sels, ts.axes, env)


def resolve_dep(ex: Expander, inst: Instance, d: ir.Dispatch, dep: ir.DepRef, iters_by_loop: dict[int, int],
                env: dict[str, int], cache: dict[str, TileMap], selections: dict[int, SelFn | None] | None = None
                ) -> None:
    """One dep of one instance: the tiles it selects, mapped to producer tasks (folded per task)."""
    prov = Provenance.EXPLICIT
    target = dep.target
    iters = iters_by_loop
    if dep.kind is DepKind.CARRY:
        carry = ex.p.carries[dep.target]
        lp = ex.p.carry_loop(dep.target)
        value = iters_by_loop.get(lp.id)
        prov = Provenance.CARRIED
        iters = dict(iters_by_loop)
        if value is None:  # after the loop (as a tensor carry): NEXT of the last iteration, INIT if none ran
            last = ex.last_iteration(lp.id)
            value = lp.axis.lo if last is None else last + 1
        if value == lp.axis.lo:
            target = carry.init
            iters.pop(lp.id, None)
        else:
            target = carry.next
            iters[lp.id] = value - 1
            # the slot is refreshed at the end of the carry loop's iteration: a NEXT inside an
            # inner loop is the one of that inner loop's last iteration, whatever iteration of it
            # the consumer stands in
            for lid in ex.nested_loops[lp.id]:
                iters.pop(lid, None)
    ts = ex.p.tilesets[target]
    if dep.kind is DepKind.TILES:
        ranges = _selection(ex, d, dep, ts, env, selections if selections is not None else {})
        count = 1
        for i, (r, axis) in enumerate(zip(ranges, ts.axes)):
            n = len(r)
            if r.stop < r.start:  # a backwards selection: PG006, as a backwards range
                sel = (dep.sels or ())[i]
                ex.issue(DepIssue("backwards", sel.span, d.name, ts.name, axis.var, r.start, r.stop),
                         (f"backwards {d.name} {r.start}..{r.stop}", sel.span))
                return
            if n and (r.start < axis.lo or r.stop > axis.hi):
                sel = (dep.sels or ())[i]
                ex.issue(DepIssue("range", sel.span, d.name, ts.name, axis.var, r.start, r.stop),
                         (f"range {d.name} {r.start}..{r.stop}", sel.span))
                return
            count *= n
        tiles: Iterable[tuple[int, ...]] = itertools.product(*ranges)
    else:
        count = math.prod(a.size for a in ts.axes)
        tiles = axis_values(ts.axes)
    ex.work += count
    if not count:
        ex.issue(DepIssue("empty", dep.span, d.name, ts.name), ("empty", dep.span))
        return
    tmap = tile_map(ex, target, cache)
    # One dep entry per selected tile of a tile array (parallel, dummy, tiles: the
    # reference's TaskId arrays with one slot per tile); one entry per task for an
    # `at` or `spmd` declaration and for a carry (a single TaskId).
    per_task = dep.kind is DepKind.CARRY or ts.kind in (TaskKind.AT, TaskKind.SPMD)
    seen: set[int] = set()
    producer_its: dict[str, tuple[int, ...] | None] = {}
    by_key = ex.g.by_key
    for coord in tiles:
        dname, index = tmap[coord]
        if dname in producer_its:
            piters = producer_its[dname]
        else:
            piters = producer_its[dname] = producer_iters(ex, ex.p.dispatch(dname), iters)
        if piters is None:
            continue
        node = by_key.get((dname, piters, index))
        if node is None or (per_task and node in seen):
            continue
        seen.add(node)
        ex.g.add_edge(node, inst.id, prov, dep.span)


def infer_edges(ex: Expander) -> None:
    """TensorMap edges of auto-scope tasks, in submission order (simpler compute_task_fanin).

    The reference (PGRAPH_REFERENCE=1): every lookup tests every live entry of its buffer; the
    fast path `tensormap.infer_edges` finds the same edges through an interval index."""
    if not reference_mode("tensormap-index"):
        tensormap.infer_edges(ex, alloc_node)
        return
    entries: dict[BufferKey, list[tuple[Box, int, str]]] = {}
    for inst in ex.g.instances:
        if inst.kind in (TaskKind.ALLOC, TaskKind.DUMMY):
            continue
        if ex.p.scopes[inst.scope].mode is ScopeMode.MANUAL:
            continue
        register = []
        for arg in ex.g.args.get(inst.id, []):
            alloc = alloc_node(ex, arg.buffer)
            if alloc is not None:
                ex.g.add_edge(alloc, inst.id, Provenance.CREATOR)
            direction = arg.param.direction
            live = entries.get(arg.buffer, [])
            if direction is not Direction.OUT:  # INPUT and INOUT look up; OUTPUT_EXISTING does not
                keep = []
                for box, producer, tname in live:
                    if producer != inst.id and tensormap_overlap(box, tname, arg.box, arg.tensor, ex.p):
                        ex.g.add_edge(producer, inst.id, Provenance.INFERRED)
                        same_layout = ex.p.tensors[tname].shape == ex.p.tensors[arg.tensor].shape
                        if direction is not Direction.IN and same_layout and covers(arg.box, box):
                            continue  # an INOUT that covers the entry replaces it
                    keep.append((box, producer, tname))
                entries[arg.buffer] = keep
            if direction is not Direction.IN:
                register.append((arg.buffer, arg.box, arg.tensor))
        for buf, box, tname in register:
            entries.setdefault(buf, []).append((box, inst.id, tname))


def alloc_node(ex: Expander, buffer: BufferKey) -> int | None:
    """The alloc task that created buffer instance `buffer` (None for external buffers)."""
    t = ex.p.tensors[buffer[0]]
    if t.storage is not Storage.ALLOC or t.scope is None:
        return None
    return ex.alloc_of.get((t.scope, ir.alloc_group(ex.p, t), t.loops, buffer[1]))

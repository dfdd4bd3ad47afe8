"""Dep resolution of the expander: deps to edges, TensorMap inference, cycle and forward-dep checks.

A mixin of `pgraph.ir.expand.Expander` (the state it reads is declared below). Explicit and
carried deps select logical tiles, which map to (dispatch, task index) through the tile set's
waves; auto-scope tasks get TensorMap edges in submission order (simpler
`compute_task_fanin`); PG013 reports a cycle and PG032 a dep on a task submitted later.
"""

from __future__ import annotations

import itertools

import networkx as nx

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.ir import program as ir
from pgraph.ir.expr import EvalError
from pgraph.ir.instances import Box, BufferKey, Instance, InstanceGraph, axis_values, covers, overlap
from pgraph.source import Span


class DepResolution:
    """Deps, inference and ordering checks over the instances the expander emitted."""

    p: ir.Program
    bag: DiagnosticBag
    g: InstanceGraph
    carry_loop: dict[str, ir.Loop]
    tile_maps: dict[str, dict[tuple[int, ...], tuple[str, tuple[int, ...]]]]
    alloc_of: dict[tuple[int, tuple[int, ...], tuple[int, ...]], int]
    forward: list[tuple[int, int, object]]

    def interval(self, kind: str, a: object, b: object, env: dict[str, int]) -> tuple[int, int]:
        raise NotImplementedError  # Expander

    def last_iteration(self, lid: int) -> int | None:
        raise NotImplementedError  # Expander

    def env_for(self, d: ir.Dispatch, iters: tuple[int, ...]) -> dict[str, int]:
        raise NotImplementedError  # Expander

    def eval_error(self, where: str, e: EvalError) -> None:
        raise NotImplementedError  # Expander

    def report_once(self, code: str, span: Span, message: str, hint: str | None = None) -> None:
        raise NotImplementedError  # Expander

    # ---- deps ----
    def tile_map(self, name: str) -> dict[tuple[int, ...], tuple[str, tuple[int, ...]]]:
        cached = self.tile_maps.get(name)
        if cached is not None:
            return cached
        ts = self.p.tilesets[name]
        out: dict[tuple[int, ...], tuple[str, tuple[int, ...]]] = {}
        for dname in ts.dispatches:
            d = self.p.dispatch(dname)
            pos = {a.var: i for i, a in enumerate(ts.axes)}
            task_pos = [pos[a.var] for a in d.task_axes]
            box = {a.var: a for a in (*d.task_axes, *d.block_axes)}
            for coord in axis_values(tuple(box[a.var] for a in ts.axes)):
                out[coord] = (dname, tuple(coord[i] for i in task_pos))
        self.tile_maps[name] = out
        return out

    def select_tiles(self, d: ir.Dispatch, dep: ir.DepRef, ts: ir.TileSet, env: dict[str, int]) -> list[tuple[int, ...]] | None:
        if dep.sels is None:
            return list(axis_values(ts.axes))
        if len(dep.sels) != len(ts.axes):
            self.bag.add("PG020", f"'{ts.name}' has {len(ts.axes)} tile ind{'ex' if len(ts.axes) == 1 else 'ices'} "
                         f"but the dep selects {len(dep.sels)}", dep.span, [Note(f"'{ts.name}' declared here", ts.span)])
            return None
        ranges = []
        for sel, axis in zip(dep.sels, ts.axes):
            if sel.kind == "all":
                ranges.append(range(axis.lo, axis.hi))
                continue
            lo, hi = self.interval(sel.kind, sel.a, sel.b, env)
            if hi > lo and (lo < axis.lo or hi > axis.hi):
                self.bag.add("PG026", f"'{d.name}' selects {ts.name} tiles {axis.var} in {lo}..{hi}, outside "
                             f"{axis.lo}..{axis.hi}", sel.span, [Note(f"'{ts.name}' declared here", ts.span)],
                             hint="a dep names logical tiles of the tile space; check the index arithmetic")
                return None
            ranges.append(range(lo, max(lo, hi)))
        return list(itertools.product(*ranges))

    def producer_iters(self, producer: ir.Dispatch, consumer_iters: dict[int, int]) -> tuple[int, ...] | None:
        out = []
        for lid in producer.loops:
            v = consumer_iters.get(lid)
            if v is None:
                v = self.last_iteration(lid)
                if v is None:
                    return None
            out.append(v)
        return tuple(out)

    def resolve_deps(self) -> None:
        for inst in list(self.g.instances):
            if inst.kind == "alloc":
                continue
            d = self.p.dispatch(inst.dispatch)
            iters_by_loop = dict(zip(d.loops, inst.iters))
            env = self.env_for(d, inst.iters)
            env.update({a.var: v for a, v in zip(d.task_axes, inst.index)})
            for dep in d.deps:
                try:
                    self.resolve_dep(inst, d, dep, iters_by_loop, env)
                except EvalError as e:
                    self.eval_error(inst.label, e)

    def resolve_dep(self, inst: Instance, d: ir.Dispatch, dep: ir.DepRef, iters_by_loop: dict[int, int],
                    env: dict[str, int]) -> None:
        prov = "explicit"
        target = dep.target
        iters = dict(iters_by_loop)
        if dep.kind == "carry":
            carry = self.p.carries[dep.target]
            lp = self.carry_loop[dep.target]
            value = iters_by_loop.get(lp.id)
            prov = "carried"
            if value is None:  # after the loop (as a tensor carry): NEXT of the last iteration, INIT if none ran
                last = self.last_iteration(lp.id)
                value = lp.axis.lo if last is None else last + 1
            if value == lp.axis.lo:
                target = carry.init
                iters.pop(lp.id, None)
            else:
                target = carry.next
                iters[lp.id] = value - 1
        ts = self.p.tilesets[target]
        tiles = self.select_tiles(d, dep, ts, env) if dep.kind == "tiles" else list(axis_values(ts.axes))
        if tiles is None:
            return
        if not tiles:
            self.report_once("PG015", dep.span, f"'{d.name}' depends on an empty set of '{ts.name}' tiles",
                             hint="an empty range is legal but orders nothing; check the bounds")
            return
        tmap = self.tile_map(target)
        # One dep entry per selected tile of a tile array (parallel, dummy, tiles: the
        # reference's TaskId arrays with one slot per tile); one entry per task for an
        # `at` or `spmd` declaration and for a carry (a single TaskId).
        per_task = dep.kind == "carry" or ts.kind in ("at", "spmd")
        seen: set[int] = set()
        for coord in tiles:
            dname, index = tmap[coord]
            producer = self.p.dispatch(dname)
            piters = self.producer_iters(producer, iters)
            if piters is None:
                continue
            node = self.g.by_key.get((dname, piters, index))
            if node is None or (per_task and node in seen):
                continue
            seen.add(node)
            if node > inst.id:
                self.forward.append((node, inst.id, dep.span))
            self.g.add_edge(node, inst.id, prov, dep.span)

    # ---- TensorMap inference in auto scopes ----
    def infer_edges(self) -> None:
        entries: dict[BufferKey, list[tuple[Box, int, str]]] = {}
        for inst in self.g.instances:
            if inst.kind in ("alloc", "dummy"):
                continue
            if self.p.scopes[inst.scope].mode == "manual":
                continue
            d = self.p.dispatch(inst.dispatch)
            iters_by_loop = dict(zip(d.loops, inst.iters))
            register = []
            for arg in self.g.args.get(inst.id, []):
                alloc = self.alloc_node(arg.buffer, iters_by_loop)
                if alloc is not None:
                    self.g.add_edge(alloc, inst.id, "creator")
                direction = arg.param.direction
                live = entries.get(arg.buffer, [])
                if direction in ("in", "inout", "atomic_add"):
                    keep = []
                    for box, producer, tname in live:
                        if producer != inst.id and overlap(box, tname, arg.box, arg.tensor, self.p):
                            self.g.add_edge(producer, inst.id, "inferred")
                            if direction != "in" and tname == arg.tensor and covers(arg.box, box):
                                continue
                        keep.append((box, producer, tname))
                    entries[arg.buffer] = keep
                if direction in ("out", "inout", "atomic_add"):
                    register.append((arg.buffer, arg.box, arg.tensor))
            for buf, box, tname in register:
                entries.setdefault(buf, []).append((box, inst.id, tname))

    def alloc_node(self, buffer: BufferKey, iters_by_loop: dict[int, int]) -> int | None:
        t = self.p.tensors[buffer[0]]
        if t.storage != "alloc" or t.scope is None:
            return None
        return self.alloc_of.get((t.scope, t.loops, buffer[1]))

    # ---- cycles ----
    def check_cycles(self) -> None:
        if nx.is_directed_acyclic_graph(self.g.graph):  # linear; find_cycle is slow on big DAGs
            self.check_forward()
            return
        try:
            cycle = nx.find_cycle(self.g.graph)
        except nx.NetworkXNoCycle:
            return
        # Start at an edge whose producer is submitted after its consumer (every cycle has
        # one): that dep names a future task, so it is the one to report.
        back = next((i for i, (u, v) in enumerate(cycle) if u > v), 0)
        cycle = cycle[back:] + cycle[:back]
        names = [self.g.instances[u].label for u, _ in cycle]
        first = self.g.graph.edges[cycle[0]]
        notes = []
        for u, v in cycle:
            span = self.g.graph.edges[u, v].get("span")
            notes.append(Note(f"{self.g.instances[v].label} waits on {self.g.instances[u].label}", span))  # type: ignore[arg-type]
        self.bag.add("PG013", "dependency cycle: " + " -> ".join([*names, names[0]]), first.get("span"), notes,
                     hint="remove one of the deps in the cycle; a task cannot wait on its own consumers")


    def check_forward(self) -> None:
        """PG032: a dep on a task submitted later in program order (its TaskId does not exist yet)."""
        done: set[tuple[str, str]] = set()
        for producer, consumer, span in self.forward:
            ip, ic = self.g.instances[producer], self.g.instances[consumer]
            key = (ip.dispatch, ic.dispatch)
            if key in done:
                continue
            done.add(key)
            dp, dc = self.p.dispatch(ip.dispatch), self.p.dispatch(ic.dispatch)
            hint = ("tasks are submitted in program order and a TaskId exists only once its task is submitted "
                    "(a dep on a later task is dropped as invalid); move the producer before the consumer")
            same_block = dp.interleave is not None and dp.interleave == dc.interleave
            if same_block and not _same_group(dp, dc):
                hint = (f"'{dp.name}' and '{dc.name}' are in one `interleave` block but in different groups, "
                        "which are submitted in the order of their first member; declare the producer's group "
                        "first, or take it out of the block")
            elif same_block:
                hint = ("both are in one `interleave` block, which submits index by index: a task may depend on "
                        "earlier indices, or on the same index of an earlier member; depend on an earlier index, "
                        "or take the producer out of the block")
            self.bag.add(
                "PG032",
                f"'{ic.label}' depends on '{ip.label}', which is submitted after it",
                span,  # type: ignore[arg-type]
                [Note(f"'{ip.dispatch}' is declared here", dp.span)],
                hint=hint,
            )


def _same_group(a: ir.Dispatch, b: ir.Dispatch) -> bool:
    """True when two dispatches of one `interleave` block are in one round-robin group."""
    return ir.interleave_key(a) == ir.interleave_key(b)

"""Rings and capacity: clamped rings (PG107), nested ring-3 scopes (PG108), the task window
per scope (PG109, code 1) and per ring (PG120, code 3), heap per ring (PG110, code 2), dep
pool (PG111, code 4) and the TensorMap (PG112, code 11).

Facts of the runtime (simpler, docs/upstream.md §5, §5.5): ring = min(depth, 3);
memory and task slots are reclaimed FIFO per ring, at scope exit, never at last use; one
scope holds at most task_window - 1 tasks (alloc and dummy tasks count); every packed output
is rounded up to 1024 B. Estimates here are static: the tasks and buffers of every scope
instance that is open at once (the chain from the entry to the innermost scope) cannot be
reclaimed, and a loop body whose values are carried keeps its previous iteration alive too.

Every figure is window-exact: an instance that stands for w iterations of a loop nested in
its scope counts w times, an edge into such an instance counts once per iteration it stands
for, and the representative iteration of a windowed loop counts the carried edges into the
next iteration that only the first iteration's copy shows. So the windowed peaks equal the
peaks of the `--full` expansion (tests/unit/test_window_exact.py).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import attrs

from pgraph import records
from pgraph.diagnostics import Note, Severity
from pgraph.ir.limits import heap_bytes
from pgraph.ir.program import Program
from pgraph.kinds import Direction, ScopeMode, TaskKind
from pgraph.plan.base import Fact, Pass, Plan
from pgraph.source import Span

ScopeKey = tuple[int, tuple[int, ...]]


@records.shared_repr
@attrs.define(repr=False)
class _Fanout:
    """The consumer edges of one instance, by which of the real tasks it stands for have them.

    `same`: every copy. `nxt[lid]`: the carried edges into the next iteration of windowed loop
    lid (every copy but the last; seen only from the first iteration's copy). `exits[loops]`:
    edges out of the windowed loops `loops`, from the copy in their last iteration only.
    """

    same: int = 0
    nxt: dict[int, int] = attrs.Factory(dict)
    exits: dict[tuple[int, ...], int] = attrs.Factory(dict)


@records.value
@attrs.frozen(repr=False, eq=False)
class RingTable(Fact):
    """One row per ring (tasks, heap, dep pool: per layer and at peak, with limits) and the TensorMap peak."""

    rings: list[dict[str, Any]]
    tensormap: dict[str, int]


class _Model:
    """The capacity model of one plan (built per run: passes keep no state)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.p: Program = plan.program
        self.g = plan.graph
        self.align = self.p.target["output_align"]   # simpler: PTO2_PACKED_OUTPUT_ALIGN
        self.scope_loops = self.g.scope_loops
        self.fan = self.fanout_entries()
        self.per_key = self.scope_instances()

    def fanout_entries(self) -> dict[int, _Fanout]:
        """Dep-pool entries of each instance's real tasks: one per consumer edge (simpler
        wire_fanin_task prepends the consumer to the producer's fanout list), split by which of
        the copies an instance stands for have the edge (see `_Fanout`)."""
        g = self.g
        fan: dict[int, _Fanout] = defaultdict(_Fanout)
        if not g.windowed:  # every instance is one real task: one entry per out-edge
            for u, adj in g.succ.items():
                if adj and g.instances[u].kind is not TaskKind.ALLOC:
                    fan[u].same = len(adj)
            return fan
        lo = {lp.id: lp.axis.lo for lp in self.p.loops}
        for u, v, _ in g.edges():
            iu, iv = g.instances[u], g.instances[v]
            if iu.kind is TaskKind.ALLOC:
                continue
            if iu.iters == iv.iters and iu.loops == iv.loops:
                fan[u].same += 1  # (most edges) within one iteration: one consumer per producer, no exit, no twin
                continue
            n = g.extra_weight(iv, iu.loops)  # real consumers per real producer
            # the windowed loops whose instance the edge leaves: the consumer is not in the loop,
            # or in another instance of it (another iteration of a loop around it)
            exited = tuple(lid for k, (lid, it) in enumerate(zip(iu.loops, iu.iters))
                           if lid in g.windowed and it != lo[lid]
                           and (iv.loops[:k + 1] != iu.loops[:k + 1] or iv.iters[:k] != iu.iters[:k]))
            f = fan[u]
            if exited:
                f.exits[exited] = f.exits.get(exited, 0) + n
            else:
                f.same += n
            twin = self.next_iteration_twin(iu, iv)
            if twin is not None:
                t = fan[twin[0]]
                t.nxt[twin[1]] = t.nxt.get(twin[1], 0) + n
        return fan

    def entries(self, inst: Any, extra: int, fixed: dict[int, bool]) -> int:
        """Dep-pool entries the `extra` real tasks of `inst` hold together: the copies of every
        windowed loop not in `fixed` are summed (w iterations: w - 1 with the carried edges into
        the next, the last with the edges out of the loop); for a loop in `fixed` they all sit in
        a middle iteration (True) or in the last one (False)."""
        f = self.fan.get(inst.id)
        if f is None:
            return 0
        its = dict(zip(inst.loops, inst.iters))
        total = extra * f.same
        for lid, n in f.nxt.items():
            if lid in fixed:
                total += extra * n if fixed[lid] else 0
            else:
                w = self.g.loop_weight(lid, its[lid])
                total += extra // w * (w - 1) * n
        for loops, n in f.exits.items():
            if any(fixed.get(lid) is True for lid in loops):
                continue
            c = extra
            for lid in loops:
                if lid not in fixed:
                    c //= self.g.loop_weight(lid, its[lid])
            total += c * n
        return total

    def windowed_at_rep(self, loops: tuple[int, ...], iters: tuple[int, ...]) -> tuple[int, ...]:
        """The windowed loops among `loops` whose value in `iters` is the representative copy."""
        return tuple(lid for lid, it in zip(loops, iters)
                     if lid in self.g.windowed and it != self.p.loops[lid].axis.lo)

    def next_iteration_twin(self, iu: Any, iv: Any) -> tuple[int, int] | None:
        """For an edge from the first iteration of a windowed loop into the second, the producer's
        copy in the second iteration and the loop: that copy stands for iterations that have the
        same edge into the next one (all but the last)."""
        for lid, a, b in zip(iu.loops, iu.iters, iv.iters):
            if lid in self.g.windowed and lid in iv.loops and a == self.p.loops[lid].axis.lo and b == a + 1:
                iters = tuple(b if l2 == lid else it for l2, it in zip(iu.loops, iu.iters))
                twin = self.g.by_key.get((iu.dispatch, iters, iu.index))
                return None if twin is None else (twin, lid)
        return None

    def scope_instances(self) -> dict[ScopeKey, dict[str, Any]]:
        """Per scope instance: tasks (weighted over loops inside it), heap bytes, fanout entries, TensorMap inserts."""
        g = self.g
        manual = {s.id for s in self.p.scopes if s.mode is ScopeMode.MANUAL}
        out: dict[ScopeKey, dict[str, Any]] = defaultdict(lambda: {"tasks": 0, "compute": 0, "dummies": 0,
                                                                   "allocs": 0, "heap": 0, "tm": 0,
                                                                   "deps_by_case": defaultdict(int)})
        plain = not g.windowed  # every instance one real task: no copies, no cases
        fixed_of: dict[ScopeKey, tuple[int, ...]] = {}  # per scope instance: its loops at the representative copy
        for inst in g.instances:
            by_loop = dict(zip(inst.loops, inst.iters))
            own = self.scope_loops[inst.scope]
            key = (inst.scope, tuple(by_loop.get(lid, 0) for lid in own))
            row = out[key]
            deps = row["deps_by_case"]
            if plain:
                extra = 1
                f = self.fan.get(inst.id)
                deps[()] += f.same if f is not None else 0  # = entries(inst, 1, {})
            else:
                extra = g.extra_weight(inst, own)
                fixed = fixed_of.get(key)
                if fixed is None:
                    fixed = fixed_of[key] = self.windowed_at_rep(own, key[1])
                for case in itertools.product((True, False), repeat=len(fixed)):
                    deps[case] += self.entries(inst, extra, dict(zip(fixed, case)))
            if inst.kind is TaskKind.ALLOC:
                row["allocs"] += inst.blocks * extra
                row["tasks"] += inst.blocks * extra
                tensors = g.alloc_info[inst.id][2]
                row["heap"] += extra * sum(heap_bytes(t.nbytes, self.align) for t in tensors)
                continue
            row["tasks"] += extra
            row["dummies" if inst.kind is TaskKind.DUMMY else "compute"] += extra
            if inst.scope not in manual:  # TensorMap inserts: Out/InOut arguments of auto-scope tasks
                row["tm"] += extra * sum(1 for a in g.args.get(inst.id, []) if a.param.direction is not Direction.IN)
        return out

    def chain(self, key: ScopeKey) -> list[ScopeKey]:
        """The scope instances open while `key` is: itself and its enclosing instances."""
        sid, its = key
        by_loop = dict(zip(self.scope_loops[sid], its))
        return [(s, tuple(by_loop[lid] for lid in self.scope_loops[s])) for s in self.p.ancestors(sid)]

    def layer_rows(self) -> dict[int, dict[str, int]]:
        """One layer's share per ring: tasks (alloc included), heap bytes, fanout entries."""
        out: dict[int, dict[str, int]] = defaultdict(lambda: {"tasks": 0, "heap": 0, "deps": 0})
        lid = self.plan.layer_loop
        rep = self.plan.representative_iteration()
        if lid is None or rep is None:
            return out
        for inst in self.g.instances:
            if not inst.loops or inst.loops[0] != lid or inst.iters[0] != rep:
                continue
            r = self.p.scopes[inst.scope].ring
            share = self.g.extra_weight(inst, (lid,))
            if inst.kind is TaskKind.ALLOC:
                out[r]["tasks"] += inst.blocks * share
                out[r]["heap"] += share * sum(heap_bytes(t.nbytes, self.align) for t in self.g.alloc_info[inst.id][2])
            else:
                out[r]["tasks"] += share
            out[r]["deps"] += self.entries(inst, share, {lid: True} if lid in self.g.windowed else {})
        return out


class RingsPass(Pass):
    """Produces RingTable; reports PG107-PG112 and PG120."""

    name = "rings"
    produces = (RingTable,)

    def run(self, plan: Plan) -> None:
        model = _Model(plan)
        clamped(plan)
        nested_ring3(plan, model)
        too_big = scope_window(plan, model)
        ring_table(plan, model, too_big)


def clamped(plan: Plan) -> None:
    """PG107: a scope deeper than the last ring shares it with every scope from depth 3 down."""
    top = plan.program.target["rings"] - 1
    for s in plan.program.scopes:
        if s.depth > top:
            plan.bag.add("PG107", f"this scope is at depth {s.depth} and is clamped onto ring {top}, "
                         "which it shares with every scope from depth 3 down", s.span,
                         hint="ring = min(depth, 3) (simpler current_ring_id); deep nesting piles tasks and heap "
                              "onto ring 3, where reclaim is FIFO across all of them")


def nested_ring3(plan: Plan, model: _Model) -> None:
    """PG108: nested open scopes on the last ring, the outer one holding tasks."""
    p = plan.program
    top = p.target["rings"] - 1
    holds: dict[int, int] = defaultdict(int)
    for (sid, _), row in model.per_key.items():
        holds[sid] = max(holds[sid], row["tasks"])
    for s in p.scopes:
        if s.depth <= top or not holds.get(s.id):
            continue
        outer = [a for a in p.ancestors(s.id)[1:] if p.scopes[a].depth >= top and holds.get(a)]
        if not outer:
            continue
        o = p.scopes[outer[0]]
        plan.bag.add(
            "PG108",
            f"scopes at depths {o.depth} and {s.depth} are open together on ring {top}: the outer one's "
            f"{holds[o.id]} task(s) cannot retire while this one allocates",
            s.span, [Note(f"outer scope (depth {o.depth}) holding tasks", o.span)],
            hint="FIFO reclaim per ring: a ring head owned by an open scope is never reclaimed "
                 "(FLOW_CONTROL_DEADLOCK, orch_error_code 3, when the ring fills); flatten the nesting or "
                 "move the outer tasks to a shallower scope")


def _smaller_scope(p: Program, sid: int) -> str:
    """How PG109's scope can hold fewer tasks, naming only structure the spec has: a loop whose
    body shares the scope (`unscoped`) gets a scope of its own; otherwise the tasks are split."""
    shared = [lp for lp in p.loops if lp.parent_scope == sid and lp.body_scope is None]
    if shared and not shared[0].scoped:
        return (f"give the body of the loop over `{shared[0].axis.var}` its own scope (drop `unscoped`: each "
                "iteration's tasks then retire with it)")
    if shared:
        return (f"give the body of the loop over `{shared[0].axis.var}` a scope of its own (each iteration's "
                "tasks then retire with it)")
    return "split its tasks into nested scopes that each hold fewer"


def scope_window(plan: Plan, model: _Model) -> set[int]:
    """PG109: one scope instance holds more than task_window - 1 tasks (SCOPE_DEADLOCK); the scopes reported."""
    p = plan.program
    limit = p.target["task_window"] - 1
    worst: dict[int, tuple[int, dict[str, Any]]] = {}
    for (sid, _), row in model.per_key.items():
        if row["tasks"] > worst.get(sid, (-1, {}))[0]:
            worst[sid] = (row["tasks"], row)
    reported = set()
    for sid, (tasks, row) in sorted(worst.items()):
        if tasks <= limit:
            continue
        reported.add(sid)
        plan.bag.add(
            "PG109",
            f"this scope would hold {tasks:,} tasks ({row['compute']:,} compute, {row['dummies']:,} dummies, "
            f"{row['allocs']:,} alloc tasks); one scope may hold at most task_window - 1 = {limit:,}",
            p.scopes[sid].span,
            hint=f"SCOPE_DEADLOCK (orch_error_code 1, 507018 on the host): {_smaller_scope(p, sid)}, or "
                 "raise the task window (PTO2_RING_TASK_WINDOW / target task_window)")
    return reported


def ring_table(plan: Plan, model: _Model, too_big: set[int]) -> None:
    """The per-ring peaks over every chain of open scope instances; PG110-PG112, PG120."""
    p = plan.program
    target = p.target
    rings: dict[int, dict[str, Any]] = {}
    carried_scopes = {lp.body_scope for lp in p.loops if lp.carries and lp.body_scope is not None}
    tensormap_peak = 0
    for key in model.per_key:
        by_ring: dict[int, dict[str, int]] = defaultdict(lambda: {"tasks": 0, "heap": 0, "deps": 0, "retained": 0,
                                                                  "retained_heap": 0})
        tm = 0
        # the dep pool depends on whether the open windowed iterations are middle ones or the last
        fixed = model.windowed_at_rep(model.scope_loops[key[0]], key[1])
        cases = [dict(zip(fixed, case)) for case in itertools.product((True, False), repeat=len(fixed))]
        deps_by_case: dict[int, list[int]] = {}
        for ck in model.chain(key):
            row = model.per_key.get(ck)
            if row is None:
                continue
            r = p.scopes[ck[0]].ring
            by_ring[r]["tasks"] += row["tasks"]
            by_ring[r]["heap"] += row["heap"]
            own = model.windowed_at_rep(model.scope_loops[ck[0]], ck[1])
            for c, case in enumerate(cases):
                deps_by_case.setdefault(r, [0] * len(cases))[c] += row["deps_by_case"][tuple(case[lid] for lid in own)]
            tm += row["tm"]
            if ck[0] in carried_scopes:
                by_ring[r]["retained"] += row["tasks"]
                by_ring[r]["retained_heap"] += row["heap"]
        for r, values in deps_by_case.items():
            by_ring[r]["deps"] = max(values)
        tensormap_peak = max(tensormap_peak, tm)
        for r, vals in by_ring.items():
            cur = rings.setdefault(r, {"ring": r, "peak_tasks": 0, "peak_heap": 0, "peak_dep_pool": 0,
                                       "peak_tasks_with_carry": 0, "peak_heap_with_carry": 0,
                                       "worst_heap_scope": None, "worst_dep_scope": None,
                                       "worst_task_scope": None})
            if vals["heap"] > cur["peak_heap"]:
                cur["worst_heap_scope"] = key[0]
            if vals["deps"] > cur["peak_dep_pool"]:
                cur["worst_dep_scope"] = key[0]
            if vals["tasks"] + vals["retained"] > cur["peak_tasks_with_carry"]:
                cur["worst_task_scope"] = key[0]
            cur["peak_tasks"] = max(cur["peak_tasks"], vals["tasks"])
            cur["peak_heap"] = max(cur["peak_heap"], vals["heap"])
            cur["peak_dep_pool"] = max(cur["peak_dep_pool"], vals["deps"])
            cur["peak_tasks_with_carry"] = max(cur["peak_tasks_with_carry"], vals["tasks"] + vals["retained"])
            cur["peak_heap_with_carry"] = max(cur["peak_heap_with_carry"], vals["heap"] + vals["retained_heap"])
    layer = model.layer_rows()
    table = []
    for r in sorted(rings):
        row = rings[r]
        row.update({
            "scopes": [s.id for s in p.scopes if s.ring == r],
            "task_window": target["task_window"], "heap_limit": target["heap"], "dep_pool_limit": target["dep_pool"],
            "layer_tasks": layer.get(r, {}).get("tasks", 0), "layer_heap": layer.get(r, {}).get("heap", 0),
            "layer_dep_entries": layer.get(r, {}).get("deps", 0),
        })
        table.append(row)
        capacity_errors(plan, row, window_reported=bool(too_big & set(row["scopes"])))
    tensormap = {"peak_entries": tensormap_peak, "limit": target["tensormap"]}
    plan.put(RingTable(table, tensormap))
    if tensormap_peak > target["tensormap"]:
        plan.bag.add("PG112", f"up to {tensormap_peak:,} TensorMap entries are live at once; the pool holds "
                     f"{target['tensormap']:,}", p.entry_span,
                     hint="TENSORMAP_OVERFLOW (orch_error_code 11): fewer auto-scope outputs live at once "
                          "(manual scopes register nothing), or more scopes so producers retire")


def capacity_errors(plan: Plan, row: dict[str, Any], window_reported: bool) -> None:
    """PG110 (heap), PG111 (dep pool) and PG120 (task window, unless PG109 reported a scope of the ring)."""
    p = plan.program
    r = row["ring"]

    def where(key: str) -> Span:
        sid = row[key]
        return p.scopes[sid].span if sid is not None else p.entry_span

    if row["peak_heap"] > row["heap_limit"]:
        plan.bag.add(
            "PG110",
            f"ring {r}: scopes open at once hold {row['peak_heap']:,} B of buffers (1 KiB-rounded); the ring "
            f"heap is {row['heap_limit']:,} B",
            where("worst_heap_scope"),
            hint="HEAP_RING_DEADLOCK (orch_error_code 2): buffers are freed at scope exit, FIFO per ring, not at "
                 "last use; allocate per-layer buffers in the layer's own scope, or raise PTO2_RING_HEAP")
    if row["peak_dep_pool"] > row["dep_pool_limit"]:
        plan.bag.add(
            "PG111",
            f"ring {r}: up to {row['peak_dep_pool']:,} fanout entries are live at once; the dep pool holds "
            f"{row['dep_pool_limit']:,}",
            where("worst_dep_scope"),
            hint="DEP_POOL_OVERFLOW (orch_error_code 4): fewer edges (funnel fan-outs through one task, or one SPMD "
                 "grid instead of many tasks), more scopes, or a larger PTO2_RING_DEP_POOL")
    limit = row["task_window"] - 1
    if window_reported:
        return
    if row["peak_tasks"] > limit:
        plan.bag.add(
            "PG120",
            f"ring {r}: scopes open at once hold {row['peak_tasks']:,} tasks; the ring's task window holds "
            f"task_window - 1 = {limit:,} live tasks",
            where("worst_task_scope"),
            hint="FLOW_CONTROL_DEADLOCK (orch_error_code 3): tasks of open scopes are never reclaimed, so the "
                 "orchestrator waits for a slot forever; give loop bodies scopes of their own, move tasks to "
                 "another ring, or raise PTO2_RING_TASK_WINDOW (target task_window)")
    elif row["peak_tasks_with_carry"] > limit:
        plan.bag.add(
            "PG120",
            f"ring {r}: with the previous carried iteration still live, up to {row['peak_tasks_with_carry']:,} "
            f"tasks share the ring's task window of {limit:,} live tasks",
            where("worst_task_scope"), severity=Severity.WARNING,
            hint="back-pressure: the orchestrator stalls until the previous iteration retires; raise "
                 "PTO2_RING_TASK_WINDOW (target task_window) or shorten the loop body")

"""Rings and capacity: clamped rings (PG107), nested ring-3 scopes (PG108), the task window
per scope (PG109, code 1), heap per ring (PG110, code 2), dep pool (PG111, code 4), the
TensorMap (PG112, code 11), sync_start occupancy (PG113, code 7) and argument limits (PG114).

Facts of the runtime (simpler, runtime_and_orchestration.md §4, §7): ring = min(depth, 3);
memory and task slots are reclaimed FIFO per ring, at scope exit, never at last use; one
scope holds at most task_window - 1 tasks (alloc and dummy tasks count); every packed output
is rounded up to 1024 B. Estimates here are static: the tasks and buffers of every scope
instance that is open at once (the chain from the entry to the innermost scope) cannot be
reclaimed, and a loop body whose values are carried keeps its previous iteration alive too.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pgraph.diagnostics import Note
from pgraph.plan.base import Pass, Plan
from pgraph.source import Span
from pgraph.target import heap_bytes

ScopeKey = tuple[int, tuple[int, ...]]


class RingsPass(Pass):
    """Records `rings` (per-ring table) and `capacity`; reports PG107-PG114."""

    name = "rings"

    def run(self, plan: Plan) -> None:
        self.align = plan.program.target["output_align"]   # simpler: PTO2_PACKED_OUTPUT_ALIGN
        self.scope_loops = plan.graph.scope_loops
        self.per_key = self.scope_instances(plan)
        self.clamped(plan)
        self.nested_ring3(plan)
        self.scope_window(plan)
        self.ring_table(plan)
        self.task_limits(plan)

    def scope_instances(self, plan: Plan) -> dict[ScopeKey, dict[str, Any]]:
        """Per scope instance: tasks (weighted over loops inside it), heap bytes, members."""
        g = plan.graph
        out: dict[ScopeKey, dict[str, Any]] = defaultdict(lambda: {"tasks": 0, "compute": 0, "dummies": 0,
                                                                   "allocs": 0, "heap": 0, "members": []})
        for inst in g.instances:
            loops = inst.loops
            by_loop = dict(zip(loops, inst.iters))
            own = self.scope_loops[inst.scope]
            key = (inst.scope, tuple(by_loop.get(lid, 0) for lid in own))
            extra = 1
            for lid in loops:
                if lid not in own:
                    extra *= g.loop_weights[lid].get(by_loop[lid], 1)
            row = out[key]
            row["members"].append(inst.id)
            if inst.kind == "alloc":
                row["allocs"] += inst.blocks * extra
                row["tasks"] += inst.blocks * extra
                tensors = g.alloc_info[inst.id][2]
                row["heap"] += extra * sum(heap_bytes(t.nbytes, self.align) for t in tensors)
            else:
                row["tasks"] += extra
                row["dummies" if inst.kind == "dummy" else "compute"] += extra
        return out

    def chain(self, plan: Plan, key: ScopeKey) -> list[ScopeKey]:
        """The scope instances open while `key` is: itself and its enclosing instances."""
        out = []
        sid, its = key
        by_loop = dict(zip(self.scope_loops[sid], its))
        for s in plan.program.ancestors(sid):
            out.append((s, tuple(by_loop[lid] for lid in self.scope_loops[s])))
        return out

    # ---- PG107 / PG108 ----
    def clamped(self, plan: Plan) -> None:
        top = plan.program.target["rings"] - 1
        for s in plan.program.scopes:
            if s.depth > top:
                plan.bag.add("PG107", f"this scope is at depth {s.depth} and is clamped onto ring {top}, "
                             "which it shares with every scope from depth 3 down", s.span,
                             hint="ring = min(depth, 3) (simpler current_ring_id); deep nesting piles tasks and heap "
                                  "onto ring 3, where reclaim is FIFO across all of them")

    def nested_ring3(self, plan: Plan) -> None:
        p = plan.program
        top = p.target["rings"] - 1
        holds: dict[int, int] = defaultdict(int)
        for (sid, _), row in self.per_key.items():
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

    # ---- PG109 ----
    def scope_window(self, plan: Plan) -> None:
        p = plan.program
        limit = p.target["task_window"] - 1
        worst: dict[int, tuple[int, dict[str, Any]]] = {}
        for (sid, _), row in self.per_key.items():
            if row["tasks"] > worst.get(sid, (-1, {}))[0]:
                worst[sid] = (row["tasks"], row)
        for sid, (tasks, row) in sorted(worst.items()):
            if tasks <= limit:
                continue
            s = p.scopes[sid]
            plan.bag.add(
                "PG109",
                f"this scope would hold {tasks:,} tasks ({row['compute']:,} compute, {row['dummies']:,} dummies, "
                f"{row['allocs']:,} alloc tasks); one scope may hold at most task_window - 1 = {limit:,}",
                s.span,
                hint="SCOPE_DEADLOCK (orch_error_code 1, 507018 on the host): give the loop body its own scope, or "
                     "raise the task window (PTO2_RING_TASK_WINDOW / target task_window)")

    # ---- ring table, PG110-PG112 ----
    def ring_table(self, plan: Plan) -> None:
        p, g = plan.program, plan.graph
        target = p.target
        rings: dict[int, dict[str, Any]] = {}
        ring_of = {s.id: s.ring for s in p.scopes}
        carried_scopes = {lp.body_scope for lp in p.loops if lp.carries and lp.body_scope is not None}
        edges_out: dict[int, int] = defaultdict(int)
        for u, _v in g.graph.edges():
            if g.instances[u].kind != "alloc":
                edges_out[u] += 1
        registers = self.tensormap_registrations(plan)
        tensormap_peak = 0
        for key in self.per_key:
            chain = self.chain(plan, key)
            by_ring: dict[int, dict[str, int]] = defaultdict(lambda: {"tasks": 0, "heap": 0, "deps": 0, "retained": 0,
                                                                      "retained_heap": 0})
            tm = 0
            for ck in chain:
                row = self.per_key.get(ck)
                if row is None:
                    continue
                r = ring_of[ck[0]]
                by_ring[r]["tasks"] += row["tasks"]
                by_ring[r]["heap"] += row["heap"]
                by_ring[r]["deps"] += sum(edges_out[m] for m in row["members"])
                tm += sum(registers.get(m, 0) for m in row["members"])
                if ck[0] in carried_scopes:
                    by_ring[r]["retained"] += row["tasks"]
                    by_ring[r]["retained_heap"] += row["heap"]
            tensormap_peak = max(tensormap_peak, tm)
            for r, vals in by_ring.items():
                cur = rings.setdefault(r, {"ring": r, "peak_tasks": 0, "peak_heap": 0, "peak_dep_pool": 0,
                                           "peak_tasks_with_carry": 0, "peak_heap_with_carry": 0,
                                           "worst_heap_scope": None, "worst_dep_scope": None})
                if vals["heap"] > cur["peak_heap"]:
                    cur["worst_heap_scope"] = key[0]
                if vals["deps"] > cur["peak_dep_pool"]:
                    cur["worst_dep_scope"] = key[0]
                cur["peak_tasks"] = max(cur["peak_tasks"], vals["tasks"])
                cur["peak_heap"] = max(cur["peak_heap"], vals["heap"])
                cur["peak_dep_pool"] = max(cur["peak_dep_pool"], vals["deps"])
                cur["peak_tasks_with_carry"] = max(cur["peak_tasks_with_carry"], vals["tasks"] + vals["retained"])
                cur["peak_heap_with_carry"] = max(cur["peak_heap_with_carry"], vals["heap"] + vals["retained_heap"])
        layer = self.layer_rows(plan, ring_of, edges_out)
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
            self.capacity_errors(plan, row)
        plan.facts["rings"] = table
        plan.facts["tensormap"] = {"peak_entries": tensormap_peak, "limit": target["tensormap"]}
        if tensormap_peak > target["tensormap"]:
            plan.bag.add("PG112", f"up to {tensormap_peak:,} TensorMap entries are live at once; the pool holds "
                         f"{target['tensormap']:,}", plan.program.entry_span,
                         hint="TENSORMAP_OVERFLOW (orch_error_code 11): fewer auto-scope outputs live at once "
                              "(manual scopes register nothing), or more scopes so producers retire")

    def layer_rows(self, plan: Plan, ring_of: dict[int, int], edges_out: dict[int, int]) -> dict[int, dict[str, int]]:
        """One layer's share per ring: tasks (alloc included), heap bytes, fanout entries."""
        g = plan.graph
        out: dict[int, dict[str, int]] = defaultdict(lambda: {"tasks": 0, "heap": 0, "deps": 0})
        lid = plan.layer_loop
        rep = plan.representative_iteration()
        if lid is None or rep is None:
            return out
        for inst in g.instances:
            loops = inst.loops
            if not loops or loops[0] != lid or inst.iters[0] != rep:
                continue
            r = ring_of[inst.scope]
            if inst.kind == "alloc":
                out[r]["tasks"] += inst.blocks
                out[r]["heap"] += sum(heap_bytes(t.nbytes, self.align) for t in g.alloc_info[inst.id][2])
            else:
                out[r]["tasks"] += 1
            out[r]["deps"] += edges_out.get(inst.id, 0)
        return out

    def tensormap_registrations(self, plan: Plan) -> dict[int, int]:
        """TensorMap inserts per instance: Out/InOut arguments of auto-scope tasks."""
        out: dict[int, int] = {}
        manual = {s.id for s in plan.program.scopes if s.mode == "manual"}
        for node, args in plan.graph.args.items():
            if plan.graph.instances[node].scope in manual:
                continue
            out[node] = sum(1 for a in args if a.param.direction != "in")
        return out

    def capacity_errors(self, plan: Plan, row: dict[str, Any]) -> None:
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
                hint="DEP_POOL_OVERFLOW (orch_error_code 4): fewer edges (funnel fan-outs through one task), more "
                     "scopes, or a larger PTO2_RING_DEP_POOL")

    # ---- PG113 / PG114 ----
    def task_limits(self, plan: Plan) -> None:
        p = plan.program
        t = p.target
        for d in p.dispatches:
            if d.kind == "dummy" or d.kernel is None:
                continue
            core = p.kernels[d.kernel].core
            blocks = d.block_count
            if d.sync_start and blocks > 1:
                limit, what = (t["aiv"], "AIV cores") if core == "aiv" else (t["clusters"], "clusters")
                if blocks > limit:
                    plan.bag.add("PG113", f"sync_start grid '{d.name}' has {blocks} blocks but only {limit} {what} "
                                 "can start together", d.span,
                                 hint="REQUIRE_SYNC_START_INVALID (code 7): a sync_start cohort launches all-or-nothing; "
                                      f"use at most {limit} blocks, or drop sync_start")
            tensors = [a for a in d.args if a.region is not None]
            scalars = [a for a in d.args if a.region is None]
            problems = []
            if len(tensors) > t["max_tensor_args"]:
                problems.append(f"{len(tensors)} tensor arguments (max {t['max_tensor_args']})")
            if len(scalars) > t["max_scalar_args"]:
                problems.append(f"{len(scalars)} scalar arguments (max {t['max_scalar_args']})")
            for a in tensors:
                assert a.region is not None
                name = a.region.tensor
                ndims = len(p.tensors[name].shape) if name in p.tensors else 0
                if ndims > t["max_dims"]:
                    problems.append(f"'{name}' has {ndims} dimensions (max {t['max_dims']})")
            if problems:
                plan.bag.add("PG114", f"task '{d.name}' exceeds the runtime's per-task limits: {'; '.join(problems)}",
                             d.span, hint="CoreTaskArgs holds 32 tensors and 16 scalars of at most 5 dimensions "
                                          "(simpler arg_direction.h); split the kernel or pack arguments")

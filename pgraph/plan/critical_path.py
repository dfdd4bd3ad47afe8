"""Critical path: per-task cost, the longest path, and where the early-resolve chain breaks.

Cost of a task = ceil(blocks / cores of its shape) x per-block cost (µs), cores from the
target (a2a3: 24 AIC, 48 AIV, 24 clusters for MIX), per-block cost from the cost table
(`cost KERNEL = N` or `cost aic|aiv|mix|dummy = N` in the spec; defaults in
pgraph.ir.limits.DEFAULT_COSTS). Alloc tasks cost 0. With a window-expanded layer loop the
whole-program length is extrapolated: length(window) + (layers - 2) x per-layer increment.
"""

from __future__ import annotations

from typing import Any

import attrs

from pgraph.ir.instances import Instance
from pgraph.kinds import Core, TaskKind
from pgraph.plan.base import Fact, Pass, Plan
from pgraph.plan.early_dispatch import EarlyState, EarlyStatus
from pgraph.plan.reach import Reach

CORES_KEY = {Core.AIC: "aic", Core.AIV: "aiv", Core.MIX: "clusters"}


@attrs.frozen
class CriticalPath(Fact):
    """The longest path (None for an empty graph): length, per-layer increment, steps, first broken link."""

    value: dict[str, Any] | None


def task_cost(plan: Plan, inst: Instance) -> tuple[int, int]:
    """(waves, cost µs) of one instance: waves = ceil(blocks / cores of its shape)."""
    p = plan.program
    if inst.kind is TaskKind.ALLOC:
        return 0, 0
    if inst.kind is TaskKind.DUMMY:
        return 0, p.costs.get("dummy", 0)
    d = p.dispatch(inst.dispatch)
    kernel = p.kernels[d.kernel] if d.kernel else None
    core = kernel.core if kernel else Core.AIV
    cores = p.target.get(CORES_KEY[core], 1)
    waves = -(-inst.blocks // cores) if inst.blocks else 0
    per_block = p.costs.get(kernel.name, p.costs.get(core, 1)) if kernel else p.costs.get(core, 1)
    return waves, waves * per_block


class CriticalPathPass(Pass):
    """Produces CriticalPath: the path, its length (cost units), per-layer increment, first broken link."""

    name = "critical-path"
    requires = (EarlyStatus, Reach)
    produces = (CriticalPath,)

    def run(self, plan: Plan) -> None:
        g = plan.graph
        preds = plan.get(Reach).pred
        cost = {inst.id: task_cost(plan, inst)[1] for inst in g.instances}
        dist: dict[int, int] = {}
        best_pred: dict[int, int | None] = {}
        for v in range(len(g.instances)):  # instance ids are a topological order (pgraph.plan.reach)
            pred = max(preds[v], key=lambda u: (dist[u], -u), default=None)
            dist[v] = cost[v] + (dist[pred] if pred is not None else 0)
            best_pred[v] = pred
        if not dist:
            plan.put(CriticalPath(None))
            return
        end = max(dist, key=lambda v: (dist[v], -v))
        path = []
        cur: int | None = end
        while cur is not None:
            path.append(cur)
            cur = best_pred[cur]
        path.reverse()
        length = dist[end]
        per_layer, total = self.extrapolate(plan, dist, length)
        status = plan.get(EarlyStatus).status
        broken = self.first_broken(plan, path, status)
        layer_path = [n for n in path if plan.in_layer(g.instances[n])]
        layer_broken = self.first_broken(plan, layer_path, status)
        plan.put(CriticalPath({
            "length_us": length if per_layer is None else total,
            "window_length_us": length,
            "per_layer_us": per_layer,
            "path": [self.step(plan, g.instances[n], cost[n]) for n in path],
            "first_broken_early_link": broken,
            "first_broken_early_link_in_layer": layer_broken,
        }))

    @staticmethod
    def first_broken(plan: Plan, path: list[int], status: dict[int, tuple[EarlyState, list[int]]]
                     ) -> dict[str, str] | None:
        """The first edge u -> v of `path` whose consumer v cannot be dispatched early."""
        g = plan.graph
        for u, v in zip(path, path[1:]):
            state, blocking = status.get(v, (EarlyState.READY, []))
            if state not in (EarlyState.INELIGIBLE, EarlyState.DUMMY):
                continue
            why = ("a dummy is never an early-dispatch candidate" if state is EarlyState.DUMMY else
                   "unflagged producer(s): " + ", ".join(sorted({g.instances[b].label for b in blocking})))
            return {"from": g.instances[u].label, "to": g.instances[v].label, "reason": why}
        return None

    @staticmethod
    def step(plan: Plan, inst: Instance, cost: int) -> dict[str, Any]:
        waves, _ = task_cost(plan, inst)
        return {"task": inst.label, "kind": inst.kind, "blocks": inst.blocks, "waves": waves, "cost_us": cost}

    @staticmethod
    def extrapolate(plan: Plan, dist: dict[int, int], length: int) -> tuple[int | None, int]:
        lid = plan.layer_loop
        if lid is None:
            return None, length
        weights = plan.graph.loop_weights.get(lid, {})
        if len(weights) < 2 or all(w == 1 for w in weights.values()):
            return None, length
        first, rep = sorted(weights)[:2]
        ends: dict[int, int] = {}
        for inst in plan.graph.instances:
            if inst.kind is TaskKind.ALLOC or not inst.loops or inst.loops[0] != lid:
                continue
            it = inst.iters[0]
            ends[it] = max(ends.get(it, 0), dist[inst.id])
        per_layer = ends.get(rep, 0) - ends.get(first, 0)
        extra = weights[rep] - 1
        return per_layer, length + extra * per_layer

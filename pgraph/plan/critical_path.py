"""Critical path: per-task cost, the longest path, and where the early-resolve chain breaks.

Cost of a task = ceil(blocks / cores of its shape) x per-block cost (µs), cores from the
target (a2a3: 24 AIC, 48 AIV, 24 clusters for MIX), per-block cost from the cost table
(`cost KERNEL = N` or `cost aic|aiv|mix|dummy = N` in the spec; defaults in
pgraph.ir.limits.DEFAULT_COSTS). Alloc tasks cost 0. With a window-expanded layer loop the
whole-program length is extrapolated: length(window) + (layers - 2) x per-layer increment.

A full-width sync_start grid beside which a task can be staged early (PG119's warning, the
`SyncStartHolders` fact) also pays the wait for its units: the longest a holder can keep one,
its slowest producer not ordered before the grid plus its own cost (the holder is staged once
that producer is placed and runs once it ends). The step says so (`wait_us`, `waits_for`).
"""

from __future__ import annotations

from typing import Any

import attrs

from pgraph import records
from pgraph.fastpath import reference_mode
from pgraph.ir.cost_model import default_figures, task_us
from pgraph.ir.instances import Instance
from pgraph.kinds import Core, TaskKind
from pgraph.plan.base import Fact, Pass, Plan
from pgraph.plan.early_dispatch import EarlyState, EarlyStatus
from pgraph.plan.reach import Reach
from pgraph.plan.sync_start import SyncStartHolders

CORES_KEY = {Core.AIC: "aic", Core.AIV: "aiv", Core.MIX: "clusters"}


@records.value
@attrs.frozen(repr=False, eq=False)
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
    requires = (EarlyStatus, Reach, SyncStartHolders)
    produces = (CriticalPath,)

    def run(self, plan: Plan) -> None:
        g = plan.graph
        preds = plan.get(Reach).pred
        status = plan.get(EarlyStatus).status
        cost = {inst.id: task_cost(plan, inst)[1] for inst in g.instances}
        waits = self.holder_waits(plan, cost)
        for v, (w, _u) in waits.items():
            cost[v] += w
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
        per_layer, _ = self.extrapolate(plan, dist, length)
        total = length
        unrolled = path
        layer_path = [n for n in path if plan.in_layer(g.instances[n])]
        if g.windowed:   # the longest path of the full program (its broken links are on that one)
            total, layer_ends, steps = unrolled_length(plan, cost)
            if per_layer is not None:
                lo = plan.program.loops[plan.layer_loop].axis.lo if plan.layer_loop is not None else 0
                per_layer = layer_ends.get(lo + 1, 0) - layer_ends.get(lo, 0)
            rep = plan.representative_iteration()
            unrolled = [n for n, _ in steps]
            # the representative layer: the layer copy's first pass (its later passes are other layers)
            layer_path = [n for n, lv in steps if plan.in_layer(g.instances[n]) and lv == rep]
        broken = self.first_broken(plan, unrolled, status)
        layer_broken = self.first_broken(plan, layer_path, status)
        plan.put(CriticalPath({
            "length_us": total,
            "window_length_us": length,
            "per_layer_us": per_layer,
            "path": [self.step(plan, g.instances[n], cost[n], waits.get(n)) for n in path],
            "first_broken_early_link": broken,
            "first_broken_early_link_in_layer": layer_broken,
            "modelled": self.modelled(plan, preds),
        }))

    @staticmethod
    def first_broken(plan: Plan, path: list[int], status: dict[int, tuple[EarlyState, list[int]]]
                     ) -> dict[str, Any] | None:
        """The first edge u -> v of `path` whose consumer v cannot be dispatched early: `from`,
        `to`, `reason` (a producer list summarised, `producers_text`) and, for an unflagged
        producer, `blocking` (every one's label, in submit order)."""
        g = plan.graph
        for u, v in zip(path, path[1:]):
            state, blocking = status.get(v, (EarlyState.READY, []))
            if state not in (EarlyState.INELIGIBLE, EarlyState.DUMMY):
                continue
            if state is EarlyState.DUMMY:
                return {"from": g.instances[u].label, "to": g.instances[v].label,
                        "reason": "a dummy is never an early-dispatch candidate"}
            labels = [g.instances[b].label for b in sorted(set(blocking))]  # in submit order
            return {"from": g.instances[u].label, "to": g.instances[v].label,
                    "reason": producers_text(labels), "blocking": labels}
        return None

    def modelled(self, plan: Plan, preds: list[list[int]]) -> dict[str, Any]:
        """The longest path under the cost model `pgraph sim` uses (`pgraph.ir.cost_model.task_us`,
        the shipped a2a3 figures: roofline or `cost` lines, plus one scheduling hop per task, and the
        sync_start holders' wait), in µs; nothing else running. Distances in integer ns, so that the
        window's steady-state jump (`unrolled_length`) stays exact. Under a window the length is the
        full program's and the listed path the window's, as for the cost-unit path."""
        g = plan.graph
        fig = default_figures()
        matmuls: dict[str, tuple[float, float] | None] = {}
        cost = {inst.id: round(task_us(plan.program, g, inst, fig, matmuls) * 1000) for inst in g.instances}
        for v, (w, _u) in self.holder_waits(plan, cost).items():
            cost[v] += w
        dist: dict[int, int] = {}
        best: dict[int, int | None] = {}
        for v in range(len(g.instances)):
            pred = max(preds[v], key=lambda u: (dist[u], -u), default=None)
            dist[v] = cost[v] + (dist[pred] if pred is not None else 0)
            best[v] = pred
        end = max(dist, key=lambda v: (dist[v], -v))
        total, path = dist[end], []
        cur: int | None = end
        while cur is not None:
            path.append(cur)
            cur = best[cur]
        path.reverse()
        if g.windowed:   # the length of the full program; the listed path is the window's, as above
            total = unrolled_length(plan, cost)[0]
        return {"length_us": total / 1000, "figures": "pgraph/ir/a2a3_timing.toml",
                "path": [{"task": g.instances[n].label, "dispatch": g.instances[n].dispatch, "kind": g.instances[n].kind,
                          "us": cost[n] / 1000} for n in path]}

    @staticmethod
    def holder_waits(plan: Plan, cost: dict[int, int]) -> dict[int, tuple[int, int]]:
        """Per grid instance with staged holders: (the wait: max over holders of its slowest
        producer's cost plus its own, the holder giving it)."""
        out: dict[int, tuple[int, int]] = {}
        for v, held in plan.get(SyncStartHolders).holders.items():
            out[v] = max(((cost[u] + max(cost[p] for p in prods), u) for u, prods in held), key=lambda x: (x[0], -x[1]))
        return out

    @staticmethod
    def step(plan: Plan, inst: Instance, cost: int, wait: tuple[int, int] | None = None) -> dict[str, Any]:
        waves, _ = task_cost(plan, inst)
        row = {"task": inst.label, "kind": inst.kind, "blocks": inst.blocks, "waves": waves, "cost_us": cost}
        if wait is not None:
            row["wait_us"] = wait[0]
            row["waits_for"] = plan.graph.instances[wait[1]].label
        return row

    @staticmethod
    def extrapolate(plan: Plan, dist: dict[int, int], length: int) -> tuple[int | None, int]:
        """(per-layer increment: end of layer lo+1 minus end of layer lo, None without two layers;
        the window's length extended by that increment for every layer it stands for)."""
        lid = plan.layer_loop
        if lid is None:
            return None, length
        weights = plan.graph.loop_weights.get(lid, {})
        if len(weights) < 2:
            return None, length
        first, rep = sorted(weights)[:2]  # lo and lo+1, windowed or not (--full gives the same figure)
        ends: dict[int, int] = {}
        for inst in plan.graph.instances:
            if inst.kind is TaskKind.ALLOC or not inst.loops or inst.loops[0] != lid:
                continue
            it = inst.iters[0]
            ends[it] = max(ends.get(it, 0), dist[inst.id])
        per_layer = ends.get(rep, 0) - ends.get(first, 0)
        extra = weights[rep] - 1
        return per_layer, length + extra * per_layer


def unrolled_length(plan: Plan, cost: dict[int, int]) -> tuple[int, dict[int, int], list[tuple[int, int | None]]]:
    """The longest path of the fully expanded program, computed on the window; the end of each
    layer (the largest distance of a task of layer-loop iteration value v, keyed by v); and that
    path from its start as (window node, the layer-loop value it stands for there: None outside
    the layer loop), a repeated copy once per pass evaluated (the passes a steady loop skips are
    left out).

    The copy of a windowed loop's iteration lo+1 stands for iterations lo+1..hi-1, which are
    identical (pgraph.expand.window): its nodes are evaluated once per iteration they stand
    for. An edge into that copy from the copy of iteration lo is the edge every iteration gets
    from its predecessor, so from the second pass on it reads the value the previous pass left
    on the producer's lo+1 twin. Nested windowed loops repeat inside each pass. An edge out of
    the loop from iteration lo's copy takes the largest value any iteration reached. The cost is
    the window's size times the iterations it stands for; nothing is expanded.
    """
    u = _Unroller(plan, cost)
    u.evaluate(0, len(u.dist), (), {})
    path: list[tuple[int, int | None]] = []
    cur = u.best_ref
    while cur is not None:
        path.append(cur[0])
        cur = cur[1]
    path.reverse()
    return u.best, u.layer_ends, path


#: a path as a linked list (node, the layer value it stands for) -> rest
_Ref = tuple[tuple[int, int | None], Any]


class _Unroller:
    """The state of one `unrolled_length` evaluation: distances, paths, the best one, layer ends."""

    def __init__(self, plan: Plan, cost: dict[int, int]) -> None:
        g = self.g = plan.graph
        n = len(g.instances)
        self.cost = cost
        self.jump = not reference_mode("steady-jump")  # PGRAPH_REFERENCE=1: every pass evaluated, no steady-state jump
        lo = self.lo = {lp.id: lp.axis.lo for lp in plan.program.loops}
        self.preds = [list(g.pred[v]) for v in range(n)]
        self.dist = [0] * n
        self.best = 0
        layer = self.layer = plan.layer_loop
        #: per node: its layer-loop iteration value (None outside the layer loop and for alloc tasks)
        self.own_layer = [None if inst.kind is TaskKind.ALLOC or layer not in inst.loops
                          else inst.iters[inst.loops.index(layer)] for inst in g.instances]
        self.layer_ends: dict[int, int] = {}
        self.layer_pass: int | None = None   # the layer value the repeated layer copy stands for now
        #: per node, the path to it as a linked list (node, rest) of the pass that set its distance
        self.ref: list[_Ref | None] = [None] * n
        self.best_ref: _Ref | None = None
        #: per node: (loop, position) of each windowed loop whose iteration-lo+1 copy it belongs to,
        #: outermost first (computed once: the evaluation visits every node once per pass)
        self.reps = [tuple((lid, pos) for pos, (lid, it) in enumerate(zip(inst.loops, inst.iters))
                           if lid in g.windowed and it == lo[lid] + 1) for inst in g.instances]

    def rep_loop(self, i: int, active: tuple[int, ...]) -> tuple[int, int] | None:
        """(loop, position) of the outermost windowed loop, not already being repeated, whose
        iteration-lo+1 copy node i belongs to."""
        for lid, pos in self.reps[i]:
            if lid not in active:
                return lid, pos
        return None

    def twin(self, u: int, lid: int) -> int | None:
        inst = self.g.instances[u]
        if inst.kind is TaskKind.ALLOC or lid not in inst.loops:
            return None
        iters = tuple(it + 1 if l2 == lid else it for l2, it in zip(inst.loops, inst.iters))
        return self.g.by_key.get((inst.dispatch, iters, inst.index))

    def steady(self, i: int, j: int, dv: list[int], twins: dict[int, int]) -> bool:
        """True when the pass over nodes i..j-1 is in its steady state: every moving node moved by
        the same step s > 0 (its longest path then comes through a moving input: a still input
        would have held it still), and no still node reads a moving node or the carried value of a
        moving twin (it stays still in every later pass). Then each pass adds s to the same nodes."""
        moving = {x for x in dv if x}
        if len(moving) > 1 or any(x < 0 for x in moving):
            return False
        if not moving:
            return True
        for k in range(i, j):
            if dv[k - i]:
                continue
            for u in self.preds[k]:
                if i <= u < j and dv[u - i]:
                    return False
                t = twins.get(u)
                if t is not None and dv[t - i]:
                    return False
        return True

    def evaluate(self, a: int, b: int, active: tuple[int, ...], carried: dict[int, tuple[int, Any]]) -> None:
        """Evaluate nodes a..b-1 once; `carried[u]` (distance, path) replaces node u's (a lo-copy
        producer, read from its lo+1 twin's previous pass)."""
        reps, instances = self.reps, self.g.instances
        i = a
        while i < b:
            found = self.rep_loop(i, active) if reps[i] else None
            if found is None:
                self.node(i, carried)
                i += 1
                continue
            lid, pos = found
            head = instances[i]
            j = i
            while j < b and instances[j].loops[:pos + 1] == head.loops[:pos + 1] \
                    and instances[j].iters[:pos + 1] == head.iters[:pos + 1]:
                j += 1
            self.repeat(i, j, lid, active, carried)
            i = j

    def node(self, i: int, carried: dict[int, tuple[int, Any]]) -> None:
        """Node i's distance and path from its predecessors' (or their carried values)."""
        dist, ref = self.dist, self.ref
        m = 0
        mref = None
        mu = -1
        for u in self.preds[i]:
            c = carried.get(u) if carried else None
            val, uref = c if c is not None else (dist[u], ref[u])
            if mref is None or val > m or (val == m and u < mu):   # ties: the lowest id, as in --full
                m, mref, mu = val, uref, u
        dist[i] = self.cost[i] + m
        lv = self.own_layer[i]
        if lv is not None and self.layer_pass is not None:
            lv = self.layer_pass
        ref[i] = ((i, lv), mref)
        if self.best_ref is None or dist[i] > self.best:
            self.best, self.best_ref = dist[i], ref[i]
        if lv is not None and dist[i] > self.layer_ends.get(lv, -1):
            self.layer_ends[lv] = dist[i]

    def repeat(self, i: int, j: int, lid: int, active: tuple[int, ...], carried: dict[int, tuple[int, Any]]) -> None:
        """Nodes i..j-1, the iteration-lo+1 copy of windowed loop `lid`, once per iteration it
        stands for (or until the steady state, then the jump to the last pass)."""
        dist, ref, lo, layer = self.dist, self.ref, self.lo, self.layer
        twins: dict[int, int] = {}
        for v in range(i, j):
            for u in self.preds[v]:
                if u < i and u not in twins:
                    t = self.twin(u, lid)
                    if t is not None and i <= t < j:
                        twins[u] = t
        peak: dict[int, tuple[int, Any]] = {}
        inner = carried
        passes = self.g.loop_weight(lid, lo[lid] + 1)
        prev: list[int] | None = None
        prev_dv: list[int] | None = None
        for done in range(1, passes + 1):
            if lid == layer:
                self.layer_pass = lo[lid] + done
            self.evaluate(i, j, (*active, lid), inner)
            if lid == layer:
                self.layer_pass = None
            for u, t in twins.items():
                if u not in peak or dist[t] > peak[u][0]:
                    peak[u] = (dist[t], ref[t])
            inner = {**carried, **{u: (dist[t], ref[t]) for u, t in twins.items()}}
            cur = dist[i:j]
            if prev is not None:
                dv = [x - y for x, y in zip(cur, prev)]
                if self.jump and dv == prev_dv and self.steady(i, j, dv, twins):
                    self.skip(i, j, lid, done, passes, dv, twins, peak)
                    break
                prev_dv = dv
            prev = cur
        for u, (value, vref) in peak.items():
            if value > dist[u]:
                dist[u], ref[u] = value, vref

    def skip(self, i: int, j: int, lid: int, done: int, passes: int, dv: list[int], twins: dict[int, int],
             peak: dict[int, tuple[int, Any]]) -> None:
        """The steady-state jump after pass `done` of `passes`: two passes in a row moved each node
        by the same amount as the pass before, all moving nodes by one step, and no still node has
        a moving input: each later pass adds the same again, so the last pass is reached at once."""
        dist, ref = self.dist, self.ref
        rest = passes - done
        for k in range(i, j):
            dist[k] += rest * dv[k - i]
        for u, t in twins.items():
            if dist[t] > peak[u][0]:
                peak[u] = (dist[t], ref[t])
        top = max(range(i, j), key=lambda k: dist[k], default=None)
        if top is not None and dist[top] > self.best:
            self.best, self.best_ref = dist[top], ref[top]
        if lid == self.layer:   # the last layer's end (the skipped ones are not listed)
            ends = [dist[k] for k in range(i, j) if self.own_layer[k] is not None]
            if ends:
                self.layer_ends[self.lo[lid] + passes] = max(ends)


#: Producers named in a summarised list (`producers_text`); `--notes` prints them all.
SHOWN_PRODUCERS = 5


def producers_text(labels: list[str], full: bool = False) -> str:
    """'unflagged producer(s): A, B' for a few producers; past SHOWN_PRODUCERS (unless `full`),
    the count, the first ones in submit order and where the rest are: a fan-in of 16,000 tiles
    is one short line, not 229 KB."""
    if full or len(labels) <= SHOWN_PRODUCERS:
        return "unflagged producer(s): " + ", ".join(labels)
    return (f"{len(labels):,} unflagged producers: " + ", ".join(labels[:SHOWN_PRODUCERS])
            + f" and {len(labels) - SHOWN_PRODUCERS:,} more (`--notes` lists all)")

"""What a simulated run says: makespan, per-layer time, critical path and slack, utilisation, waits.

Definitions (times in µs, per task, from `engine.TaskState`):

- *data wait* = data ready (last producer completed) - submit, when positive: it was
  submitted and waited on producers;
- *orchestrator wait* = submit - data ready, when positive: its producers were done but it
  was not yet submitted (tasks with no producer count from 0);
- *cohort wait*: the part of [ready, first start] during which a sync_start drain froze the
  core kinds the task needs (`engine.Drain`: a cohort that did not fit waited for its units,
  and no other task was placed on those kinds meanwhile). For the cohort itself it is the time
  its units were held by others (tasks running or staged early on them, `Drain.holders`); it is
  booked to the cohort, never to the scheduler (whose threads are idle then);
- *core wait*: outside the cohort wait, the part of [ready, first start] during which no idle
  core (AIC, AIV) or idle cluster (MIX) existed anywhere on the machine (a block queued in a
  pending slot behind a running one waits for a core);
- *scheduler wait*: the rest of [ready, first start]: the polling round, the dispatch phase,
  the doorbell and the core's setup;
- *critical path*: from the task that completes last, back through the producer whose
  completion made each task ready; a task that became ready at its submit ends the walk
  (its [0, ready] is orchestrator time). The steps' parts add up to the makespan exactly;
- *slack* of a task: how much later it could complete without delaying any consumer's
  readiness beyond that consumer's own slack (leaves: makespan - completion).
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from typing import Any

import attrs

from pgraph import records

from .cost import CostModel
from .engine import DRAIN_KINDS, Result
from .records import Shape

IDLE_KEY = {Shape.AIC: "aic", Shape.AIV: "aiv", Shape.MIX: "cluster"}
#: the core kinds a task of each shape needs (a drain freezing one of them holds it off)
KINDS = {Shape.AIC: ("aic",), Shape.AIV: ("aiv",), Shape.MIX: ("aic", "aiv")}


class DrainSpans:
    """The drains freezing each shape's core kinds, as sorted disjoint intervals (one drain runs at
    a time): the measure of [a, b] inside them, and the pieces of [a, b] outside them."""

    def __init__(self, res: Result) -> None:
        self.by_shape: dict[Shape, list[tuple[float, float, int]]] = {}
        for shape, kinds in KINDS.items():
            self.by_shape[shape] = sorted((d.start, d.end, i) for i, d in enumerate(res.drains)
                                          if set(kinds) & set(DRAIN_KINDS[res.graph.tasks[d.task].shape]))
        self.starts = {k: [a for a, _, _ in v] for k, v in self.by_shape.items()}

    def split(self, shape: Shape, a: float, b: float) -> tuple[float, list[tuple[float, float]], int | None]:
        """(time of [a, b] inside drains, the pieces outside, the drain holding it longest)."""
        spans = self.by_shape.get(shape, [])
        if not spans or b <= a:
            return 0.0, [(a, b)] if b > a else [], None
        i = max(0, bisect.bisect_right(self.starts[shape], a) - 1)
        inside, pieces, cur, best, top = 0.0, [], a, 0.0, None
        while i < len(spans) and spans[i][0] < b:
            s0, s1, idx = spans[i]
            lo, hi = max(s0, a), min(s1, b)
            if hi > lo:
                if lo > cur:
                    pieces.append((cur, lo))
                inside += hi - lo
                if hi - lo > best:
                    best, top = hi - lo, idx
                cur = max(cur, hi)
            i += 1
        if cur < b:
            pieces.append((cur, b))
        return inside, pieces, top


class ZeroIdle:
    """Measure of the time an idle counter was 0, over any interval (prefix sums of a step function)."""

    def __init__(self, steps: tuple[tuple[float, int], ...], end: float) -> None:
        self.times = [t for t, _ in steps]
        self.values = [v for _, v in steps]
        self.cum = [0.0]
        for i, (t, v) in enumerate(steps):
            nxt = steps[i + 1][0] if i + 1 < len(steps) else max(end, t)
            self.cum.append(self.cum[-1] + (nxt - t if v == 0 else 0.0))

    def upto(self, x: float) -> float:
        i = bisect.bisect_right(self.times, x) - 1
        if i < 0:
            return 0.0
        return self.cum[i] + ((x - self.times[i]) if self.values[i] == 0 else 0.0)

    def between(self, a: float, b: float) -> float:
        return max(0.0, self.upto(b) - self.upto(a)) if b > a else 0.0


@records.value
@attrs.frozen(repr=False, eq=False)
class Waits:
    """The five waits of one task (µs); `cohort_task`: the sync_start task whose drain held it
    longest (None without a cohort wait)."""

    data: float
    orchestrator: float
    core: float
    scheduler: float
    cohort: float = 0.0
    cohort_task: int | None = None


def _ready_waits(res: Result, i: int, zero: dict[str, ZeroIdle], drains: DrainSpans) -> tuple[float, float, float, int | None]:
    """(cohort, core, scheduler wait, the drain's task) of task i over [ready, first start]."""
    t, s = res.graph.tasks[i], res.tasks[i]
    if not t.runs_on_cores or s.first_start <= s.ready:
        return 0.0, 0.0, max(0.0, s.first_start - s.ready), None
    if s.first_place <= s.ready:   # staged early: placed before it was ready, nothing could freeze it
        cohort, pieces, top = 0.0, [(s.ready, s.first_start)], None
    else:
        cohort, pieces, top = drains.split(t.shape, s.ready, s.first_start)
    idle = zero[IDLE_KEY[t.shape]]
    core = sum((idle.between(a, b) for a, b in pieces), 0.0)
    sched = max(0.0, s.first_start - s.ready - cohort - core)
    return cohort, core, sched, None if top is None else res.drains[top].task


def task_waits(res: Result) -> list[Waits | None]:
    """Waits per task (None for alloc tasks and tasks that never started)."""
    zero = {k: ZeroIdle(v, res.makespan) for k, v in res.idle_steps.items()}
    drains = DrainSpans(res)
    out: list[Waits | None] = []
    for i, (t, s) in enumerate(zip(res.graph.tasks, res.tasks)):
        if t.shape is Shape.ALLOC or s.first_start == float("inf") or s.submit == float("inf"):
            out.append(None)
            continue
        dr = max(s.data_ready, 0.0) if t.producers else 0.0
        data = max(0.0, dr - s.submit)
        orch = max(0.0, s.submit - dr)
        cohort, core, sched, by = _ready_waits(res, i, zero, drains)
        out.append(Waits(data, orch, core, sched, cohort, by))
    return out


def cohorts(res: Result) -> list[dict[str, Any]]:
    """Every sync_start drain: the cohort, how long it waited for its units, and who held them
    (running, or staged early and waiting on named producers), the last to finish first."""
    g, st = res.graph, res.tasks
    out = []
    for d in res.drains:
        held = []
        for u, staged in sorted(d.holders, key=lambda h: (-min(st[h[0]].end, res.makespan), h[0])):
            waits_on = [g.tasks[p.task].name for p in g.tasks[u].producers
                        if st[p.task].done > d.start] if staged else []
            held.append({"task": g.tasks[u].name, "staged": staged, "end": st[u].end, "waits_on": waits_on})
        out.append({"task": g.tasks[d.task].name, "from": d.start, "to": d.end, "wait_us": d.end - d.start,
                    "holders": held})
    return out


def critical_path(res: Result) -> list[dict[str, Any]]:
    """The steps of the critical path, first to last (see the module docstring)."""
    g, st = res.graph, res.tasks
    zero = {k: ZeroIdle(v, res.makespan) for k, v in res.idle_steps.items()}
    drains = DrainSpans(res)
    done = [s for s in range(len(st)) if st[s].completed]
    if not done:
        return []
    cur: int | None = max(done, key=lambda i: (st[i].done, -i))
    steps = []
    while cur is not None:
        t, s = g.tasks[cur], st[cur]
        prev = None
        if t.producers and s.data_ready >= s.submit:
            prev = max((p.task for p in t.producers), key=lambda u: (st[u].done, -u))
        cohort, core, sched, by = _ready_waits(res, cur, zero, drains)
        steps.append({
            "task": t.name, "dispatch": t.dispatch, "shape": str(t.shape), "blocks": t.blocks,
            "bound_by": "data" if prev is not None else "orchestrator",
            "producer": g.tasks[prev].name if prev is not None else None,
            "before_ready_us": s.ready if prev is None else 0.0,
            "cohort_wait_us": cohort, "cohort": g.tasks[by].name if by is not None else None,
            "core_wait_us": core, "scheduler_wait_us": sched,
            "kernel_us": max(0.0, s.end - s.first_start) if t.runs_on_cores else 0.0,
            "completion_us": max(0.0, s.done - max(s.end, s.first_start)),
            "ready": s.ready, "start": s.first_start, "end": s.end, "done": s.done,
        })
        cur = prev
    steps.reverse()
    return steps


def slack(res: Result) -> list[float]:
    """Per task: how much later it could complete without moving the makespan (see module docstring)."""
    g, st = res.graph, res.tasks
    cons = g.consumers()
    out = [0.0] * len(st)
    for v in range(len(st) - 1, -1, -1):
        s = st[v]
        if not s.completed:
            out[v] = 0.0
            continue
        cands = [out[c] + st[c].ready - s.done for c in cons[v] if st[c].ready < float("inf")]
        out[v] = max(0.0, min(cands) if cands else res.makespan - s.done)
    return out


def layer_times(res: Result) -> dict[str, Any]:
    """End of each layer (last completion of its tasks) and the per-layer increments."""
    ends: dict[int, float] = defaultdict(float)
    for t, s in zip(res.graph.tasks, res.tasks):
        if t.layer is not None and s.completed:
            ends[t.layer] = max(ends[t.layer], s.done)
    layers = sorted(ends)
    if not layers:
        return {"layers": 0}
    inc = [ends[b] - ends[a] for a, b in zip(layers, layers[1:])]
    return {
        "layers": len(layers),
        "first_layer_end_us": ends[layers[0]],
        "increments_us": inc,
        "steady_us": statistics.median(inc) if inc else ends[layers[0]],
        "mean_us": (ends[layers[-1]] - ends[layers[0]]) / len(inc) if inc else ends[layers[0]],
    }


def utilisation(res: Result) -> dict[str, Any]:
    """Busy fraction of every core (kernel time / makespan) and of every scheduler thread."""
    span = res.makespan or 1.0
    cores = [sum(e - s for s, e, _ in spans) / span for spans in res.core_spans]
    m = res.machine
    aic = cores[: m.clusters]
    aiv = cores[m.clusters:]
    threads = [sum(e - s for _, s, e, _ in ph) / span for ph in res.thread_phases]
    return {
        "per_core": {m.lane(c): round(u, 4) for c, u in enumerate(cores)},
        "aic_mean": statistics.fmean(aic) if aic else 0.0, "aic_min": min(aic, default=0.0), "aic_max": max(aic, default=0.0),
        "aiv_mean": statistics.fmean(aiv) if aiv else 0.0, "aiv_min": min(aiv, default=0.0), "aiv_max": max(aiv, default=0.0),
        "threads": threads,
    }


def weight_bound(res: Result) -> dict[str, float]:
    """Bytes of matmul weight operands per layer and the time HBM needs to stream them once."""
    per_layer: dict[int, float] = defaultdict(float)
    for t in res.graph.tasks:
        if t.layer is not None:
            per_layer[t.layer] += t.weight_bytes_per_block * t.blocks
    if not per_layer:
        return {"bytes_per_layer": 0.0, "us_per_layer": 0.0}
    nbytes = statistics.fmean(per_layer.values())
    hbm = CostModel(res.cfg).hbm
    return {"bytes_per_layer": nbytes, "us_per_layer": nbytes / hbm, "layers": float(len(per_layer))}


def summarize(res: Result) -> dict[str, Any]:
    """Everything the report prints, as plain data (JSON-ready)."""
    waits = task_waits(res)
    path = critical_path(res)
    slk = slack(res)
    totals = {"data": 0.0, "orchestrator": 0.0, "cohort": 0.0, "core": 0.0, "scheduler": 0.0}
    by_dispatch: dict[str, dict[str, Any]] = {}
    for t, w, s, sl in zip(res.graph.tasks, waits, res.tasks, slk):
        if w is None:
            continue
        for k in totals:
            totals[k] += getattr(w, k)
        row = by_dispatch.setdefault(t.dispatch, {"dispatch": t.dispatch, "shape": str(t.shape), "tasks": 0,
                                                  "kernel_us": 0.0, "data": 0.0, "orchestrator": 0.0, "cohort": 0.0,
                                                  "core": 0.0, "scheduler": 0.0, "min_slack_us": float("inf"), "order": t.id})
        row["tasks"] += 1
        row["kernel_us"] += max(0.0, s.end - s.first_start) if t.runs_on_cores else 0.0
        for k in ("data", "orchestrator", "cohort", "core", "scheduler"):
            row[k] += getattr(w, k)
        row["min_slack_us"] = min(row["min_slack_us"], sl)
    parts = {"before_ready_us": 0.0, "cohort_wait_us": 0.0, "core_wait_us": 0.0, "scheduler_wait_us": 0.0, "kernel_us": 0.0,
             "completion_us": 0.0}
    for step in path:
        for k in parts:
            parts[k] += step[k]
    n: dict[str, int] = defaultdict(int)
    for t in res.graph.tasks:
        n[str(t.shape)] += 1
    return {
        "makespan_us": res.makespan,
        "tasks": len(res.graph.tasks), "tasks_by_shape": dict(sorted(n.items())),
        "blocks": sum(t.blocks for t in res.graph.tasks if t.runs_on_cores),
        "layers": layer_times(res),
        "critical_path": {"steps": path, "parts": parts, "length": len(path)},
        "waits_total_us": totals,
        "by_dispatch": sorted(by_dispatch.values(), key=lambda r: r["order"]),
        "utilisation": utilisation(res),
        "weight_bound": weight_bound(res),
        "orchestrator_blocked_us": sum(b - a for a, b, _, _ in res.orch_blocked),
        "cohorts": cohorts(res),
        "stall": None if res.stall is None else {"time_us": res.stall.time, "reason": res.stall.reason,
                                                 "code": res.stall.code, "details": list(res.stall.details)},
        "slack_us": slk,
        "waits": [None if w is None else attrs.asdict(w) for w in waits],
    }

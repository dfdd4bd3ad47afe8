"""Chrome trace-event JSON laid out as simpler's `merged_swimlane.json` (docs/upstream.md §2.8).

The converter `simpler_setup.tools.swimlane_converter` writes `ph` values X (slices), M
(metadata), s/f (flow arrows from deps.json) and C (counters), with processes pid 1 =
Orchestrator, pid 2 = AICPU Scheduler, pid 3 = Scheduler View, pid 4 = Worker View, and lanes
`AIC_N`, `AIV_N`, `AICPU_N`. This writer uses the same processes and lane names:

- pid 1, lane `AICPU_<threads>` (the orchestrator thread): one slice per submit, `func(rXtY)`;
- pid 2, lanes `AICPU_0..`: the scheduler threads' phases (complete, dispatch, dummy,
  early_dispatch, drain), plus counters of idle AIC/AIV cores;
- pid 3, lanes `AIC_n`/`AIV_n`: each block from its dispatch to its FIN (the AICPU's view);
- pid 4, lanes `AIC_n`/`AIV_n`: each block from kernel start to end (the AICore's view), with
  flow arrows from a producer's last block to each consumer's first block.

Task names are `func(rXtY)`: kernel name, ring X, the task's local id Y on that ring.
Timestamps are µs (the trace-event default), rounded to the nanosecond; the output is
deterministic (fixed event order, no wall-clock time, no absolute paths).
"""

from __future__ import annotations

import json
from typing import Any

from .engine import Result
from .records import TaskRecord

PID_ORCH, PID_SCHED, PID_SCHED_VIEW, PID_WORKER = 1, 2, 3, 4
PROCESS_NAMES = {PID_ORCH: "Orchestrator", PID_SCHED: "AICPU Scheduler", PID_SCHED_VIEW: "Scheduler View",
                 PID_WORKER: "Worker View"}


def task_label(t: TaskRecord) -> str:
    """simpler's swimlane task name: `func(rXtY)`."""
    func = t.kernel or ("dummy" if t.shape == "dummy" else "alloc")
    return f"{func}(r{t.ring}t{t.local})"


def _us(x: float) -> float:
    return round(x, 3)


def _ns(x: float) -> int:
    """A time in µs as integer nanoseconds."""
    return round(x * 1000)


def trace_events(res: Result) -> list[dict[str, Any]]:
    """Every trace event of `res`, in a fixed order."""
    m = res.machine
    g = res.graph
    fin = res.cfg["scheduler.fin_latency_us"]
    ev: list[dict[str, Any]] = []
    for pid, name in PROCESS_NAMES.items():
        ev.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}})
        ev.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": pid}})
    orch_tid = m.threads
    ev.append({"ph": "M", "pid": PID_ORCH, "tid": orch_tid, "name": "thread_name", "args": {"name": f"AICPU_{orch_tid}"}})
    for th in range(m.threads):
        ev.append({"ph": "M", "pid": PID_SCHED, "tid": th, "name": "thread_name", "args": {"name": f"AICPU_{th}"}})
    for pid in (PID_SCHED_VIEW, PID_WORKER):
        for c in range(m.ncores):
            ev.append({"ph": "M", "pid": pid, "tid": c, "name": "thread_name", "args": {"name": m.lane(c)}})
            ev.append({"ph": "M", "pid": pid, "tid": c, "name": "thread_sort_index", "args": {"sort_index": c}})
    for t, s in zip(g.tasks, res.tasks):
        if s.submit_start == float("inf"):
            continue
        ev.append({"ph": "X", "pid": PID_ORCH, "tid": orch_tid, "name": task_label(t), "cat": "orch_submit",
                   "ts": _us(s.submit_start), "dur": _us(s.submit - s.submit_start),
                   "args": {"task": t.name, "submit_idx": t.id, "ring": t.ring, "local": t.local}})
    for th, phases in enumerate(res.thread_phases):
        for kind, t0, t1, n in phases:
            ev.append({"ph": "X", "pid": PID_SCHED, "tid": th, "name": kind, "cat": "scheduler_phase",
                       "ts": _us(t0), "dur": _us(t1 - t0), "args": {"tasks_processed": n}})
    for key, lane in (("aic", "idle AIC cores"), ("aiv", "idle AIV cores")):
        for tm, v in res.idle_steps[key]:
            ev.append({"ph": "C", "pid": PID_SCHED, "tid": 0, "name": lane, "ts": _us(tm), "args": {"idle": v}})
    # per core, the blocks in the order they ran: a Scheduler View slice runs from the block's
    # dispatch (or, for a block dispatched into the pending slot, from the FIN of the block before
    # it on that core: the AICPU's view of one core is one task at a time) to its FIN; a Worker
    # View slice from kernel start to end. Times in integer ns, so that slices on one lane
    # never overlap by a rounding and every flow arrow lies inside its slice.
    first: dict[int, tuple[int, int]] = {}
    last: dict[int, tuple[int, int, int]] = {}
    per_core: dict[int, list[tuple[int, int, int, Any]]] = {}
    for t, s in zip(g.tasks, res.tasks):
        if not t.runs_on_cores:
            continue
        for b in s.blocks:
            if b.end == float("inf"):
                continue
            start, end = _ns(b.start), _ns(b.end)
            for j, c in enumerate(b.cores):
                per_core.setdefault(c, []).append((start, b.bid, j, (t, b)))
            if t.id not in first or start < first[t.id][0]:
                first[t.id] = (start, b.cores[0])
            if t.id not in last or end > last[t.id][1]:
                last[t.id] = (start, end, b.cores[0])
    fin_ns = _ns(fin)
    for c in sorted(per_core):
        lane_end = 0
        for start, _bid, j, (t, b) in sorted(per_core[c], key=lambda r: (r[0], r[1])):
            label = task_label(t)
            fid = t.func_ids[min(j, len(t.func_ids) - 1)] if t.func_ids else -1
            args = {"task": t.name, "ring": t.ring, "local": t.local, "block": b.index, "func_id": fid,
                    "kernel": t.kernel, "dispatched_us": _us(b.placed)}
            end = _ns(b.end)
            view0 = max(_ns(b.placed), lane_end)
            view1 = max(end + fin_ns, view0)
            lane_end = view1
            ev.append({"ph": "X", "pid": PID_SCHED_VIEW, "tid": c, "name": label, "cat": "aicpu_task",
                       "ts": view0 / 1000, "dur": (view1 - view0) / 1000, "args": args})
            ev.append({"ph": "X", "pid": PID_WORKER, "tid": c, "name": label, "cat": "aicore_task",
                       "ts": start / 1000, "dur": (end - start) / 1000, "args": args})
    flow = 0
    for t in g.tasks:
        if t.id not in first:
            continue
        for p in t.producers:
            if p.task not in last:
                continue
            flow += 1
            pstart, end, core = last[p.task]
            start, ccore = first[t.id]
            ev.append({"ph": "s", "pid": PID_WORKER, "tid": core, "name": "dep", "cat": "dep", "id": flow,
                       "ts": max(end - 1, pstart) / 1000})
            ev.append({"ph": "f", "pid": PID_WORKER, "tid": ccore, "name": "dep", "cat": "dep", "id": flow,
                       "bp": "e", "ts": start / 1000})
    return ev


def render_trace(res: Result) -> str:
    """The trace as JSON text: `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`."""
    events = trace_events(res)
    body = ",\n".join(json.dumps(e, sort_keys=True, separators=(",", ":")) for e in events)
    other = json.dumps({"generator": "pgraph sim", "source": res.graph.source, "makespan_us": _us(res.makespan)},
                       sort_keys=True)
    return f'{{"displayTimeUnit":"ns","otherData":{other},"traceEvents":[\n{body}\n]}}\n'

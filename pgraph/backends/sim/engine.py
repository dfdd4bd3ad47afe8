"""Discrete-event model of the simpler scheduler on a2a3 (docs/upstream.md §2.5, §4, §9.2).

Actors and what they do (each rule's source is in docs/backend_sim.md):

- **Orchestrator** (one AICPU thread): submits tasks in program order, `orchestrator.submit_us`
  each; blocks while the task's ring has no free task-window slot (at most W-1 live), too
  few dep-pool entries or too little heap; closes each scope instance after its last task.
  Wiring counts completed producers; a task with all producers complete is ready at once.
  Alloc tasks complete at submit.
- **Scheduler threads** (3): thread t serves clusters c with c % 3 == t. A loop iteration is
  a complete phase (poll the COND register of every busy core, `cond_read_us` each; FIN is
  visible `fin_latency_us` after a kernel ends; complete tasks and release consumers) and a
  dispatch phase: the sync_start drain, dummies completed inline, sync lanes, then regular
  lanes in `run_staging_order` (MIX on idle, AIC/AIV on idle alternating by thread parity,
  MIX on pending slots, AIC/AIV on pending slots; a pending stage is skipped when a peer has
  an idle core of that shape; leftover MIX work blocks the AIC/AIV pending stage), then
  `try_early_dispatch` when every normal and sync queue is empty. A thread with nothing to
  do spins with a period of one register read per busy core.
- **Ready queues**: global, first in first out per shape (MIX, AIC, AIV), plus sync_start
  queues, a dummy queue and early-dispatch queues. An SPMD task is claimed in block ranges
  sized to the claiming thread's free slots and re-queued for the rest (waves).
- **sync_start**: all-or-nothing on idle cores (locally, else across threads); when it does
  not fit, a global drain stops new placements on the core kinds it needs until it fits.
- **Early dispatch**: a consumer the planner classifies as a candidate (every direct WAIT
  producer flagged) is staged once every producer is complete or fully published (all its
  blocks placed); staged blocks hold their slots and start at the doorbell rung when the last
  producer completes. Normal work outranks early work.
- **Cores**: a running and a pending slot each; a block starts `doorbell + setup` after its
  dispatch on an idle core, `switch_us` after its predecessor ends on a pending slot.
- **Kernels**: `pgraph.backends.sim.cost` (roofline with shared HBM, or fixed durations).

`simulate()` returns a `Result`; when no event can fire while work remains it stops and the
result carries a `Stall` saying which tasks hold which resources (it never hangs).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any

import attrs

from pgraph import records

from .config import SimConfig
from .cost import CostModel
from .hbm import Hbm
from .machine import Machine
from .records import Shape, SimGraph

INF = math.inf
CORE_SHAPES = (Shape.MIX, Shape.AIC, Shape.AIV)
#: core kinds a drain of each shape freezes
DRAIN_KINDS = {Shape.MIX: ("aic", "aiv"), Shape.AIC: ("aic",), Shape.AIV: ("aiv",)}

# event kinds, in tie-break order at one instant
ORCH, START, MEM, END, PHASE_C, PHASE_D, WAKE = range(7)


@records.shared_repr
@attrs.define(slots=True, eq=False, repr=False)
class Block:
    """One SPMD block on its core(s)."""

    bid: int
    task: int
    index: int
    cores: tuple[int, ...]
    thread: int
    placed: float
    signal: float                # doorbell seen (INF while staged early and not released)
    via_pending: bool
    free: float = -INF           # when the last of its cores' running slots became its own
    staged: bool = False
    start: float = INF
    end: float = INF
    mem_done: float = INF
    min_end: float = INF
    started: bool = False


@records.shared_repr
@attrs.define(slots=True, eq=False, repr=False)
class TaskState:
    """Run-time state and timeline of one task (µs)."""

    fanin_total: int = 0
    fanin_done: int = 0
    dispatch_fanin: int = 0
    fanout: list[int] = attrs.Factory(list)
    retain_left: int = 0
    dep_entries: int = 0
    submitted: bool = False
    released: bool = False       # all producers complete: normal-ready
    early_queued: bool = False
    placed: int = 0              # blocks placed (normal or staged)
    staged: int = 0
    fin: int = 0
    published: bool = False
    completed: bool = False
    consumed: bool = False
    submit_start: float = INF
    submit: float = INF
    data_ready: float = INF      # last producer completed (INF: not yet; -INF: no producer)
    ready: float = INF           # released into a ready queue
    first_place: float = INF
    first_start: float = INF
    end: float = INF
    done: float = INF            # completion processed (consumers released)
    blocks: list[Block] = attrs.Factory(list)


@records.value
@attrs.frozen(repr=False, eq=False)
class Stall:
    """No event can fire and work remains: what waits on what, and who holds which resource."""

    time: float
    reason: str
    code: str | None
    details: tuple[str, ...]


@records.value
@attrs.frozen(repr=False, eq=False)
class Drain:
    """One sync_start drain: the cohort `task` did not fit at `start` (µs) and every placement on
    the core kinds it needs stopped until `end`, when it launched; `holders` are the tasks that
    held a running slot of one of its units at `start` (task id, staged early)."""

    task: int
    start: float
    end: float
    holders: tuple[tuple[int, bool], ...]


@records.value
@attrs.frozen(repr=False, eq=False)
class Result:
    """A finished (or stalled) run: timelines per task and block, core busy spans, thread phases."""

    graph: SimGraph
    cfg: SimConfig
    tasks: tuple[TaskState, ...]
    makespan: float
    stall: Stall | None
    core_spans: tuple[tuple[tuple[float, float, int], ...], ...]   # per core: (start, end, task)
    thread_phases: tuple[tuple[tuple[str, float, float, int], ...], ...]  # per thread: (kind, start, end, n)
    idle_steps: dict[str, tuple[tuple[float, int], ...]]           # 'aic'|'aiv'|'cluster' -> (time, idle count)
    orch_blocked: tuple[tuple[float, float, int, str], ...]        # (from, to, ring, reason)
    machine: Machine
    events: int
    drains: tuple[Drain, ...] = ()


class _Ring:
    def __init__(self) -> None:
        self.live: deque[int] = deque()
        self.slots = 0
        self.deps = 0
        self.heap = 0


class Engine:
    """One simulation of `graph` under `cfg` (see the module docstring)."""

    def __init__(self, graph: SimGraph, cfg: SimConfig, calibration: dict[str, float] | None = None) -> None:
        self.g = graph
        self.cfg = cfg
        self.cost = CostModel(cfg, calibration)
        self.m = Machine(cfg["machine.clusters"], cfg["machine.scheduler_threads"])
        self.T = self.m.threads
        c = cfg
        self.submit_us = c["orchestrator.submit_us"]
        self.scope_end_us = c["orchestrator.scope_end_us"]
        self.read_us = c["scheduler.cond_read_us"]
        self.fin_us = c["scheduler.fin_latency_us"]
        self.disp_task_us = c["scheduler.dispatch_task_us"]
        self.disp_block_us = c["scheduler.dispatch_block_us"]
        self.comp_task_us = c["scheduler.complete_task_us"]
        self.comp_edge_us = c["scheduler.complete_edge_us"]
        self.dummy_us = c["scheduler.dummy_us"]
        self.idle_loop_us = c["scheduler.idle_loop_us"]
        self.requeue_tail = c["scheduler.requeue"] == "tail"
        self.doorbell_us = c["core.doorbell_us"]
        self.setup_us = c["core.setup_us"]
        self.switch_us = c["core.switch_us"]
        self.early_on = bool(c["early_dispatch.enabled"])
        self.stage_us = c["early_dispatch.stage_task_us"]
        self.window = c["ring.task_window"]
        self.dep_pool = c["ring.dep_pool"]
        self.heap_size = c["ring.heap"]
        n = len(graph.tasks)
        self.st = [TaskState() for _ in range(n)]
        self.costs = [self.cost.block(t) if t.runs_on_cores else None for t in graph.tasks]
        self.events: list[tuple[float, int, int, int, Any]] = []
        self.seq = 0
        self.nevents = 0
        self.now = 0.0
        self.hbm = Hbm(self.cost.hbm)
        self.blocks: list[Block] = []
        # queues: heaps of (visible time, seq, task)
        self.ready: dict[Shape, list[tuple[float, int, int]]] = {s: [] for s in CORE_SHAPES}
        self.sync: dict[Shape, list[tuple[float, int, int]]] = {s: [] for s in CORE_SHAPES}
        self.early: dict[Shape, list[tuple[float, int, int]]] = {s: [] for s in CORE_SHAPES}
        self.dummies: list[tuple[float, int, int]] = []
        self.drain: int | None = None
        self.drain_open: tuple[float, tuple[tuple[int, bool], ...]] = (0.0, ())
        self.drains: list[Drain] = []
        # threads
        self.fins: list[list[tuple[float, int, int]]] = [[] for _ in range(self.T)]  # (visible, seq, block)
        self.busy_until = [0.0] * self.T
        self.spinning = [True] * self.T
        self.spin_origin = [0.0] * self.T
        self.wake_at = [INF] * self.T
        self.wake_version = [0] * self.T
        self.phases: list[list[tuple[str, float, float, int]]] = [[] for _ in range(self.T)]
        self.worked = [False] * self.T
        # orchestrator
        self.next_submit = 0
        self.orch_blocked: tuple[float, int, str] | None = None
        self.orch_block_log: list[tuple[float, float, int, str]] = []
        self.orch_done = False
        self.orch_scheduled = False
        self.fatal: Stall | None = None
        self.rings: dict[int, _Ring] = {}
        self.scope_tasks: dict[int, list[int]] = {}
        self.scope_slots: dict[int, int] = {}
        self.scope_closed: set[int] = set()
        self.closes: dict[int, list[int]] = {}
        for s in graph.scopes:
            self.closes.setdefault(s.close_after, []).append(s.id)
        # records
        self.core_spans: list[list[tuple[float, float, int]]] = [[] for _ in range(self.m.ncores)]
        self.idle_steps: dict[str, list[tuple[float, int]]] = {k: [(0.0, v)] for k, v in self.m.idle_counts.items()}
        self.completed = 0

    # ---- event queue ----
    def push(self, t: float, kind: int, payload: Any = None, order: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, order, self.seq, payload))

    def run(self) -> Result:
        self.wake_orchestrator(0.0)
        limit = 200 * (len(self.g.tasks) + sum(max(t.blocks, 1) for t in self.g.tasks)) + 100_000
        while self.events and self.fatal is None:
            t, kind, _order, _seq, payload = heapq.heappop(self.events)
            self.now = t
            self.nevents += 1
            if self.nevents > limit:
                self.fatal = Stall(t, "no progress: the event budget was exhausted (a livelock in the model)", None,
                                   tuple(self.holders()))
                break
            if kind == ORCH:
                self.orchestrate(t)
            elif kind == START:
                self.start_block(payload, t)
            elif kind == MEM:
                if payload == self.hbm.version:
                    for key in self.hbm.finish_at(t):
                        self.mem_done(self.blocks[key], t)
                    self.schedule_mem()
            elif kind == END:
                self.end_block(payload, t)
            elif kind == PHASE_C:
                self.phase_complete(payload[0], t, payload[1])
            elif kind == PHASE_D:
                self.phase_dispatch(payload, t)
            elif kind == WAKE:
                th, version = payload
                if version == self.wake_version[th] and self.spinning[th]:
                    self.spinning[th] = False
                    self.wake_at[th] = INF
                    self.push(t, PHASE_C, (th, True), th)
        stall = self.fatal
        if stall is None and self.completed < len(self.g.tasks):
            stall = self.stall_report(self.now)
        makespan = max((s.done for s in self.st if s.completed), default=0.0)
        return Result(self.g, self.cfg, tuple(self.st), makespan, stall,
                      tuple(tuple(s) for s in self.core_spans), tuple(tuple(p) for p in self.phases),
                      {k: tuple(v) for k, v in self.idle_steps.items()}, tuple(self.orch_block_log), self.m,
                      self.nevents, tuple(self.drains))

    # ---- orchestrator ----
    def ring(self, r: int) -> _Ring:
        got = self.rings.get(r)
        if got is None:
            got = self.rings[r] = _Ring()
        return got

    def wake_orchestrator(self, t: float) -> None:
        if not self.orch_scheduled:
            self.orch_scheduled = True
            self.push(t, ORCH)

    def orchestrate(self, t: float) -> None:
        self.orch_scheduled = False
        if self.next_submit >= len(self.g.tasks):
            self.orch_done = True
            return
        task = self.g.tasks[self.next_submit]
        st = self.st[task.id]
        ring = self.ring(task.ring)
        limit = self.window - 1
        if self.scope_slots.get(task.scope, 0) + task.slots > limit:
            self.fatal = Stall(t, f"SCOPE_DEADLOCK: scope {self.g.scopes[task.scope].label} would hold more than "
                                  f"task_window - 1 = {limit} tasks when '{task.name}' is submitted", "1",
                               tuple(self.holders()))
            return
        need_deps = sum(1 for pr in task.producers if not self.st[pr.task].completed)
        reason = None
        if ring.slots + task.slots > limit:
            reason = "task window"
        elif ring.deps + need_deps > self.dep_pool:
            reason = "dep pool"
        elif ring.heap + task.heap_bytes > self.heap_size:
            reason = "heap"
        if reason is not None:
            if self.orch_blocked is None:
                self.orch_blocked = (t, task.ring, reason)
            return  # woken by a reclaim on this ring
        if self.orch_blocked is not None:
            since, r, why = self.orch_blocked
            self.orch_block_log.append((since, t, r, why))
            self.orch_blocked = None
        end = t + self.submit_us
        st.submit_start = t
        st.submit = end
        st.submitted = True
        ring.live.append(task.id)
        ring.slots += task.slots
        ring.heap += task.heap_bytes
        self.scope_slots[task.scope] = self.scope_slots.get(task.scope, 0) + task.slots
        self.scope_tasks.setdefault(task.scope, []).append(task.id)
        st.fanin_total = len(task.producers)
        last = -INF
        for pr in task.producers:
            ps = self.st[pr.task]
            if ps.completed:
                st.fanin_done += 1
                st.dispatch_fanin += 1     # wiring seed: completed producers count
                last = max(last, ps.done)
            else:
                ps.fanout.append(task.id)
                st.dep_entries += 1
                if ps.published and self.g.tasks[pr.task].early:
                    st.dispatch_fanin += 1
            if pr.retain and not ps.consumed:
                ps.retain_left += 1
        ring.deps += st.dep_entries
        if st.fanin_done == st.fanin_total:
            st.data_ready = last
            self.release(task.id, end)
        elif self.early_on and task.early_candidate and st.dispatch_fanin == st.fanin_total:
            self.enqueue_early(task.id, end)
        if task.shape is Shape.ALLOC:
            st.first_start = st.end = end
            self.complete(task.id, end)
        self.next_submit += 1
        after = end
        for sid in self.closes.get(task.id, ()):
            after += self.scope_end_us
            self.close_scope(sid, after)
        if self.next_submit >= len(self.g.tasks):
            self.orch_done = True
        else:
            self.wake_orchestrator(after)

    def close_scope(self, sid: int, t: float) -> None:
        self.scope_closed.add(sid)
        for tid in self.scope_tasks.get(sid, ()):
            self.check_consumed(tid, t)

    def check_consumed(self, tid: int, t: float) -> None:
        st = self.st[tid]
        task = self.g.tasks[tid]
        if st.consumed or not st.completed or st.retain_left > 0 or task.scope not in self.scope_closed:
            return
        st.consumed = True
        ring = self.ring(task.ring)
        freed = False
        while ring.live and self.st[ring.live[0]].consumed:
            head = self.g.tasks[ring.live.popleft()]
            ring.slots -= head.slots
            ring.deps -= self.st[head.id].dep_entries
            ring.heap -= head.heap_bytes
            freed = True
        if freed and self.orch_blocked is not None and self.orch_blocked[1] == task.ring:
            self.wake_orchestrator(t)

    # ---- readiness ----
    def release(self, tid: int, t: float) -> None:
        """All producers are complete at `t`: route the task (or ring the doorbells of its staged blocks)."""
        st = self.st[tid]
        task = self.g.tasks[tid]
        st.released = True
        st.ready = t
        if task.shape is Shape.ALLOC:
            return
        if task.shape is Shape.DUMMY:
            self.seq += 1
            heapq.heappush(self.dummies, (t, self.seq, tid))
            self.wake_all(t)
            return
        if st.staged:
            ring_at = t + self.doorbell_us
            for b in st.blocks:
                if b.staged:
                    b.staged = False
                    b.signal = ring_at
                    self.try_start(b, t)
            if st.placed == task.blocks:
                return
        q = self.sync if task.sync_start else self.ready
        self.seq += 1
        heapq.heappush(q[task.shape], (t, self.seq, tid))
        self.wake_all(t)

    def enqueue_early(self, tid: int, t: float) -> None:
        st = self.st[tid]
        if st.early_queued or st.released:
            return
        st.early_queued = True
        self.seq += 1
        heapq.heappush(self.early[self.g.tasks[tid].shape], (t, self.seq, tid))
        self.wake_all(t)

    def publish(self, tid: int, t: float) -> None:
        """Every block of `tid` has a slot: a flagged task bumps its consumers' dispatch_fanin once."""
        st = self.st[tid]
        st.published = True
        if not self.g.tasks[tid].early or not self.early_on:
            return
        for c in st.fanout:
            cs = self.st[c]
            if cs.released or not self.g.tasks[c].early_candidate:
                continue
            cs.dispatch_fanin += 1
            if cs.dispatch_fanin == cs.fanin_total:
                self.enqueue_early(c, t)

    def complete(self, tid: int, t: float) -> None:
        """Task `tid` is COMPLETED at `t`: release consumers, drop RETAIN pins, maybe retire."""
        st = self.st[tid]
        task = self.g.tasks[tid]
        st.completed = True
        st.done = t
        self.completed += 1
        for c in st.fanout:
            cs = self.st[c]
            cs.fanin_done += 1
            if cs.fanin_done == cs.fanin_total:
                cs.data_ready = t
                self.release(c, t)
        for pr in task.producers:
            if pr.retain:
                ps = self.st[pr.task]
                if ps.retain_left > 0:
                    ps.retain_left -= 1
                    self.check_consumed(pr.task, t)
        self.check_consumed(tid, t)

    # ---- threads ----
    def period(self, th: int) -> float:
        busy = sum(1 for ci in self.m.thread_clusters[th] for c in (ci, *self.m.aivs(ci)) if self.m.running[c] is not None)
        return max(busy * self.read_us, self.idle_loop_us)

    def wake(self, th: int, v: float) -> None:
        """Let spinning thread `th` notice something that became visible at `v`."""
        if not self.spinning[th]:
            return
        p = self.period(th)
        origin = self.spin_origin[th]
        if p <= 0 or v <= origin:
            w = max(v, origin)
        else:
            w = origin + math.ceil((v - origin) / p) * p
            if w < v:  # float rounding: never wake before the thing is visible
                w = v
        if w >= self.wake_at[th]:
            return
        self.wake_at[th] = w
        self.wake_version[th] += 1
        self.push(w, WAKE, (th, self.wake_version[th]), th)

    def wake_all(self, v: float) -> None:
        for th in range(self.T):
            self.wake(th, v)

    def phase_complete(self, th: int, t: float, poll_paid: bool) -> None:
        clock = t if poll_paid else t + self.period(th)
        fins = self.fins[th]
        done = 0
        start = clock
        while fins and fins[0][0] <= clock:
            _, _, bid = heapq.heappop(fins)
            b = self.blocks[bid]
            st = self.st[b.task]
            st.fin += 1
            if st.fin == self.g.tasks[b.task].blocks:
                clock += self.comp_task_us + self.comp_edge_us * len(st.fanout)
                self.complete(b.task, clock)
                done += 1
        if done:
            self.phases[th].append(("complete", start, clock, done))
        self.push(clock, PHASE_D, th, th)
        self.worked[th] = done > 0

    def phase_dispatch(self, th: int, t: float) -> None:
        clock = t
        worked = self.worked[th]
        self.worked[th] = False
        # 1. the sync_start drain
        if self.drain is not None:
            tid = self.drain
            c2 = self.try_sync(tid, th, clock, global_ok=True)
            if c2 is not None:
                self.phases[th].append(("drain", clock, c2, 1))
                self.drain = None
                since, held = self.drain_open
                self.drains.append(Drain(tid, since, clock, held))
                clock, worked = c2, True
        # 2. dummies, inline
        n = 0
        d0 = clock
        while self.dummies and self.dummies[0][0] <= clock:
            _, _, tid = heapq.heappop(self.dummies)
            clock += self.dummy_us
            st = self.st[tid]
            st.first_start = st.end = clock
            self.complete(tid, clock)
            n += 1
        if n:
            self.phases[th].append(("dummy", d0, clock, n))
            worked = True
        # 3. dispatch_ready_tasks: sync lanes, then regular lanes
        d0 = clock
        n = 0
        for shape in CORE_SHAPES:
            q = self.sync[shape]
            while q and q[0][0] <= clock and self.drain is None:
                tid = q[0][2]
                c2 = self.try_sync(tid, th, clock, global_ok=True)
                heapq.heappop(q)
                if c2 is None:
                    self.drain = tid
                    self.drain_open = (clock, self.cohort_holders(tid))
                    break
                clock, n = c2, n + 1
        clock, n2 = self.regular_lanes(th, clock)
        n += n2
        if n:
            self.phases[th].append(("dispatch", d0, clock, n))
            worked = True
        # 4. try_early_dispatch
        if self.early_on and self.drain is None and not self.any_visible(clock):
            e0 = clock
            clock, n = self.try_early(th, clock)
            if n:
                self.phases[th].append(("early_dispatch", e0, clock, n))
                worked = True
        fins = self.fins[th]
        if worked or (fins and fins[0][0] <= clock) or (self.dummies and self.dummies[0][0] <= clock):
            # FINs and dummies that became visible during this iteration are handled by the next one
            self.push(clock, PHASE_C, (th, False), th)
            return
        self.spinning[th] = True
        self.spin_origin[th] = clock
        self.wake_at[th] = INF
        self.wake_version[th] += 1
        # anything that becomes visible later wakes the thread then
        queues = (*self.ready.values(), *self.sync.values(), *self.early.values(), self.dummies, self.fins[th])
        heads = [q[0][0] for q in queues if q and q[0][0] > clock]
        nxt = min(heads, default=INF)
        if nxt < INF:
            self.wake(th, max(nxt, clock))

    def any_visible(self, clock: float) -> bool:
        return any(q and q[0][0] <= clock for q in (*self.ready.values(), *self.sync.values()))

    def cohort_holders(self, tid: int) -> tuple[tuple[int, bool], ...]:
        """The tasks holding a running slot of a unit the sync_start task `tid` needs, in core order:
        (task, staged early and waiting for its doorbell)."""
        seen: dict[int, bool] = {}
        for unit in self.m.units(self.g.tasks[tid].shape, None):
            for c in unit:
                bid = self.m.running[c]
                if bid is not None:
                    b = self.blocks[bid]
                    seen[b.task] = seen.get(b.task, False) or b.staged
        return tuple(seen.items())

    def frozen(self, kind: str) -> bool:
        """True when the sync_start drain freezes new placements on this core kind."""
        return self.drain is not None and kind in DRAIN_KINDS[self.g.tasks[self.drain].shape]

    def free_units(self, shape: Shape, th: int | None, pending: bool) -> list[tuple[int, ...]]:
        kinds = ("aic", "aiv") if shape is Shape.MIX else (shape.value,)
        if any(self.frozen(k) for k in kinds):
            return []
        test = self.m.has_slot if pending else self.m.is_idle
        return [u for u in self.m.units(shape, th) if test(u)]

    def regular_lanes(self, th: int, clock: float) -> tuple[float, int]:
        """run_staging_order: MIX idle, AIC/AIV idle (order by thread parity), MIX pending, AIC/AIV pending."""
        single = (Shape.AIC, Shape.AIV) if th % 2 == 0 else (Shape.AIV, Shape.AIC)
        n = 0
        stages = [(Shape.MIX, False), *((s, False) for s in single), (Shape.MIX, True), *((s, True) for s in single)]
        for shape, pending in stages:
            q = self.ready[shape]
            if pending and shape is not Shape.MIX and self.ready[Shape.MIX] and self.ready[Shape.MIX][0][0] <= clock:
                continue  # leftover MIX work blocks AIC/AIV for this pass
            if pending and self.peer_idle(shape, th):
                continue
            while q and q[0][0] <= clock:
                units = self.free_units(shape, th, pending)
                if not units:
                    break
                key = heapq.heappop(q)
                tid = key[2]
                clock = self.claim(tid, th, units, clock, staged=False)
                n += 1
                if self.st[tid].placed < self.g.tasks[tid].blocks:
                    self.requeue(q, key, tid, clock)
        return clock, n

    def requeue(self, q: list[tuple[float, int, int]], key: tuple[float, int, int], tid: int, clock: float) -> None:
        """Put a partly claimed task back so peers can take the rest (a push: spinning peers notice it)."""
        if self.requeue_tail:
            self.seq += 1
            heapq.heappush(q, (clock, self.seq, tid))
        else:
            heapq.heappush(q, key)
        self.wake_all(clock)

    def peer_idle(self, shape: Shape, th: int) -> bool:
        return any(self.free_units(shape, p, False) for p in range(self.T) if p != th)

    def claim(self, tid: int, th: int, units: list[tuple[int, ...]], clock: float, staged: bool) -> float:
        """Place the next blocks of `tid` on `units` (as many as it has left); returns the thread clock after."""
        task = self.g.tasks[tid]
        st = self.st[tid]
        take = units[: task.blocks - st.placed]
        clock += (self.stage_us if staged else self.disp_task_us) + self.disp_block_us * len(take)
        signal = INF if staged else clock + self.doorbell_us
        for unit in take:
            via = any(self.m.running[c] is not None for c in unit)
            bid = len(self.blocks)
            b = Block(bid, tid, st.placed, unit, self.m.owner[unit[0]], clock, signal, via, staged=staged)
            self.blocks.append(b)
            for c in unit:
                if self.m.running[c] is None:
                    self.m.set_running(c, bid)
                    self.idle_changed(c, clock)
                else:
                    self.m.pending[c] = bid
            st.blocks.append(b)
            st.placed += 1
            if staged:
                st.staged += 1
            st.first_place = min(st.first_place, clock)
            self.try_start(b, clock)
        if st.placed == task.blocks:
            self.publish(tid, clock)
        return clock

    def try_sync(self, tid: int, th: int, clock: float, global_ok: bool, staged: bool = False) -> float | None:
        """All-or-nothing placement of a sync_start cohort on idle units (this thread's, else any)."""
        task = self.g.tasks[tid]
        need = task.blocks - self.st[tid].placed
        saved, self.drain = self.drain, (None if self.drain == tid else self.drain)
        try:
            local = self.free_units(task.shape, th, False)
            units = local if len(local) >= need else (self.free_units(task.shape, None, False) if global_ok else [])
        finally:
            self.drain = saved
        if len(units) < need:
            return None
        return self.claim(tid, th, units, clock, staged=staged)

    def try_early(self, th: int, clock: float) -> tuple[float, int]:
        n = 0
        for shape in CORE_SHAPES:
            q = self.early[shape]
            while q and q[0][0] <= clock:
                tid = q[0][2]
                st = self.st[tid]
                if st.released:  # already normal-ready: the early entry is stale
                    heapq.heappop(q)
                    continue
                task = self.g.tasks[tid]
                if task.sync_start:
                    c2 = self.try_sync(tid, th, clock, global_ok=True, staged=True)
                    if c2 is None:
                        break
                    heapq.heappop(q)
                    clock, n = c2, n + 1
                    continue
                units = self.free_units(shape, th, False) + self.free_units(shape, th, True)
                if not units:
                    break
                key = heapq.heappop(q)
                clock = self.claim(tid, th, units, clock, staged=True)
                n += 1
                if st.placed < task.blocks:
                    self.requeue(q, key, tid, clock)
        return clock, n

    # ---- blocks on cores ----
    def try_start(self, b: Block, t: float) -> None:
        if b.started or b.signal == INF:
            return
        me = b.bid
        if any(self.m.running[c] != me for c in b.cores):
            return
        start = b.signal + self.setup_us
        if b.via_pending:
            start = max(start, b.free + self.switch_us)
        b.started = True
        self.push(max(start, t), START, me)

    def start_block(self, bid: int, t: float) -> None:
        b = self.blocks[bid]
        b.start = t
        st = self.st[b.task]
        st.first_start = min(st.first_start, t)
        cost = self.costs[b.task]
        assert cost is not None
        if cost.fixed_us is not None:
            b.mem_done = t
            b.min_end = t + cost.fixed_us
            self.push(b.min_end, END, bid)
            return
        b.min_end = t + cost.compute_us
        if cost.bytes > 0:
            self.hbm.add(bid, cost.bytes, cost.cap_bytes_per_us, t)
            self.schedule_mem()
        else:
            b.mem_done = t
            self.push(b.min_end, END, bid)

    def schedule_mem(self) -> None:
        nxt = self.hbm.next_time()
        if nxt < INF:
            self.push(nxt, MEM, self.hbm.version)

    def mem_done(self, b: Block, t: float) -> None:
        b.mem_done = t
        self.push(max(t, b.min_end), END, b.bid)

    def end_block(self, bid: int, t: float) -> None:
        b = self.blocks[bid]
        b.end = t
        st = self.st[b.task]
        st.end = t if st.end == INF else max(st.end, t)
        promoted = []
        for c in b.cores:
            self.core_spans[c].append((b.start, t, b.task))
            nxt = self.m.pending[c]
            self.m.pending[c] = None
            self.m.set_running(c, nxt)
            self.idle_changed(c, t)
            if nxt is not None:
                pb = self.blocks[nxt]
                pb.free = max(pb.free, t)
                promoted.append(pb)
        for pb in promoted:
            self.try_start(pb, t)
        th = b.thread
        self.seq += 1
        heapq.heappush(self.fins[th], (t + self.fin_us, self.seq, bid))
        self.wake(th, t + self.fin_us)

    def idle_changed(self, core: int, t: float) -> None:
        for key, value in self.m.idle_counts.items():
            steps = self.idle_steps[key]
            if steps[-1][1] != value:
                if steps[-1][0] == t:
                    steps[-1] = (t, value)
                else:
                    steps.append((t, value))

    # ---- stalls ----
    def holders(self) -> list[str]:
        """Who holds which core, and which tasks wait staged for which producers."""
        out = []
        names = self.g.tasks
        for c in range(self.m.ncores):
            for slot, holder in (("running", self.m.running[c]), ("pending", self.m.pending[c])):
                if holder is None:
                    continue
                b = self.blocks[holder]
                state = "staged early, waiting for the doorbell" if b.staged else (
                    "running" if b.start < INF and b.end == INF else "placed")
                waits = ""
                if b.staged:
                    open_p = [names[p.task].name for p in names[b.task].producers if not self.st[p.task].completed]
                    waits = f" on {', '.join(open_p)}" if open_p else ""
                out.append(f"{self.m.lane(c)} {slot} slot: {names[b.task].name} block {b.index} ({state}{waits})")
        return out

    def stall_report(self, t: float) -> Stall:
        lines: list[str] = []
        code = None
        if self.orch_blocked is not None:
            since, r, why = self.orch_blocked
            ring = self.ring(r)
            nxt = self.g.tasks[self.next_submit]
            lines.append(f"orchestrator blocked since {since:.3f} us on ring {r} ({why}) before submitting '{nxt.name}'")
            if ring.live:
                head = self.g.tasks[ring.live[0]]
                hs = self.st[head.id]
                why_not = []
                if not hs.completed:
                    why_not.append("not completed")
                if head.scope not in self.scope_closed:
                    why_not.append(f"its scope {self.g.scopes[head.scope].label} is still open (it closes after "
                                   f"'{self.g.tasks[self.g.scopes[head.scope].close_after].name}', not yet submitted)")
                if hs.retain_left:
                    why_not.append(f"{hs.retain_left} consumer(s) still pin it")
                lines.append(f"ring {r} head '{head.name}' cannot retire: {'; '.join(why_not) or 'consumed'}")
                code = "3" if why == "task window" else ("4" if why == "dep pool" else "2")
        shapes = [(q, s, kind) for kind, qs in (("sync_start", self.sync), ("ready", self.ready), ("early", self.early))
                  for s, q in qs.items()]
        for q, shape, kind in shapes:
            for _, _, tid in sorted(q):
                task = self.g.tasks[tid]
                st = self.st[tid]
                if kind == "early" and st.released:
                    continue
                left = task.blocks - st.placed
                total = len(self.m.units(shape, None))
                lines.append(f"{kind} {shape} task '{task.name}' needs {left} more {shape} unit(s) of {total}")
        if self.drain is not None:
            dt = self.g.tasks[self.drain]
            lines.append(f"sync_start drain for '{dt.name}' ({dt.blocks} {dt.shape} blocks, all at once) freezes "
                         f"{'/'.join(DRAIN_KINDS[dt.shape])} placements")
            if dt.blocks > len(self.m.units(dt.shape, None)):
                lines.append(f"'{dt.name}' is wider than the machine: {dt.blocks} blocks, "
                             f"{len(self.m.units(dt.shape, None))} {dt.shape} units")
                code = code or "7"
        lines += self.holders()
        waiting = [task for task in self.g.tasks if self.st[task.id].submitted and not self.st[task.id].released
                   and not self.st[task.id].completed]
        for task in waiting[:20]:
            open_p = [self.g.tasks[p.task].name for p in task.producers if not self.st[p.task].completed]
            lines.append(f"'{task.name}' waits on {', '.join(open_p)}")
        if len(waiting) > 20:
            lines.append(f"... and {len(waiting) - 20} more waiting task(s)")
        left = len(self.g.tasks) - self.completed
        return Stall(t, f"no event can fire and {left} task(s) have not completed", code, tuple(lines))


def simulate(graph: SimGraph, cfg: SimConfig, calibration: dict[str, float] | None = None) -> Result:
    """Run the scheduler model on `graph`; the Result carries a Stall instead of hanging."""
    return Engine(graph, cfg, calibration).run()

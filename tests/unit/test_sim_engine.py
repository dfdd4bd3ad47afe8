"""The scheduler model on small graphs whose makespan is computed by hand in each test.

Most tests use UNIT timing: every scheduler, core and orchestrator latency is 0 except a
1 µs submit and a 1 µs FIN latency, and kernels have fixed durations, so each makespan is
a sum that can be read off the graph. One test uses the real a2a3 figures and derives the
makespan of a single task from them step by step.
"""

from __future__ import annotations

import pytest

from pgraph.backends.sim.analysis import critical_path, summarize
from pgraph.backends.sim.config import ConfigError, load_config
from pgraph.backends.sim.engine import simulate
from pgraph.backends.sim.records import Producer, ScopeRecord, Shape, SimGraph, TaskRecord

UNIT = (
    "orchestrator.submit_us=1", "scheduler.cond_read_us=0", "scheduler.fin_latency_us=1",
    "scheduler.dispatch_task_us=0", "scheduler.dispatch_block_us=0", "scheduler.complete_task_us=0",
    "scheduler.complete_edge_us=0", "scheduler.dummy_us=0", "scheduler.idle_loop_us=0", "early_dispatch.stage_task_us=0",
    "core.doorbell_us=0", "core.setup_us=0", "core.switch_us=0",
)


def cfg(*extra: str):
    return load_config((*UNIT, *extra))


def task(i: int, shape: Shape, us: float, deps: tuple[int, ...] = (), blocks: int = 1, scope: int = 0, ring: int = 1,
         **kw: object) -> TaskRecord:
    return TaskRecord(i, f"t{i}", f"t{i}", f"k{i}" if shape not in (Shape.DUMMY, Shape.ALLOC) else None, shape,
                      blocks if shape is not Shape.DUMMY else 0, ring, scope,
                      tuple(Producer(d, ("explicit",)) for d in deps), fixed_us=us, local=i, **kw)  # type: ignore[arg-type]


def graph(tasks: list[TaskRecord], scopes: list[ScopeRecord] | None = None) -> SimGraph:
    scopes = scopes or [ScopeRecord(0, 1, None, len(tasks) - 1, "root")]
    return SimGraph(tuple(tasks), tuple(scopes))


def test_chain() -> None:
    # t0 -> t1 -> t2, 10 us each. t0 is submitted over [0, 1] and runs [1, 11]; its FIN is seen at 12,
    # which releases t1 (submitted at 2): [12, 22], seen at 23; t2: [23, 33], done at 34 = 1 + 3 * (10 + 1).
    res = simulate(graph([task(0, Shape.AIC, 10), task(1, Shape.AIC, 10, (0,)), task(2, Shape.AIC, 10, (1,))]), cfg())
    assert res.stall is None
    assert res.makespan == pytest.approx(34.0)
    assert [s.first_start for s in res.tasks] == pytest.approx([1.0, 12.0, 23.0])
    path = critical_path(res)
    assert [p["task"] for p in path] == ["t0", "t1", "t2"]
    parts = summarize(res)["critical_path"]["parts"]
    assert sum(parts.values()) == pytest.approx(34.0)          # the parts add up to the makespan
    assert parts["kernel_us"] == pytest.approx(30.0) and parts["completion_us"] == pytest.approx(3.0)


def test_fan_out_wider_than_the_cores_runs_in_waves() -> None:
    # Submits cost 0 here, so all 31 tasks exist at 0. The producer (AIV, 5 us) runs [0, 5], seen at 6.
    # 30 one-block AIC consumers on 24 AIC cores: 24 start at 6 on idle cores, the other 6 wait in
    # pending slots and start when the first wave ends (16); they end at 26 and are seen at 27.
    tasks = [task(0, Shape.AIV, 5)] + [task(i, Shape.AIC, 10, (0,)) for i in range(1, 31)]
    res = simulate(graph(tasks), cfg("orchestrator.submit_us=0"))
    assert res.makespan == pytest.approx(27.0)
    starts = sorted(s.first_start for s in res.tasks[1:])
    assert starts == pytest.approx([6.0] * 24 + [16.0] * 6)
    # submit order decides issue order: the 6 late tasks are the last 6 submitted
    late = [t.id for t, s in zip(res.graph.tasks, res.tasks) if s.first_start == pytest.approx(16.0)]
    assert late == list(range(25, 31))


def test_spmd_block_ranges_run_in_waves_on_a_small_machine() -> None:
    # clusters = 2: 2 AIC cores, each with a running and a pending slot. An spmd(5) of 10 us blocks:
    # 2 start at 1, 2 wait in the pending slots ([11, 21]); the fifth is claimed when a pending slot
    # frees (FIN of the first wave seen at 12) and runs [21, 31]; done at 32.
    res = simulate(graph([task(0, Shape.AIC, 10, blocks=5)]), cfg("machine.clusters=2"))
    assert sorted(b.start for b in res.tasks[0].blocks) == pytest.approx([1, 1, 11, 11, 21])
    assert res.makespan == pytest.approx(32.0)


def test_sync_start_grid_drains_the_machine() -> None:
    # A (AIC, 30 us) is dispatched at 1 on AIC_0. T (MIX spmd(24), sync_start, 50 us) is ready at 2 but
    # needs all 24 clusters idle at once: the drain freezes placements, B (AIV, 5 us, ready at 3) cannot
    # take an idle AIV either. A ends at 31, seen at 32: T starts on every cluster at 32 and ends at 82.
    # B went into a pending slot behind T in that same dispatch phase: [82, 87], seen at 88.
    tasks = [task(0, Shape.AIC, 30), task(1, Shape.MIX, 50, blocks=24, sync_start=True), task(2, Shape.AIV, 5)]
    res = simulate(graph(tasks), cfg())
    a, t, b = res.tasks
    assert a.first_start == pytest.approx(1.0)
    assert all(blk.start == pytest.approx(32.0) for blk in t.blocks)
    assert b.first_start == pytest.approx(82.0)
    assert res.makespan == pytest.approx(88.0)
    waits = summarize(res)["waits"]
    # T's drain runs from its first dispatch phase at 2 to 32, while A holds AIC_0: booked to the cohort
    # (idle clusters existed, so it is not "no core", and the scheduler threads were idle: not "scheduler")
    assert (waits[1]["cohort"], waits[1]["core"], waits[1]["scheduler"]) == pytest.approx((30.0, 0.0, 0.0))
    assert waits[1]["cohort_task"] == 1
    s = summarize(res)
    assert [(c["task"], c["from"], c["to"], [h["task"] for h in c["holders"]]) for c in s["cohorts"]] == [
        ("t1", 2.0, 32.0, ["t0"])]
    # B: AIVs were idle but frozen by T's drain over [3, 32] (cohort), all busy under T over [32, 82] (core)
    assert (waits[2]["cohort"], waits[2]["core"], waits[2]["scheduler"]) == pytest.approx((29.0, 50.0, 0.0))
    assert waits[2]["cohort_task"] == 1


def test_early_dispatched_consumer_hides_the_dispatch_cost() -> None:
    # dispatch costs 2 us per claim, staging 1 us, the doorbell 0.5 us. P (AIC, early, 20 us): submitted
    # [0, 1], claimed over [1, 3], starts at 3.5 (doorbell), ends 23.5, FIN seen at 24.5.
    # Early on: C (an early candidate of P) is staged at 4 (P published at 3, then a 1 us staging); P's
    #   completion at 24.5 rings C's doorbell: C runs [25, 35], done at 36.
    # Early off: C is claimed after P completes: [24.5, 26.5], doorbell 27, runs [27, 37], done at 38.
    def run(early: bool) -> float:
        tasks = [task(0, Shape.AIC, 20, early=True), task(1, Shape.AIC, 10, (0,), early_candidate=True)]
        res = simulate(graph(tasks), cfg("scheduler.dispatch_task_us=2", "core.doorbell_us=0.5",
                                         "early_dispatch.stage_task_us=1",
                                         f"early_dispatch.enabled={str(early).lower()}"))
        assert res.tasks[1].first_start == pytest.approx(25.0 if early else 27.0)
        if early:
            assert res.tasks[1].first_place == pytest.approx(4.0)  # staged while P was still running
        return res.makespan

    assert run(True) == pytest.approx(36.0)
    assert run(False) == pytest.approx(38.0)


def test_an_unflagged_producer_keeps_the_consumer_out_of_the_early_window() -> None:
    # The same pair with P unflagged (and C not a candidate, as the planner would classify it): 38 us.
    tasks = [task(0, Shape.AIC, 20), task(1, Shape.AIC, 10, (0,))]
    res = simulate(graph(tasks), cfg("scheduler.dispatch_task_us=2", "core.doorbell_us=0.5"))
    assert res.makespan == pytest.approx(38.0)


def test_mix_task_takes_a_whole_cluster() -> None:
    # One cluster (1 AIC + 2 AIV). M (MIX, 2 blocks, 10 us) is claimed at 1: block 0 runs [1, 11] on the
    # AIC and both AIVs, block 1 waits in the pending slots and runs [11, 21]. V (AIV, 5 us, ready at 2)
    # finds no free AIV slot until block 0 ends; its FIN is seen at 12, V goes to a pending slot behind
    # block 1 and runs [21, 26], seen at 27.
    tasks = [task(0, Shape.MIX, 10, blocks=2), task(1, Shape.AIV, 5)]
    res = simulate(graph(tasks), cfg("machine.clusters=1"))
    m, v = res.tasks
    assert sorted(b.start for b in m.blocks) == pytest.approx([1.0, 11.0])
    assert all(len(b.cores) == 3 for b in m.blocks)
    assert v.first_start == pytest.approx(21.0)
    assert res.makespan == pytest.approx(27.0)


def _scoped(n: int, window: int, one_scope: bool) -> tuple[SimGraph, object]:
    tasks = [task(i, Shape.AIC, 10, scope=0 if one_scope else 1 + i, ring=2) for i in range(n)]
    if one_scope:
        scopes = [ScopeRecord(0, 2, None, n - 1, "layer")]
    else:
        scopes = [ScopeRecord(0, 1, None, n - 1, "root")] + [ScopeRecord(1 + i, 2, 0, i, f"iter{i}") for i in range(n)]
    return graph(tasks, scopes), cfg(f"ring.task_window={window}")


def test_orchestrator_back_pressure_with_a_tiny_task_window() -> None:
    # Task window 4: at most 3 live tasks on ring 2. Six independent 10 us AIC tasks, one scope each.
    # t0..t2 are submitted over [0, 3] and run [1, 11], [2, 12], [3, 13]. t3 must wait for t0 to retire:
    # t0 is seen complete at 12, its scope has closed, so its slot is reclaimed at 12; t3 is submitted
    # [12, 13] and runs [13, 23]; t4 waits for t1 (13): [14, 24]; t5 for t2 (14): [15, 25], seen at 26.
    g, c = _scoped(6, 4, one_scope=False)
    res = simulate(g, c)  # type: ignore[arg-type]
    assert res.stall is None
    assert [s.first_start for s in res.tasks] == pytest.approx([1, 2, 3, 13, 14, 15])
    assert res.makespan == pytest.approx(26.0)
    blocked = summarize(res)["orchestrator_blocked_us"]
    assert blocked == pytest.approx((12 - 3) + (13 - 13) + (14 - 14))
    # the default window: no back-pressure, t5 runs [6, 16]
    free = simulate(g, cfg())
    assert free.makespan == pytest.approx(17.0)


def test_a_scope_larger_than_the_window_is_reported_not_hung() -> None:
    # One scope of 6 tasks with task window 4: the scope holds 3 = W - 1 tasks when t3 is submitted,
    # which simpler rejects at once (SCOPE_DEADLOCK, orch_error_code 1).
    g, c = _scoped(6, 4, one_scope=True)
    res = simulate(g, c)  # type: ignore[arg-type]
    assert res.stall is not None and res.stall.code == "1"
    assert "SCOPE_DEADLOCK" in res.stall.reason and "t3" in res.stall.reason


def test_a_ring_whose_window_cannot_retire_is_reported() -> None:
    # Ring 3 shared by an outer scope (2 tasks) and a nested inner scope (4 tasks), window 4 (3 live):
    # the inner scope's second task waits for a slot, but the ring head (outer's first task) is consumed
    # only when the outer scope closes, after the inner one: no event can fire.
    tasks = [task(0, Shape.AIC, 10, scope=1, ring=3), task(1, Shape.AIC, 10, scope=1, ring=3)]
    tasks += [task(i, Shape.AIC, 10, scope=2, ring=3) for i in range(2, 6)]
    scopes = [ScopeRecord(0, 1, None, 5, "root"), ScopeRecord(1, 3, 0, 5, "outer"), ScopeRecord(2, 3, 1, 5, "inner")]
    res = simulate(graph(tasks, scopes), cfg("ring.task_window=4"))
    assert res.stall is not None and res.stall.code == "3"
    text = "\n".join(res.stall.details)
    assert "ring 3 head 't0' cannot retire" in text and "outer is still open" in text
    assert "orchestrator blocked" in text and "'t3'" in text
    assert [s.completed for s in res.tasks] == [True, True, True, False, False, False]


def test_a_sync_start_grid_wider_than_the_machine_is_reported() -> None:
    # 2 clusters, a sync_start MIX grid of 3 blocks: it can never start (simpler: code 7).
    res = simulate(graph([task(0, Shape.MIX, 10, blocks=3, sync_start=True)]), cfg("machine.clusters=2"))
    assert res.stall is not None and res.stall.code == "7"
    assert any("wider than the machine" in d for d in res.stall.details)


def test_dummies_are_completed_inline() -> None:
    # t0 (10 us) -> dummy -> t2 (10 us): t0 runs [1, 11], seen at 12; the dummy (0 us here) completes in
    # that thread's dispatch phase at 12 and releases t2 at once: [12, 22], seen at 23.
    tasks = [task(0, Shape.AIC, 10), task(1, Shape.DUMMY, 0, (0,)), task(2, Shape.AIC, 10, (1,))]
    res = simulate(graph(tasks), cfg())
    assert res.tasks[1].done == pytest.approx(12.0)
    assert res.makespan == pytest.approx(23.0)
    # with dummy_us = 2 the hop costs 2 us more
    assert simulate(graph(tasks), cfg("scheduler.dummy_us=2")).makespan == pytest.approx(25.0)


def test_one_task_with_the_real_a2a3_figures() -> None:
    # Derived from a2a3.toml step by step (submit 0.874, idle loop 0.1, dispatch 4.5 + 0.1 per block,
    # doorbell 0.14, setup 0.349, FIN 0.6, COND read 0.1, complete 3.0):
    #   submitted over [0, 0.874]; thread 0 spins with a 0.1 us period and notices it at 0.9;
    #   claim over [0.9, 5.5]; doorbell seen at 5.64; setup: the kernel runs [5.989, 15.989];
    #   thread 0 polls its one busy core every 0.1 us from 5.6: FIN visible at 16.589 is read at 16.6;
    #   completion processing takes 3.0: done at 19.6.
    res = simulate(graph([task(0, Shape.AIV, 10)]), load_config())
    s = res.tasks[0]
    assert s.first_start == pytest.approx(5.989)
    assert s.end == pytest.approx(15.989)
    assert res.makespan == pytest.approx(19.6)


def test_shared_hbm_bandwidth() -> None:
    # Roofline blocks (no fixed cost): 2 AIC blocks of 1e6 bytes each, HBM 100 GB/s = 1e5 bytes/us,
    # 80 GB/s per core. Alone a block streams at 8e4 B/us (its core's cap); together they share 1e5:
    # 5e4 B/us each, 20 us for both (started at 1 -> end 21, seen 22).
    t = TaskRecord(0, "mm", "mm", "mm", Shape.AIC, 2, 1, 0, bytes_per_block=1e6)
    res = simulate(graph([t]), cfg("cost.hbm_gbps=100", "cost.core_gbps=80"))
    assert [b.end for b in res.tasks[0].blocks] == pytest.approx([21.0, 21.0])
    one = TaskRecord(0, "mm", "mm", "mm", Shape.AIC, 1, 1, 0, bytes_per_block=1e6)
    assert simulate(graph([one]), cfg("cost.hbm_gbps=100", "cost.core_gbps=80")).tasks[0].end == pytest.approx(13.5)


def test_bad_overrides_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown figure"):
        load_config(("core.no_such=1",))
    with pytest.raises(ConfigError, match="expects a number"):
        load_config(("core.switch_us=fast",))
    with pytest.raises(ConfigError, match="negative"):
        load_config(("core.switch_us=-1",))
    with pytest.raises(ConfigError, match="SECTION.KEY=VALUE"):
        load_config(("core.switch_us",))


def test_every_figure_has_a_source() -> None:
    c = load_config()
    assert c.figures and all(f.source.strip() for f in c.figures.values())
    # the figures the reference measured are quoted, not fitted (docs/upstream.md §9.3)
    assert c["orchestrator.submit_us"] == 0.874 and c["scheduler.fin_latency_us"] == 0.6
    assert c["core.doorbell_us"] == 0.14 and c["core.setup_us"] == 0.349 and c["core.switch_us"] == 0.81
    assert all(c.source(k).startswith("assumption") for k in ("cost.hbm_gbps", "cost.cube_tflops"))

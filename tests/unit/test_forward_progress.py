"""Forward progress of a full-width sync_start grid beside a task that can be staged on its units
(PG119's warning): the planner warns, its critical path charges the wait, and `pgraph sim` books
the wait to the cohort (naming the staged holder), not to the scheduler.

Expected values are by hand from the spec's `cost` lines (slow 100,000, hold 10, grid 10 per
block; one wave each) and the a2a3 machine (24 AIC cores), never copied from the output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.backends.report import report_facts
from pgraph.backends.sim.analysis import summarize
from pgraph.backends.sim.config import load_config
from pgraph.backends.sim.engine import simulate
from pgraph.cli import main
from pgraph.commands.sim import load_graph
from pgraph.diagnostics import Severity
from pgraph.pipeline import Options, plan_program
from tests.conftest import ROOT

CASE = ROOT / "tests/diagnostics/PG119_sync_start_starved.staged_holder.pgl"
FIXED = ROOT / "tests/diagnostics/PG119_sync_start_starved.staged_holder.fixed.pgl"


def test_a_staged_holder_beside_a_full_width_grid_is_a_warning() -> None:
    plan, bag = plan_program(CASE, Options())
    assert plan is not None
    pg119 = [d for d in bag.items if d.code == "PG119"]
    assert len(pg119) == 1 and pg119[0].level is Severity.WARNING
    assert "'hold'" in pg119[0].message and "'slow'" in pg119[0].message
    # the grid waits while hold keeps a unit: slow's 100,000 plus hold's own 10, then runs its 10
    cp = report_facts(plan)["critical_path"]
    assert cp["length_us"] == 100_000 + 10 + 10
    grid = next(s for s in cp["path"] if s["task"] == "grid")
    assert (grid["cost_us"], grid["wait_us"], grid["waits_for"]) == (100_020, 100_010, "hold")
    # fixed (hold waits on the grid): no PG119, and the path is slow -> hold with no wait
    plan, bag = plan_program(FIXED, Options())
    assert plan is not None and "PG119" not in {d.code for d in bag.items}
    cp = report_facts(plan)["critical_path"]
    assert cp["length_us"] == 100_000 + 10 and all("wait_us" not in s for s in cp["path"])


def test_a_grid_beside_plain_tasks_stays_a_note() -> None:
    # HEAD: fa_fused (24 of 24 clusters) beside the next layer's zero-fill seeds, which have no
    # producer and so can never be staged: ordinary contention, a note, and no wait on the path
    plan, bag = plan_program(ROOT / "specs/decode_layer.pgl", Options(layers=2))
    assert plan is not None
    assert [d.level for d in bag.items if d.code == "PG119"] == [Severity.NOTE]
    assert all("wait_us" not in s for s in report_facts(plan)["critical_path"]["path"])


def test_sim_books_the_wait_to_the_cohort_and_names_the_holder(capsys: pytest.CaptureFixture[str]) -> None:
    graph, _ = load_graph(CASE, Options())
    assert graph is not None
    res = simulate(graph, load_config())
    s = summarize(res)
    ids = {t.name: t.id for t in graph.tasks}
    st = res.tasks
    # hold is staged on an AIC core while slow runs; the grid starts only after hold has ended
    assert st[ids["hold"]].blocks[0].placed < st[ids["slow"]].end
    assert min(b.start for b in st[ids["grid"]].blocks) > st[ids["hold"]].end
    w = s["waits"][ids["grid"]]
    assert w["cohort"] > 100_000 - 50 and w["scheduler"] < 20 and w["core"] < 1
    assert w["cohort_task"] == ids["grid"]
    (drain,) = s["cohorts"]
    assert drain["task"] == "grid" and drain["holders"] == [
        {"task": "hold", "staged": True, "end": st[ids["hold"]].end, "waits_on": ["slow"]}]
    parts = s["critical_path"]["parts"]
    assert parts["cohort_wait_us"] > 100_000 - 50 and parts["scheduler_wait_us"] < 20
    assert main(["sim", str(CASE)]) == 0
    out = capsys.readouterr()
    assert "held by hold (staged early, waiting on slow" in out.out
    assert "warning[PG119" in out.err


def test_a_fixed_holder_removes_the_wait(tmp_path: Path) -> None:
    graph, _ = load_graph(FIXED, Options())
    assert graph is not None
    s = summarize(simulate(graph, load_config()))
    assert s["cohorts"] == [] and s["waits_total_us"]["cohort"] == 0.0

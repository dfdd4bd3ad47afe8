"""Definite writes (PG122) against the brute-force oracle on generated programs, without C++.

The differential generator (tests/differential/programs.py) draws small valid programs; its
model gives every block's concrete elements. The oracle (`tests.differential.oracle.uncovered_reads`)
decides, element by element, which tasks read an element of an allocation that no earlier task
ordered before them writes; the order is the --full instance graph's (its edges are checked
against the recording runtime's by the differential test, which runs the same oracle on the
recorded edges). The planner's gaps (the DefiniteWrites fact) must name exactly those readers,
windowed and --full.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.kinds import TaskKind
from pgraph.pipeline import Options, plan_program
from pgraph.plan.writes import DefiniteWrites
from tests.differential import oracle
from tests.differential.programs import RandomChooser, generate, render, run_model
from tests.support import sampling

#: seeds per run, from the run's window of the long sweep (docs/reliability.md, "Sampling")
SEEDS = 120
WINDOW = sampling.window("writes-oracle", 4000, SEEDS)


def _reach(n: int, succ: dict[int, dict[int, object]]) -> list[set[int]]:
    """Descendants of every node by a plain pass in reverse submission order."""
    out: list[set[int]] = [set() for _ in range(n)]
    for u in range(n - 1, -1, -1):
        for v in succ.get(u, {}):
            out[u].add(v)
            out[u] |= out[v]
    return out


def check_seed(seed: int, tmp_path: Path) -> str:
    program = generate(RandomChooser(seed))
    if program.expect:
        return "rejected-by-design"
    spec = tmp_path / f"p{seed}.pgl"
    spec.write_text(render(program), encoding="utf-8")
    plan_w, bag_w = plan_program(spec, Options())
    plan_f, bag_f = plan_program(spec, Options(full=True))
    if plan_f is None or plan_w is None:
        return "not planned"
    model = run_model(program)
    compute = [i.id for i in plan_f.graph.instances if i.kind not in (TaskKind.DUMMY, TaskKind.ALLOC)]
    assert len(compute) == len(model), ("model and instance graph differ in tasks", len(compute), len(model))
    reach = _reach(len(plan_f.graph.instances), plan_f.graph.succ)
    expect = oracle.uncovered_reads(model, compute, reach)
    got = {compute.index(g.reader) for g in plan_f.get(DefiniteWrites).gaps}
    assert got == expect, (f"seed {seed}: planner {sorted(model[i].label for i in got)} "
                           f"oracle {sorted(model[i].label for i in expect)}\n{render(program)}")
    windowed = any(d.code == "PG122" for d in bag_w.items)
    assert windowed == bool(expect), (f"seed {seed}: windowed verdict {windowed}, oracle {sorted(expect)}")
    return "uncovered" if expect else "covered"


@pytest.mark.parametrize("seed", WINDOW.cases)
def test_gaps_equal_the_oracle(seed: int, tmp_path: Path) -> None:
    print(WINDOW.describe())
    check_seed(seed, tmp_path)


@pytest.mark.parametrize("seed", WINDOW.cases[:40])
def test_the_reference_gives_the_same_gaps(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PGRAPH_REFERENCE=1 (no direct-predecessor shortcut, no index, one `before` per writer):
    the same verdicts against the oracle."""
    monkeypatch.setenv("PGRAPH_REFERENCE", "1")
    check_seed(seed, tmp_path)

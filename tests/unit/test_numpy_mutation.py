"""Run-time mutation test on the small config (issue 5): delete each needed edge of layer 0.

Edge set: every explicit/carried edge into layer 0 of a 2-layer full expansion of HEAD (the
rules issue's set, tests/unit/test_race_mutation.py). Whether an edge is needed is decided
by the planner's static race analysis (pgraph.plan.races.find_races), a separate
implementation from the run-time detector checked here.

- CI (default): one adversarial order per mutation with the detector on, stopping at the
  first report; every needed edge must be reported, no redundant one. The edges are split in
  CHUNKS chunks (edges[c::CHUNKS]) so each test stays short, and a run checks one part of
  them: the chunks c with c % PARTS equal to the run's part (tests/support/sampling.py:
  PGRAPH_SAMPLE, else the date; printed), so PARTS successive runs check every edge. The
  counts are printed. `-m slow` checks every chunk (test_detector_reports_every_needed_edge_all).
- Full sweep (`-m slow`): additionally, with the detector off, some sampled order must make
  the output differ (consumer-first / producer-last orders compared with the unmutated graph
  in the paired order, then adversarial and random orders).
"""

from __future__ import annotations

import pytest

from pgraph.backends.numpy.compare import SINGLE_LAYER, TIER_3E3, CheckResult, Comparison
from pgraph.backends.numpy.runner import Execution
from pgraph.pipeline import Options
from pgraph.plan.races import find_races
from tests.conftest import HEAD_SPEC, REDUNDANT_LAYER0, numpy_session
from tests.support import sampling
from tests.support.numpy_mutation import _damage, layer0_edges, sweep, without_edge

CHUNKS = 12
#: a run checks CHUNKS / PARTS chunks (147 of the 588 edges)
PARTS = 4
PART = sampling.strided("NumPy mutation chunks", CHUNKS, PARTS)



def _needed(plan, u: int, v: int) -> bool:
    with without_edge(plan, u, v):
        return bool(find_races(plan))


@pytest.fixture(scope="module")
def setup():
    session = numpy_session(HEAD_SPEC, Options(config="small", layers=2), batch=14)
    edges = layer0_edges(session.plan)
    needed = {e: _needed(session.plan, *e) for e in edges}
    return session, edges, needed


def test_edge_set(setup) -> None:
    _session, edges, needed = setup
    # 588 distinct explicit edges per layer (reference §2.4); layer 0's carried edges come from
    # the entry (x_gamma0 as `prev`), so the count stays 588
    assert len(edges) == 588
    labels = [i.label for i in _session.plan.graph.instances]
    redundant = sorted((labels[u], labels[v]) for (u, v), need in needed.items() if not need)
    assert redundant == REDUNDANT_LAYER0


@pytest.mark.parametrize("chunk", PART.cases)
def test_detector_reports_every_needed_edge(setup, chunk: int) -> None:
    """This run's chunks (PART; every chunk: test_detector_reports_every_needed_edge_all, -m slow)."""
    print(PART.describe())
    check_chunk(setup, chunk)


@pytest.mark.slow
def test_detector_reports_every_needed_edge_all(setup) -> None:
    """Every chunk: all 588 edges (about 45 s)."""
    for chunk in range(CHUNKS):
        check_chunk(setup, chunk)


def test_the_parts_cover_every_chunk() -> None:
    seen = sorted(c for key in range(PARTS) for c in sampling.strided("x", CHUNKS, PARTS, key).cases)
    assert seen == list(range(CHUNKS))


def check_chunk(setup, chunk: int) -> None:  # type: ignore[no-untyped-def]
    """Delete each edge of edges[chunk::CHUNKS]: every needed one is reported, no redundant one."""
    session, edges, needed = setup
    part = edges[chunk::CHUNKS]
    caught = missed = false_alarms = quiet = 0
    bad = []
    for r in sweep(session, part, detect=True):
        if needed[r.edge]:
            caught += bool(r.detected)
            missed += not r.detected
            if not r.detected:
                bad.append(f"missed {r.label}")
        else:
            false_alarms += bool(r.detected)
            quiet += not r.detected
            if r.detected:
                bad.append(f"false alarm {r.label}: {r.how}")
    print(f"\nrun-time mutation (chunk {chunk + 1}/{CHUNKS}): {len(part)} edges, needed {caught + missed}, "
          f"reported {caught}, missed {missed}, redundant {quiet + false_alarms}, false alarms {false_alarms}")
    assert not bad, (PART.describe(), bad)


def damage_kind(how: str) -> str:
    """'<order>: <what>' of the last note of a MutationResult (the damage that was found)."""
    last = how.split("; ")[-1]
    order, _, what = last.partition(": ")
    for word, tag in (("kernel fault", "fault"), ("NaN", "NaN"), ("reference failed", "fails reference"),
                      ("paired order", "differs from paired run"), ("residual moved", "residual moved")):
        if word in what:
            return f"{order}: {tag}"
    return "none"


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["current", "tier"])
def test_full_sweep_numeric(setup, fixture: str, request: pytest.FixtureRequest,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """Every needed edge is reported and damages the output; on both input fixtures.

    Which damage is found first depends on the fixture: today's fixture barely feels attention
    and the 5e-3 depth tier forgives one-ulp drifts, so most deleted edges only differ from the
    paired unmutated run; on the tier fixture most fail against the reference itself
    (docs/backend_numpy.md, "Mutation test").
    """
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: -m slow (about 4 minutes per fixture)")
    session, edges, needed = setup
    if fixture != "current":
        session = numpy_session(HEAD_SPEC, Options(config="small", layers=2), batch=14, fixture=fixture)
        assert layer0_edges(session.plan) == edges      # the same graph: the same edges and verdicts
    counts = {"needed": 0, "reported": 0, "differs": 0, "redundant": 0, "redundant_differs": 0}
    how: dict[str, int] = {}
    bad = []
    for r in sweep(session, edges, detect=True, numeric_orders=4):
        if needed[r.edge]:
            counts["needed"] += 1
            counts["reported"] += bool(r.detected)
            counts["differs"] += bool(r.differs)
            key = damage_kind(r.how)
            how[key] = how.get(key, 0) + 1
            if not (r.detected and r.differs):
                bad.append(f"{r.label}: detected {r.detected}, differs {r.differs}")
        else:
            counts["redundant"] += 1
            counts["redundant_differs"] += bool(r.differs or r.detected)
    with capsys.disabled():
        print(f"\nrun-time mutation sweep ({fixture} fixture): {len(edges)} edges, {counts}; "
              f"damage: {dict(sorted(how.items()))}")
    assert not bad, bad[:20]
    assert counts["redundant_differs"] == 0


def test_damage_kind_reads_a_failed_comparison() -> None:
    """The note of a comparison failure classifies as such (a '; ' inside it once hid it as 'none')."""
    total = 20480
    bad = Comparison((CheckResult(TIER_3E3, 500, total, 0), CheckResult(SINGLE_LAYER, 500, total, 0)), 1,
                     0.1, 0.9999, 1e-2, 0)
    ex = Execution("consumer-first", 0, None, None, [], None, bad, 0.0)
    note = _damage(ex, ex, exact=True)
    assert note is not None and damage_kind("race: x; " + note) == "consumer-first: fails reference"

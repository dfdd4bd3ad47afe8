"""Happens-before (`pgraph.plan.reach`) in its three representations against networkx.

The bitsets (graphs of at most BITSET_NODES instances), the ancestor id ranges (larger graphs;
exact up to RANGE_CAP ranges per instance, widened and searched beyond) and the bounded
searches (the reference above the limit, PGRAPH_REFERENCE=1) must answer every question the
planner asks (`before`, `ordered_pairs`, `ordered_mask`, `implied_predecessors`, `related`)
as a brute force does: networkx's ancestor sets of random DAGs in topological id order, with
fan-ins above PAIRWISE_PREDS and caps of 1, 2 and 3 ranges so that widened sets, and the
searches that settle their answers, are exercised. Graphs past the bitset limit are planned
with a small limit (monkeypatched) so that they stay cheap: a prefill-shaped spec's verdicts,
report and diagnostics are the same in every mode. The range helpers are checked by hand.
"""

from __future__ import annotations

import json
import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgraph.backends.report import report_json
from pgraph.pipeline import Options, plan_program
from pgraph.plan import reach
from pgraph.plan.reach import PAIRWISE_PREDS, Reach, in_ranges, interval_reach, union_ranges, widen
from tests.conftest import HEAD_SPEC, ROOT


@st.composite
def _dags(draw: st.DrawFn) -> tuple[list[list[int]], list[list[int]]]:
    """A DAG whose ids are a topological order; some instances have a fan-in above PAIRWISE_PREDS."""
    n = draw(st.integers(1, 60))
    wide = draw(st.sets(st.integers(0, n - 1), max_size=3))
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for v in range(1, n):
        most = 2 * PAIRWISE_PREDS if v in wide else 4
        for u in sorted(draw(st.sets(st.integers(0, v - 1), max_size=most))):
            succ[u].append(v)
            pred[v].append(u)
    return succ, pred


def _bitsets(pred: list[list[int]]) -> list[int]:
    anc = [0] * len(pred)
    for v, ps in enumerate(pred):
        for u in ps:
            anc[v] |= anc[u] | (1 << u)
    return anc


def _truth(succ: list[list[int]]) -> list[set[int]]:
    """networkx's ancestor set of every instance."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(succ)))
    g.add_edges_from((u, v) for u, adj in enumerate(succ) for v in adj)
    return [nx.ancestors(g, v) for v in range(len(succ))]


def _modes(succ: list[list[int]], pred: list[list[int]]) -> dict[str, Reach]:
    return {"bitsets": Reach(succ, pred, _bitsets(pred)), "search": Reach(succ, pred),
            "ranges": interval_reach(succ, pred), **{f"ranges cap {c}": interval_reach(succ, pred, c) for c in (1, 2, 3)}}


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(dag=_dags(), seed=st.integers(0, 1000))
def test_every_representation_answers_as_networkx(dag, seed: int) -> None:
    import numpy as np

    succ, pred = dag
    n = len(succ)
    anc = _truth(succ)
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    random.Random(seed).shuffle(pairs)
    ordered = [a in anc[b] for a, b in pairs]
    implied = [{u for u in pred[v] if any(u in anc[w] for w in pred[v] if w != u)} for v in range(n)]
    related = [anc[v] | {w for w in range(n) if v in anc[w]} for v in range(n)]
    for name, r in _modes(succ, pred).items():
        assert r.ordered_pairs(pairs) == ordered, name
        if pairs:
            first = np.array([a for a, _ in pairs], dtype=np.int64)
            second = np.array([b for _, b in pairs], dtype=np.int64)
            assert r.ordered_mask(first, second).tolist() == ordered, name
        for a, b in pairs[:80]:
            assert r.before(a, b) == (a in anc[b]) and not r.before(b, a), name
        for v in range(n):
            assert r.implied_predecessors(v) == implied[v], (name, v)
            assert r.related(v) == related[v], (name, v)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(dag=_dags(), cap=st.integers(1, 6))
def test_range_sets_are_exact_unless_loose_and_never_miss_an_ancestor(dag, cap: int) -> None:
    succ, pred = dag
    anc = _truth(succ)
    r = interval_reach(succ, pred, cap)
    assert r.ranges is not None and r.loose is not None
    for v in range(len(succ)):
        flat = r.ranges.of(v)
        assert len(flat) <= 2 * cap and list(flat) == sorted(flat) and len(set(flat)) == len(flat)
        held = {x for x in range(len(succ)) if r.ranges.holds(v, x)}
        ranks = {r.ranges.rank[x] for x in held}
        assert ranks == {k for s, e in zip(flat[0::2], flat[1::2]) for k in range(s, e)} - {-1}
        assert held >= anc[v]
        if not r.loose[v]:
            assert held == anc[v]
        if any(r.loose[u] for u in pred[v]):
            assert r.loose[v], "a set built from a loose one is loose"


def test_ranks_skip_the_instances_without_successors() -> None:
    """0 -> 2, 1 isolated, 2 -> 4, 3 isolated: ranks 0, -, 1, -, 2; the set of 4 is one range."""
    succ, pred = [[2], [], [4], [], []], [[], [], [0], [], [2]]
    r = interval_reach(succ, pred)
    assert r.ranges is not None and list(r.ranges.rank) == [0, -1, 1, -1, -1]
    assert list(r.ranges.of(4)) == [0, 2] and r.before(0, 4) and not r.before(1, 4) and not r.before(3, 4)


def test_a_wide_grid_widens_and_still_answers_exactly() -> None:
    """A 12 x 12 grid (x[i, j] after x[i-1, j] and x[i, j-1], row-major ids): the ancestors of
    x[i, j] are i + 1 row pieces, so a cap of 3 widens every set below the third row."""
    side = 12
    n = side * side
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for i in range(side):
        for j in range(side):
            v = i * side + j
            for u in ((i - 1) * side + j if i else None, v - 1 if j else None):
                if u is not None:
                    succ[u].append(v)
                    pred[v].append(u)
    for adj, ps in zip(succ, pred):
        adj.sort()
        ps.sort()
    r = interval_reach(succ, pred, 3)
    assert r.loose is not None and sum(r.loose) > n // 2
    for a in range(n):
        for b in range(a + 1, n):
            ai, aj, bi, bj = a // side, a % side, b // side, b % side
            assert r.before(a, b) == (ai <= bi and aj <= bj), (a, b)
    # x[i, j]'s two predecessors never imply one another (neither reaches the other)
    assert all(not r.implied_predecessors(v) for v in range(n))


def test_range_helpers_by_hand() -> None:
    assert [in_ranges((2, 5, 7, 8), x) for x in range(10)] == [False, False, True, True, True, False, False,
                                                               True, False, False]
    assert union_ranges([(0, 2), (5, 7)], [2, 9]) == [0, 3, 5, 7, 9, 10]
    assert union_ranges([(0, 2), (1, 4)], [4]) == [0, 5]
    assert union_ranges([], []) == []
    # gaps 3-5 (2 wide), 6-10 (4), 11-12 (1): a cap of 2 keeps the widest gap only
    assert widen([0, 3, 5, 6, 10, 11, 12, 13], 2) == [0, 6, 10, 13]
    assert widen([0, 3, 5, 6, 10, 11, 12, 13], 3) == [0, 3, 5, 6, 10, 13]
    assert widen([0, 3, 5, 6], 5) == [0, 3, 5, 6]
    assert widen([0, 1, 2, 3, 4, 5], 1) == [0, 5]


def _report(spec, opts: Options) -> str:
    plan, bag = plan_program(spec, opts)
    assert plan is not None
    return json.dumps(report_json(plan, str(spec)), indent=1, sort_keys=True)


@pytest.mark.parametrize("spec", [HEAD_SPEC, ROOT / "bench" / "specs" / "prefill_31k.pgl"], ids=lambda p: p.name)
def test_graphs_past_the_bitset_limit_plan_the_same(spec, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the bitset limit at 400 instances (the 3-layer decode window has 564, the prefill
    window 1,689), the ranges (exact, and widened to 4), the bounded searches and the
    bitsets give one report: races, redundant edges, funnels, critical path, diagnostics."""
    opts = Options(layers=3) if spec == HEAD_SPEC else Options()
    monkeypatch.delenv("PGRAPH_REFERENCE", raising=False)
    bitsets = _report(spec, opts)
    built: list[Reach] = []
    real = reach.interval_reach

    def recording(succ, pred, cap=None):  # type: ignore[no-untyped-def]
        built.append(real(succ, pred, cap))
        return built[-1]

    monkeypatch.setattr(reach, "BITSET_NODES", 400)
    monkeypatch.setattr(reach, "interval_reach", recording)
    assert _report(spec, opts) == bitsets
    assert built and built[-1].n > 400 and built[-1].loose is not None and not any(built[-1].loose)
    monkeypatch.setattr(reach, "RANGE_CAP", 4)
    assert _report(spec, opts) == bitsets
    loose = built[-1].loose
    assert loose is not None and 0 < sum(loose) < built[-1].n, "some sets widened, some exact"
    monkeypatch.setenv("PGRAPH_REFERENCE", "1")
    count = len(built)
    assert _report(spec, opts) == bitsets
    assert len(built) == count, "the reference searches, it builds no ranges"

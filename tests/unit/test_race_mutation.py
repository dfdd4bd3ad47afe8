"""Mutation test of the race rule, cross-checked by a brute-force oracle.

Take layer 0 of a 2-layer full expansion of the HEAD spec. For each explicit or carried
(producer, consumer) edge whose consumer is in layer 0, delete it and re-run the planner's
race analysis. Separately, the oracle below (plain Python over the expanded instances and
their concrete element ranges; it shares no code with pgraph.plan) decides whether some
conflicting pair became unordered. The planner must report a race exactly when the oracle
does, for every edge.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from pgraph.pipeline import Options, plan_program
from pgraph.plan.races import find_races
from tests.conftest import HEAD_SPEC, REDUNDANT_LAYER0
from tests.support.numpy_mutation import layer0_edges, without_edge

# ---- the oracle: flat element runs, BFS reachability ------------------------------------


def _runs(box: tuple[tuple[int, int], ...], shape: tuple[int, ...]) -> list[tuple[int, int]]:
    """Row-major flat [start, end) runs of a box (merging runs that touch)."""
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    # the innermost contiguous block: trailing full dimensions fuse with the last partial one
    k = len(shape) - 1
    while k > 0 and box[k] == (0, shape[k]):
        k -= 1
    inner = (box[k][1] - box[k][0]) * strides[k]
    starts = [0]
    for d in range(k):
        starts = [s + i * strides[d] for s in starts for i in range(box[d][0], box[d][1])]
    runs = sorted((s + box[k][0] * strides[k], s + box[k][0] * strides[k] + inner) for s in starts)
    merged: list[tuple[int, int]] = []
    for lo, hi in runs:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][0] < b[j][1] and b[j][0] < a[i][1]:
            return True
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return False


def oracle_conflicts(plan) -> list[tuple[int, int]]:
    """Pairs (a, b) touching a common element of one buffer, at least one writing, not both atomic."""
    tensors = plan.program.tensors
    per_buf: dict[object, dict[int, list[tuple[str, list[tuple[int, int]]]]]] = defaultdict(lambda: defaultdict(list))
    for node, blocks in plan.graph.blocks.items():
        for block in blocks:
            for kind, items in block.items():
                for tname, key, box, _ind in items:
                    base = tensors[tname].base or tname
                    shape = tensors[tname].shape
                    # views are row-major reshapes: flat offsets are shared with the base
                    per_buf[(base, key[1])][node].append((kind, _runs(box, shape)))
    out = []
    for per_node in per_buf.values():
        nodes = sorted(per_node)
        for i, a in enumerate(nodes):
            for b in nodes[i + 1:]:
                if any(
                    not (ka == "read" and kb == "read") and not (ka == "atomic" and kb == "atomic")
                    and _intersect(ra, rb)
                    for ka, ra in per_node[a] for kb, rb in per_node[b]
                ):
                    out.append((a, b))
    return sorted(set(out))


def reachable(succ: dict[int, list[int]], src: int, removed: tuple[int, int]) -> set[int]:
    seen = {src}
    stack = [src]
    while stack:
        u = stack.pop()
        for v in succ.get(u, ()):
            if (u, v) == removed or v in seen:
                continue
            seen.add(v)
            stack.append(v)
    return seen


@pytest.fixture(scope="module")
def head2():
    plan, bag = plan_program(HEAD_SPEC, Options(layers=2, full=True))
    assert plan is not None and not bag.has_errors
    return plan


def test_head_has_no_race_by_both(head2) -> None:
    g = head2.graph.graph
    succ = {u: list(g.successors(u)) for u in g.nodes}
    pairs = oracle_conflicts(head2)
    assert pairs, "the oracle must see conflicting pairs in the real spec"
    unordered = [(a, b) for a, b in pairs if b not in reachable(succ, a, (-1, -1))]
    assert unordered == []
    assert find_races(head2) == []


def test_edge_deletion_mutations(head2) -> None:
    plan = head2
    g = plan.graph.graph
    succ = {u: list(g.successors(u)) for u in g.nodes}
    pairs = oracle_conflicts(plan)
    layer0 = layer0_edges(plan)
    # 588 distinct explicit edges per layer (reference §2.4); layer 0's carried edges come from
    # the entry (x_gamma0 as `prev`) and are among them
    assert len(layer0) == 588
    labels = [i.label for i in plan.graph.instances]
    needed = caught = false_alarms = missed = 0
    redundant: list[tuple[str, str]] = []
    for u, v in layer0:
        # delete the explicit/carried dep; an inferred edge between the same pair would stay
        still_inferred = bool(g.edges[u, v].prov - {"explicit", "carried"})
        with without_edge(plan, u, v):
            planner_race = bool(find_races(plan))
        removed = (u, v) if not still_inferred else (-1, -1)
        cache: dict[int, set[int]] = {}
        oracle_race = False
        for a, b in pairs:
            if a not in cache:
                cache[a] = reachable(succ, a, removed)
            if b in cache[a]:
                continue
            oracle_race = True
            break
        needed += oracle_race
        if not oracle_race:
            redundant.append((labels[u], labels[v]))
        caught += oracle_race and planner_race
        false_alarms += planner_race and not oracle_race
        missed += oracle_race and not planner_race
    print(f"\nrace mutation test: {len(layer0)} edges, needed {needed}, redundant {len(redundant)}, "
          f"caught {caught}, false alarms {false_alarms}, missed {missed}")
    assert false_alarms == 0 and missed == 0
    assert caught == needed
    # the edges that order no data, derived by hand in tests/conftest.py
    assert sorted(redundant) == REDUNDANT_LAYER0

"""Run-time mutation test: delete one explicit/carried edge, execute, and see the damage.

The edge set is the rules issue's (tests/unit/test_race_mutation.py): every explicit or
carried edge whose consumer belongs to layer 0 of a 2-layer full expansion. Deleting the
edge drops its explicit/carried provenance; an inferred edge between the same pair stays.

For each mutation (u -> v):
- `detected`: the race detector, in the adversarial order of the mutated graph, reports a
  race (CI stops at the first report);
- `differs`: with the detector off, some sampled order of the mutated graph faults, yields
  NaN/Inf, fails the comparison with the dense reference, or gives a different output than
  the unmutated graph run in the *paired* order. The sampled orders are consumer-first (v
  and its ancestors first), producer-last (u and its descendants last), adversarial and
  seeded random ones. The paired order is the same construction on the unmutated graph: it
  runs the same tasks in the same relative order except v's (resp. u's) side of the deleted
  edge, so f32 atomic adds are accumulated in the same order and any difference is damage;
  adversarial and random orders are compared with the topological run and ORDER_BOUND.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import attrs
import networkx as nx

from pgraph import records
from pgraph.backends.numpy.orders import topo_order
from pgraph.backends.numpy.runner import Execution, Session, max_diff
from pgraph.ir.instances import Edge
from pgraph.kinds import DECLARED
from pgraph.plan.base import Plan

#: Allowed |f32 residual difference| between legal orders of the unmutated small 2-layer
#: graph: f32 atomic-add reassociation, measured <= 1.4e-6 over 20 random orders and the
#: adversarial one (4.5e-6 with the input streams of 0cf58ea; docs/backend_numpy.md). Used only
#: for orders without a paired baseline.
ORDER_BOUND = 2e-5

NUMERIC_KINDS = ("consumer-first", "producer-last", "adversarial", "random")


def consumer_first_order(graph: nx.DiGraph, consumer: int) -> list[int]:
    """`consumer` and its ancestors first, then the rest, both parts in submission order.

    Legal for any graph. After deleting an edge producer -> consumer (and no other path),
    the consumer runs before the producer.
    """
    early = nx.ancestors(graph, consumer) | {consumer}
    order = topo_order(graph)
    return [n for n in order if n in early] + [n for n in order if n not in early]


def producer_last_order(graph: nx.DiGraph, producer: int) -> list[int]:
    """Everything that does not depend on `producer` first, then the producer and its descendants.

    Both parts in submission order; legal for any graph (a non-descendant's predecessors are
    non-descendants). It delays `producer` as long as the graph allows, so after deleting an
    edge producer -> consumer every task that no longer waits for the producer runs first.
    """
    late = nx.descendants(graph, producer) | {producer}
    order = topo_order(graph)
    return [n for n in order if n not in late] + [n for n in order if n in late]


def layer0_edges(plan: Plan) -> list[tuple[int, int]]:
    """Explicit/carried edges (u, v) with v in iteration 0 of the layer loop, sorted."""
    g = plan.graph.graph
    out = []
    for u, v, data in g.edges(data=True):
        if data.prov & {"explicit", "carried"} and plan.graph.instances[v].iters[:1] == (0,):
            out.append((u, v))
    return sorted(out)


def _put(g: nx.DiGraph, u: int, v: int, data: Edge) -> None:
    """Edge (u, v) of `g` with `data` (an `Edge` record, as the instance graph holds it)."""
    g.add_edge(u, v)
    g._succ[u][v] = data
    g._pred[v][u] = data


def _drop_declared(g: nx.DiGraph, u: int, v: int) -> Edge:
    """Remove the explicit/carried entry of edge (u, v) from `g` in place (an inferred or
    creator edge between the same pair stays); returns the edge's original data."""
    data: Edge = g.edges[u, v]
    keep = data.prov - DECLARED
    g.remove_edge(u, v)
    if keep:
        _put(g, u, v, data._replace(prov=frozenset(keep)))
    return data


def mutated(graph: nx.DiGraph, u: int, v: int) -> nx.DiGraph:
    """A copy of `graph` without the explicit/carried entry of edge (u, v)."""
    g = nx.DiGraph()
    g.add_nodes_from(graph)
    for a, adj in graph.adjacency():
        for b, data in adj.items():
            _put(g, a, b, data)
    _drop_declared(g, u, v)
    return g


@contextlib.contextmanager
def without_edge(plan: Plan, u: int, v: int) -> Iterator[None]:
    """Within the block, `plan`'s own instance graph lacks the explicit/carried entry of (u, v).

    For analyses that read `plan.graph.graph` in place (the planner's race rule, whose
    `find_races(plan)` computes the happens-before of the graph as it is); the edge is restored
    on exit, also when the body raises.
    """
    g = plan.graph.graph
    data = _drop_declared(g, u, v)
    try:
        yield
    finally:
        if g.has_edge(u, v):
            g.remove_edge(u, v)
        _put(g, u, v, data)


@records.value
@attrs.frozen(repr=False, eq=False)
class MutationResult:
    """The outcome for one deleted edge (None: that check was not run)."""

    edge: tuple[int, int]
    label: str
    detected: bool | None
    differs: bool | None
    how: str


def edge_label(plan: Plan, u: int, v: int) -> str:
    """'producer -> consumer' instance labels."""
    return f"{plan.graph.instances[u].label} -> {plan.graph.instances[v].label}"


def _damage(ex: Execution, baseline: Execution, exact: bool) -> str | None:
    if ex.fault is not None:
        return f"{ex.kind}: kernel fault ({ex.fault})"
    if ex.comparison is None:
        return f"{ex.kind}: no output"
    if ex.comparison.nonfinite:
        return f"{ex.kind}: {ex.comparison.nonfinite} NaN/Inf in the output"
    if not ex.comparison.ok:
        c = ex.comparison
        return f"{ex.kind}: comparison with the reference failed ({c.primary.check.name}: {c.primary.render()})"
    d = max_diff(ex.residual, baseline.residual)
    if exact and max(d, max_diff(ex.out, baseline.out)) > 0:
        return f"{ex.kind}: output differs from the unmutated run in the paired order (residual by {d:.3e})"
    if not exact and d > ORDER_BOUND:
        # the bf16 output may flip one ulp between legal orders; the f32 residual is the measure
        return f"{ex.kind}: f32 residual moved by {d:.3e} (> {ORDER_BOUND:g})"
    return None


def _orders(session: Session, g: nx.DiGraph, u: int, v: int, kind: str) -> tuple[list[int] | None, list[int] | None]:
    g0 = session.plan.graph.graph
    if kind == "consumer-first":
        return consumer_first_order(g, v), consumer_first_order(g0, v)
    if kind == "producer-last":
        return producer_last_order(g, u), producer_last_order(g0, u)
    return None, None


def run_mutation(session: Session, u: int, v: int, baseline: Execution, detect: bool = True,
                 numeric_orders: int = 0, seed: int = 0) -> MutationResult:
    """Delete edge (u, v); run the detector (adversarial, stop at first) and/or the numeric check.

    `numeric_orders` > 0 runs that many orders of NUMERIC_KINDS (random repeated with seeds
    seed, seed+1, ...) with the detector off, stopping at the first that shows damage.
    """
    plan = session.plan
    g = mutated(plan.graph.graph, u, v)
    detected = None
    notes: list[str] = []
    if detect:
        ex = session.execute("adversarial", graph=g, stop_at_first=True)
        detected = bool(ex.races)
        if ex.races:
            notes.append(ex.races[0].render(plan.graph).splitlines()[0])
    differs = None
    if numeric_orders > 0:
        differs = False
        kinds = list(NUMERIC_KINDS[:3]) + ["random"] * max(0, numeric_orders - 3)
        for i, kind in enumerate(kinds[:numeric_orders]):
            order, paired = _orders(session, g, u, v, kind)
            ex = session.execute(kind if kind in ("adversarial", "random") else "topo", seed=seed + i,
                                 races=False, graph=g, order=order)
            ex.kind = kind
            base = baseline if paired is None else session.execute("topo", races=False, order=paired)
            damage = _damage(ex, base, exact=paired is not None)
            if damage is not None:
                differs = True
                notes.append(damage)
                break
    return MutationResult((u, v), edge_label(plan, u, v), detected, differs, "; ".join(notes))


def sweep(session: Session, edges: list[tuple[int, int]], detect: bool = True, numeric_orders: int = 0,
          seed: int = 0) -> Iterator[MutationResult]:
    """run_mutation for every edge, against one unmutated topological baseline run."""
    baseline = session.execute("topo", races=False)
    for u, v in edges:
        yield run_mutation(session, u, v, baseline, detect, numeric_orders, seed)

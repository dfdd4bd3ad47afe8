"""Ordering checks of the instance graph: cycles (PG013) and deps on later submits (PG032).

Tasks are submitted in program order and a TaskId exists only once its task is submitted,
so an edge from a later submit to an earlier one is a dep on a task that does not exist yet
(the generated code would drop it as invalid); a cycle always contains such an edge.
"""

from __future__ import annotations

from pgraph.diagnostics import Note
from pgraph.ir.program import Dispatch, interleave_key
from pgraph.plan.base import Pass, Plan


class CyclesPass(Pass):
    """PG013 for a dependency cycle, else PG032 for each (producer, consumer) dispatch pair
    with a dep on a later submit."""

    name = "cycles"

    def run(self, plan: Plan) -> None:
        g = plan.graph
        if all(u < v for u, v, _ in g.edges()):
            return  # every edge runs forward in submission order: no cycle, no dep on a later submit
        import networkx as nx

        if nx.is_directed_acyclic_graph(g.graph):  # linear; find_cycle is slow on big DAGs
            self.forward(plan)
            return
        cycle = nx.find_cycle(g.graph)
        # Start at an edge whose producer is submitted after its consumer (every cycle has
        # one): that dep names a future task, so it is the one to report.
        back = next((i for i, (u, v) in enumerate(cycle) if u > v), 0)
        cycle = cycle[back:] + cycle[:back]
        names = [g.instances[u].label for u, _ in cycle]
        first = g.graph.edges[cycle[0]]
        notes = [Note(f"{g.instances[v].label} waits on {g.instances[u].label}", g.graph.edges[u, v].span)
                 for u, v in cycle]
        plan.bag.add("PG013", "dependency cycle: " + " -> ".join([*names, names[0]]), first.span, notes,
                     hint="remove one of the deps in the cycle; a task cannot wait on its own consumers")

    @staticmethod
    def forward(plan: Plan) -> None:
        g = plan.graph
        p = plan.program
        done: set[tuple[str, str]] = set()
        for consumer, producer in sorted((v, u) for u, v in g.graph.edges if u > v):
            ip, ic = g.instances[producer], g.instances[consumer]
            key = (ip.dispatch, ic.dispatch)
            if key in done:
                continue
            done.add(key)
            dp, dc = p.dispatch(ip.dispatch), p.dispatch(ic.dispatch)
            plan.bag.add("PG032", f"'{ic.label}' depends on '{ip.label}', which is submitted after it",
                         g.graph.edges[producer, consumer].span,
                         [Note(f"'{ip.dispatch}' is declared here", dp.span)], hint=forward_hint(dp, dc))


def forward_hint(dp: Dispatch, dc: Dispatch) -> str:
    """How to fix a dep of `dc` on the later-submitted `dp`."""
    same_block = dp.interleave is not None and dp.interleave == dc.interleave
    if same_block and interleave_key(dp) != interleave_key(dc):
        return (f"'{dp.name}' and '{dc.name}' are in one `interleave` block but in different groups, "
                "which are submitted in the order of their first member; declare the producer's group "
                "first, or take it out of the block")
    if same_block:
        return ("both are in one `interleave` block, which submits index by index: a task may depend on "
                "earlier indices, or on the same index of an earlier member; depend on an earlier index, "
                "or take the producer out of the block")
    return ("tasks are submitted in program order and a TaskId exists only once its task is submitted "
            "(a dep on a later task is dropped as invalid); move the producer before the consumer")

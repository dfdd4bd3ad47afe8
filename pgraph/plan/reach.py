"""Happens-before over the instance graph: ancestor sets as Python-int bitsets."""

from __future__ import annotations

import attrs
import networkx as nx

from pgraph.plan.base import Fact, Pass, Plan


@attrs.frozen
class Reach(Fact):
    """`anc[v]` has bit u set when a path u -> ... -> v exists (any provenance)."""

    anc: list[int]

    def ordered(self, a: int, b: int) -> bool:
        """True when a happens before b or b before a."""
        return bool(self.anc[b] >> a & 1) or bool(self.anc[a] >> b & 1)

    def before(self, a: int, b: int) -> bool:
        """True when a path a -> ... -> b exists."""
        return bool(self.anc[b] >> a & 1)


def ancestors(plan: Plan) -> Reach:
    """The Reach of `plan`'s graph in topological order: O(V + E) big-int ORs (the graph is acyclic)."""
    g = plan.graph.graph
    anc = [0] * len(plan.graph.instances)
    for v in nx.topological_sort(g):
        bits = 0
        for u in g.predecessors(v):
            bits |= anc[u] | (1 << u)
        anc[v] = bits
    return Reach(anc)


class ReachPass(Pass):
    """Produces Reach (after the cycle check: the graph is a DAG)."""

    name = "reach"
    produces = (Reach,)

    def run(self, plan: Plan) -> None:
        plan.put(ancestors(plan))

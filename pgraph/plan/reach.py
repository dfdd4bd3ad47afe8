"""Happens-before over the instance graph: ancestor sets as Python-int bitsets."""

from __future__ import annotations

import networkx as nx

from pgraph.plan.base import Plan


def ancestors(plan: Plan) -> list[int]:
    """`anc[v]` has bit u set when a path u -> ... -> v exists (any provenance).

    Computed once per plan (cached in `plan.facts['_ancestors']`) in topological order:
    O(V + E) big-int ORs. Requires an acyclic graph (the expander reports cycles first).
    """
    cached = plan.facts.get("_ancestors")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    g = plan.graph.graph
    anc = [0] * len(plan.graph.instances)
    for v in nx.topological_sort(g):
        bits = 0
        for u in g.predecessors(v):
            bits |= anc[u] | (1 << u)
        anc[v] = bits
    plan.facts["_ancestors"] = anc
    return anc


def ordered(anc: list[int], a: int, b: int) -> bool:
    """True when a happens before b or b before a."""
    return bool(anc[b] >> a & 1) or bool(anc[a] >> b & 1)

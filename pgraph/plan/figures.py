"""The plan's headline figures under stable names: what `pgraph stats` prints and what a
`budget` statement bounds (pgraph.plan.budgets).

Every figure is an integer computed from facts earlier passes produced (Counts, RingTable,
CriticalPath) or from the instance graph with the window weights: one layer is the
representative iteration of the layer loop (the report's "one layer" row).
"""

from __future__ import annotations

from typing import Any

import attrs

from pgraph import records
from pgraph.kinds import BUDGET_FIGURES, DECLARED, Provenance
from pgraph.plan.base import Plan, layer_share
from pgraph.plan.counts import Counts
from pgraph.plan.critical_path import CriticalPath
from pgraph.plan.rings import RingTable

__all__ = ["FIGURES", "Figure", "figures"]

#: The provenances `edges` counts: what the report's explicit and inferred columns count.
WAITED = DECLARED | {Provenance.INFERRED}


@records.value
@attrs.frozen(repr=False, eq=False)
class Figure:
    """A budgetable figure: its name, what it counts, and its unit."""

    name: str
    meaning: str
    unit: str


#: The figures, in the order `pgraph stats` prints them (pgraph.kinds.BUDGET_FIGURES).
FIGURES: dict[str, Figure] = {name: Figure(name, meaning, unit) for name, (meaning, unit) in BUDGET_FIGURES.items()}


def figures(plan: Plan) -> dict[str, int]:
    """Every figure but `sim_us`, by name (per-layer figures are 0 without a layer loop)."""
    counts = plan.get(Counts)
    whole, layer = counts.summary, counts.per_layer or {}
    g = plan.graph
    creator = edges = layer_edges = 0
    for _, v, data in g.edges():
        inst = g.instances[v]
        if Provenance.CREATOR in data.prov:
            creator += inst.weight
        if data.prov & WAITED:
            edges += inst.weight
            if plan.in_layer(inst):
                layer_edges += layer_share(plan, inst)
    rings: list[dict[str, Any]] = plan.get(RingTable).rings
    ring3 = next((r["peak_tasks_with_carry"] for r in rings if r["ring"] == 3), 0)
    cp = plan.get(CriticalPath).value or {}
    return {
        "submits_per_layer": layer.get("tasks", 0) + layer.get("dummy_tasks", 0),
        "submits": whole["tasks"] + whole["dummy_tasks"],
        "tasks_per_layer": layer.get("tasks", 0),
        "blocks_per_layer": layer.get("blocks", 0),
        "edges_per_layer": layer_edges,
        "edges": edges,
        "creator_edges": creator,
        "ring3_live_tasks": ring3,
        "critical_path": int(cp.get("length_us", 0)),
        "critical_path_per_layer": int(cp.get("per_layer_us", 0) or 0),
    }

"""The ordered tuple of planner passes and the registry that maps names to them."""

from __future__ import annotations

from pgraph.plan.base import Pass, Plan
from pgraph.plan.counts import CountsPass
from pgraph.plan.hygiene import DuplicateDepsPass
from pgraph.plan.scopes import ScopeTablePass

#: The planner, in order. Each pass reads the IR and the instance graph and adds facts.
PASSES: tuple[Pass, ...] = (
    CountsPass(),          # tasks / dummies / blocks / edges, per layer and in total; phases
    ScopeTablePass(),      # scope depths, rings and heap bytes per scope
    DuplicateDepsPass(),   # PG016: duplicate dep entries folded
)

REGISTRY: dict[str, Pass] = {p.name: p for p in PASSES}


def run_passes(plan: Plan) -> Plan:
    """Run every pass in order; a pass never raises for bad input, it adds diagnostics."""
    for p in PASSES:
        p.run(plan)
    return plan

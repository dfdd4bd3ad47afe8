"""The ordered tuple of planner passes and the registry that maps names to them."""

from __future__ import annotations

from pgraph.plan.base import Pass, Plan
from pgraph.plan.counts import CountsPass
from pgraph.plan.critical_path import CriticalPathPass
from pgraph.plan.early_dispatch import DummyEffectPass, EarlyDispatchPass
from pgraph.plan.hygiene import (
    DeadTaskPass,
    DuplicateDepsPass,
    FunnelPass,
    RedundantEdgePass,
    UnusedTensorPass,
)
from pgraph.plan.races import FalseSerializationPass, RacePass, SpmdOverlapPass
from pgraph.plan.rings import RingsPass
from pgraph.plan.scopes import ScopeTablePass
from pgraph.plan.sync_start import SyncStartStarvedPass

#: The planner, in order. Each pass reads the IR and the instance graph and adds facts.
PASSES: tuple[Pass, ...] = (
    CountsPass(),              # tasks / dummies / blocks / edges, per layer and in total; phases
    ScopeTablePass(),          # scope depths, rings and heap bytes per scope
    RacePass(),                # PG100 race, PG101 manual-scope boundary
    SpmdOverlapPass(),         # PG102 blocks of one grid writing the same region
    FalseSerializationPass(),  # PG103 disjoint writers the runtime serializes
    EarlyDispatchPass(),       # early-dispatch table; PG105 blocked consumers, PG106 idle flags
    DummyEffectPass(),         # PG104 what each dummy really does
    CriticalPathPass(),        # longest path and the first broken early-resolve link
    RingsPass(),               # PG107-PG114 rings, task window, heap, dep pool, TensorMap, limits
    SyncStartStarvedPass(),    # PG119 sync_start grids wider than the cores their shape can have free
    DuplicateDepsPass(),       # PG016 duplicate dep entries folded
    RedundantEdgePass(),       # PG115 edges implied by other paths
    FunnelPass(),              # PG116 fan-outs that could go through one node
    DeadTaskPass(),            # PG117 tasks whose outputs nobody reads
    UnusedTensorPass(),        # PG118 tensors nobody touches
)

REGISTRY: dict[str, Pass] = {p.name: p for p in PASSES}


def run_passes(plan: Plan) -> Plan:
    """Run every pass in order; a pass never raises for bad input, it adds diagnostics."""
    for p in PASSES:
        p.run(plan)
    return plan

"""The sim runner of `pgraph.backends.target` (`pgraph sim`): a fully expanded Plan becomes the
simulator's records (`graph_input`), which the scheduler model runs once (`engine.simulate`).

`pgraph.commands.sim` fills `SimOptions` from its arguments and renders the `engine.Result`
(summary, comparisons, trace, the `sim_us` budgets); `TARGET.graph(plan)` gives the records
alone (`pgraph sim --calibrate` fits costs to them without simulating).
"""

from __future__ import annotations

import attrs

from pgraph import records
from pgraph.backends.target import require_full
from pgraph.plan.base import Plan

from .config import SimConfig
from .engine import Result, simulate
from .graph_input import graph_from_plan
from .records import SimGraph

__all__ = ["TARGET", "SimOptions", "SimTarget"]


@records.value
@attrs.frozen(repr=False, eq=False)
class SimOptions:
    """What one simulation takes: the timing table (`config.load_config`), the per-kernel µs
    per block of a calibration (`cost.load_calibration`; None: the roofline and `cost` lines),
    and the spec as the records name it (`SimGraph.source`)."""

    config: SimConfig
    calibration: dict[str, float] | None = None
    source: str = ""


@records.value
@attrs.frozen(repr=False, eq=False)
class SimTarget:
    """The sim runner: the simpler scheduler model on a fully expanded plan."""

    name: str = "sim"
    description: str = "simulate the simpler scheduler on a2a3: makespan, critical path, waits (`pgraph sim`)"
    needs_full: bool = True  # the simulator runs each task once, every layer

    def graph(self, plan: Plan, source: str = "") -> SimGraph:
        """The simulator's records of `plan` (InternalError for a windowed plan)."""
        require_full(self, plan)
        return graph_from_plan(plan, source)

    def run(self, plan: Plan, options: SimOptions) -> Result:
        """Simulate `plan` once under `options` (InternalError for a windowed plan)."""
        return simulate(self.graph(plan, options.source), options.config, options.calibration)


TARGET = SimTarget()

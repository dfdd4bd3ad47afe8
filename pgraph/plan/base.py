"""The Plan (program + instance graph + diagnostics + facts) and the Pass interface."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from pgraph.diagnostics import DiagnosticBag
from pgraph.ir.instances import Instance, InstanceGraph
from pgraph.ir.program import Program


@attrs.define
class Plan:
    """What the planner knows about one program: facts recorded by passes, keyed by name."""

    program: Program
    graph: InstanceGraph
    bag: DiagnosticBag
    facts: dict[str, Any] = attrs.field(factory=dict)

    @property
    def layer_loop(self) -> int | None:
        """The id of the first top-level loop (the layer loop), or None."""
        for lp in self.program.loops:
            if lp.parent_scope == 0:
                return lp.id
        return None

    def representative_iteration(self) -> int | None:
        """The layer-loop iteration standing for 'one layer' (the second when there are two)."""
        lid = self.layer_loop
        if lid is None:
            return None
        ax = self.program.loops[lid].axis
        if ax.size == 0:
            return None
        return ax.lo + 1 if ax.size >= 2 else ax.lo

    def in_layer(self, inst: Instance) -> bool:
        """True when `inst` belongs to the representative iteration of the layer loop."""
        lid = self.layer_loop
        rep = self.representative_iteration()
        if lid is None or rep is None or inst.kind == "alloc":
            return False
        d = self.program.dispatch(inst.dispatch)
        return bool(d.loops) and d.loops[0] == lid and inst.iters[0] == rep


def layer_share(plan: Plan, inst: Instance) -> int:
    """How many real tasks `inst` stands for within one layer (nested window-expanded loops)."""
    lid = plan.layer_loop
    if lid is None or not inst.iters:
        return inst.weight
    rep = plan.representative_iteration()
    return inst.weight // plan.graph.loop_weights[lid].get(rep if rep is not None else 0, 1)


class Pass:
    """A planner pass: a kebab-case `name` and one `run(plan)` that adds diagnostics and facts."""

    name: ClassVar[str] = ""

    def run(self, plan: Plan) -> None:  # pragma: no cover - interface
        """Analyse `plan`, appending diagnostics to `plan.bag` and facts to `plan.facts`."""
        raise NotImplementedError

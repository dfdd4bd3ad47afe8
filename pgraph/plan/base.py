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
    #: the id of the first top-level loop (the layer loop), or None (set from `program`)
    layer_loop: int | None = attrs.field(init=False)
    _rep: int | None = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.layer_loop = next((lp.id for lp in self.program.loops if lp.parent_scope == 0), None)
        self._rep = None
        if self.layer_loop is not None:
            ax = self.program.loops[self.layer_loop].axis
            if ax.size > 0:
                self._rep = ax.lo + 1 if ax.size >= 2 else ax.lo

    def representative_iteration(self) -> int | None:
        """The layer-loop iteration standing for 'one layer' (the second when there are two)."""
        return self._rep

    def in_layer(self, inst: Instance) -> bool:
        """True when `inst` (not an alloc task) belongs to the representative iteration of the layer loop."""
        if self._rep is None or inst.kind == "alloc":
            return False
        return bool(inst.loops) and inst.loops[0] == self.layer_loop and inst.iters[0] == self._rep

    def reported(self, inst: Instance) -> bool:
        """Instances per-layer reports show: the representative layer, plus tasks outside every loop."""
        return self.in_layer(inst) or (inst.kind != "alloc" and not inst.loops)


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

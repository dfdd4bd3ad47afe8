"""The Plan (program + instance graph + diagnostics + typed facts), Pass and ProgramCheck.

A check of the resolved Program (`ProgramCheck`) runs before expansion and reads the IR
only. A planner `Pass` runs on the Plan: it reads the instance graph and the facts earlier
passes produced, appends diagnostics and puts its own facts. Facts are attrs records, one
class per kind of fact: a pass declares the classes it `requires` and `produces`, and
`pgraph.pipeline` refuses an order in which a fact is read before it is produced. Passes
hold no state between runs: everything they learn goes into the Plan.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import attrs

from pgraph import records
from pgraph.diagnostics import DiagnosticBag
from pgraph.ir.instances import Instance, InstanceGraph
from pgraph.ir.program import Program
from pgraph.ir.queries import representative_iteration
from pgraph.kinds import InternalError, TaskKind


class Fact:
    """Base class of the typed facts passes exchange (each an attrs record)."""


F = TypeVar("F", bound=Fact)


class FactMissing(InternalError):
    """A pass read a fact no earlier pass produced (a pipeline ordering bug)."""


def layer_loop_of(program: Program) -> int | None:
    """The layer loop: of the loops standing directly in the entry scope, the one holding the most
    dispatches (the first of those on a tie); None without such a loop. The decode entry also
    has the one-trip loops around copy_hidden and copy_out (pypto `pl.parallel(0, 16, 16)`,
    docs/upstream.md §8.10), which hold one dispatch each."""
    top = [lp for lp in program.loops if lp.parent_scope == 0]
    if not top:
        return None
    held = {lp.id: sum(1 for d in program.dispatches if lp.id in d.loops) for lp in top}
    return max(top, key=lambda lp: (held[lp.id], -lp.id)).id


@records.shared_repr
@attrs.define(repr=False)
class Plan:
    """What the planner knows about one program: its instance graph, diagnostics and facts."""

    program: Program
    graph: InstanceGraph
    bag: DiagnosticBag
    _facts: dict[type[Fact], Fact] = attrs.field(factory=dict)
    #: why the run is a what-if of the spec's budgets (an overrun is then a warning), or None:
    #: the run is a gate (`pipeline.Options.what_if`, pgraph.plan.budgets)
    what_if: str | None = None
    #: the id of the layer loop (`layer_loop_of`), or None (set from `program`)
    layer_loop: int | None = attrs.field(init=False)
    _rep: int | None = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.layer_loop = layer_loop_of(self.program)
        self._rep = None
        if self.layer_loop is not None:
            self._rep = representative_iteration(self.program.loops[self.layer_loop].axis)

    # ---- facts ----
    def put(self, fact: Fact) -> None:
        """Record `fact` (one per class; a second put of a class replaces the first)."""
        self._facts[type(fact)] = fact

    def get(self, cls: type[F]) -> F:
        """The fact of class `cls`; FactMissing when no pass has produced it yet."""
        fact = self._facts.get(cls)
        if fact is None:
            raise FactMissing(f"fact {cls.__name__} was read before any pass produced it")
        return fact  # type: ignore[return-value]

    def has(self, cls: type[Fact]) -> bool:
        """True when a pass has produced a fact of class `cls`."""
        return cls in self._facts

    # ---- the layer loop ----
    def representative_iteration(self) -> int | None:
        """The layer-loop iteration standing for 'one layer' (the second when there are two)."""
        return self._rep

    def in_layer(self, inst: Instance) -> bool:
        """True when `inst` (not an alloc task) belongs to the representative iteration of the layer loop."""
        if self._rep is None or inst.kind is TaskKind.ALLOC:
            return False
        return bool(inst.loops) and inst.loops[0] == self.layer_loop and inst.iters[0] == self._rep

    def reported(self, inst: Instance) -> bool:
        """Instances per-layer reports show: the representative layer, plus tasks outside the layer
        loop (of another loop, such as copy_hidden's one-trip loop, its first iteration)."""
        if self.in_layer(inst):
            return True
        if inst.kind is TaskKind.ALLOC or self.layer_loop in inst.loops:
            return False
        return all(it == self.program.loops[lid].axis.lo for lid, it in zip(inst.loops, inst.iters))


def layer_share(plan: Plan, inst: Instance) -> int:
    """How many real tasks `inst` stands for within one layer (nested window-expanded loops)."""
    lid = plan.layer_loop
    if lid is None or lid not in inst.loops:
        return inst.weight
    rep = plan.representative_iteration()
    return inst.weight // plan.graph.loop_weight(lid, rep if rep is not None else 0)


class Pass:
    """A planner pass: a kebab-case `name`, the fact classes it reads and writes, one `run`."""

    name: ClassVar[str] = ""
    requires: ClassVar[tuple[type[Fact], ...]] = ()
    produces: ClassVar[tuple[type[Fact], ...]] = ()

    def run(self, plan: Plan) -> None:  # pragma: no cover - interface
        """Analyse `plan`, appending diagnostics to `plan.bag` and facts with `plan.put`."""
        raise NotImplementedError


class ProgramCheck:
    """A check of the resolved Program, run before expansion: a kebab-case `name` and one `run`."""

    name: ClassVar[str] = ""

    def run(self, program: Program, bag: DiagnosticBag) -> None:  # pragma: no cover - interface
        """Append the diagnostics of this rule family to `bag`."""
        raise NotImplementedError


def fact_json(value: Any) -> Any:
    """A fact (or part of one) as JSON-ready data: attrs records as dicts, sets sorted."""
    if attrs.has(type(value)):
        return {k: fact_json(v) for k, v in attrs.asdict(value, recurse=False).items()}
    if isinstance(value, dict):
        return {str(k): fact_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [fact_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(fact_json(v) for v in value)
    return value

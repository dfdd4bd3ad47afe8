"""PG121: the spec's `budget` statements against the plan's figures (pgraph.plan.figures).

A budget turns a regression into an error, so that CI fails when a refactor of the spec makes
the graph worse: more submits per layer, more edges, more live tasks on ring 3, a longer
critical path. Budgets bound the spec as written: under -D, --config or --layers (a what-if,
another graph) an exceeded budget is a PG121 note. `sim_us` budgets need the scheduler simulation and are checked by `pgraph sim`
(pgraph.commands.sim), which reports them with the same code.
"""

from __future__ import annotations

from pgraph.diagnostics import DiagnosticBag, Severity
from pgraph.ir import program as ir
from pgraph.kinds import BUDGET_FIGURES
from pgraph.plan.base import Pass, Plan
from pgraph.plan.counts import Counts
from pgraph.plan.critical_path import CriticalPath
from pgraph.plan.figures import figures
from pgraph.plan.rings import RingTable

__all__ = ["BudgetsPass", "check_budget"]

#: Figures a plan pass cannot compute (the simulator is a backend): checked by their command.
SIMULATED = frozenset({"sim_us"})


def check_budget(budget: ir.Budget, value: int, bag: DiagnosticBag, overridden: tuple[str, ...] = ()) -> None:
    """PG121 when `value` of `budget.figure` is over `budget.limit`: an error for the spec as
    written, a note when -D/--config/--layers overrode constants (`overridden`): a what-if is
    another graph, which the spec's budgets do not bound."""
    if value <= budget.limit:
        return
    meaning, unit = BUDGET_FIGURES[budget.figure]
    message = (f"{budget.figure} is {value:,} {unit}, over its budget of {budget.limit:,} "
               f"(+{value - budget.limit:,}; {meaning})")
    if overridden:
        bag.add("PG121", message + f"; not enforced: the run overrides {', '.join(overridden)}", budget.span,
                severity=Severity.NOTE, hint="budgets bound the spec as written; without the overrides it is an error")
        return
    bag.add("PG121", message, budget.span,
            hint=f"find what grew (`pgraph stats`, `pgraph plan`), or raise the budget to {value:,} if the "
                 "growth is intended")


class BudgetsPass(Pass):
    """PG121 for each `budget` whose figure the plan exceeds (`sim_us` aside: see the module)."""

    name = "budgets"
    requires = (Counts, RingTable, CriticalPath)

    def run(self, plan: Plan) -> None:
        todo = [b for b in plan.program.budgets if b.figure not in SIMULATED]
        if not todo:
            return
        values = figures(plan)
        for b in todo:
            check_budget(b, values[b.figure], plan.bag, plan.program.overridden)

"""PG121: the spec's `budget` statements against the plan's figures (pgraph.plan.figures).

A budget turns a regression into an error, so that CI fails when a refactor of the spec makes
the graph worse: more submits per layer, more edges, more live tasks on ring 3, a longer
critical path. The rule (docs/language.md §13.1): a budget is *enforced* (PG121 is an error)
only where the run is a gate of the spec as written — `pgraph check`, `pgraph build`, and
`pgraph plan` unless `--no-budgets` (`sim --enforce-budgets` too). Every other run is a
what-if, and an overrun is a PG121 *warning*, printed, that does not fail it: the what-if
commands (`sim`, `diff`, `stats`, `export`, `run`: `Plan.what_if` says which), and any run under
-D, --config or --layers (another graph than the one the budgets were written for). `sim_us`
budgets need the scheduler simulation and are checked by `pgraph sim` (pgraph.commands.sim),
which reports them with the same code and the same rule.
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

__all__ = ["BudgetsPass", "blocking_errors", "check_budget"]

#: Figures a plan pass cannot compute (the simulator is a backend): checked by their command.
SIMULATED = frozenset({"sim_us"})


def check_budget(budget: ir.Budget, value: int, bag: DiagnosticBag, overridden: tuple[str, ...] = (),
                 what_if: str | None = None) -> None:
    """PG121 when `value` of `budget.figure` is over `budget.limit`: an error when the run is a
    gate of the spec as written; a warning when it is a what-if — `what_if` says why (the
    command, e.g. "`pgraph sim` is a what-if"), or -D/--config/--layers overrode the constants
    `overridden` (another graph, which the spec's budgets do not bound)."""
    if value <= budget.limit:
        return
    meaning, unit = BUDGET_FIGURES[budget.figure]
    message = (f"{budget.figure} is {value:,} {unit}, over its budget of {budget.limit:,} "
               f"(+{value - budget.limit:,}; {meaning})")
    if what_if is not None or overridden:
        why = what_if if what_if is not None else f"the run overrides {', '.join(overridden)}"
        bag.add("PG121", message + f"; not enforced: {why}", budget.span, severity=Severity.WARNING,
                hint="budgets are enforced only by `pgraph check`, `build` and `plan` on the spec as written "
                     "(docs/language.md §13.1); a what-if reports them")
        return
    bag.add("PG121", message, budget.span,
            hint=f"find what grew (`pgraph stats`, `pgraph plan`), or raise the budget to {value:,} if the "
                 "growth is intended")


def blocking_errors(bag: DiagnosticBag) -> bool:
    """Whether `bag` holds an error other than a budget overrun (PG121): a what-if runs on a spec
    whose only errors are budget overruns (`pgraph sim --enforce-budgets` plans as a gate)."""
    return bool(bag.pending) or any(d.level is Severity.ERROR and d.code != "PG121" for d in bag.items)


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
            check_budget(b, values[b.figure], plan.bag, plan.program.overridden, plan.what_if)

"""PG031: an expansion too large to enumerate, caught before anything is expanded."""

from __future__ import annotations

from pgraph.diagnostics import DiagnosticBag
from pgraph.expand.work import MAX_EXPANSION_WORK, MAX_PROGRAM_TASKS, expansion_work, program_tasks
from pgraph.ir.program import Program
from pgraph.ir.queries import Window


def check_expansion_size(program: Program, window: Window, bag: DiagnosticBag) -> bool:
    """PG031 when expanding `program` under `window` would exceed MAX_EXPANSION_WORK; True if so."""
    tasks = program_tasks(program)
    if sum(tasks.values()) > MAX_PROGRAM_TASKS:
        worst = max(program.dispatches, key=lambda d: tasks[d.name])
        bag.add("PG031", f"this program submits about {_n(sum(tasks.values()))} tasks in all, more than the "
                f"{_n(MAX_PROGRAM_TASKS)} pgraph follows through its critical path and counts; '{worst.name}' "
                f"alone submits {_n(tasks[worst.name])}", worst.span,
                hint="check the loop bounds and the constants they use; the 40-layer Qwen3-14B prefill "
                "before its regrouping submitted 351,050 tasks")
        return True
    work = expansion_work(program, window)
    total = sum(work.values())
    if total <= MAX_EXPANSION_WORK:
        return False
    worst = max(program.dispatches, key=lambda d: work[d.name])
    bag.add("PG031", f"expanding this program takes about {_n(total)} region evaluations, more than the "
            f"{_n(MAX_EXPANSION_WORK)} pgraph enumerates; '{worst.name}' alone takes {_n(work[worst.name])} "
            f"({_n(worst.task_count)} task(s) x {_n(max(worst.block_count, 1))} block(s) per iteration)",
            worst.span, hint="check the index ranges and loop bounds and the constants they use; "
            "the 40-layer Qwen3-14B decode program needs about 190,000 even fully expanded")
    return True


def _n(value: int) -> str:
    """A count as the message prints it: digits grouped, or 1.26e+309 past 10**15 (Decimal: a
    float cannot hold every int the constants can make)."""
    if value < 10**15:
        return f"{value:,}"
    from decimal import Decimal  # only for a huge count (~2 ms of import at start-up otherwise)

    return f"{Decimal(value):.2e}"

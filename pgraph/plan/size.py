"""PG031: an expansion too large to enumerate, caught before anything is expanded."""

from __future__ import annotations

from pgraph.diagnostics import DiagnosticBag
from pgraph.expand.work import MAX_EXPANSION_WORK, expansion_work
from pgraph.ir.program import Program
from pgraph.ir.queries import Window


def check_expansion_size(program: Program, window: Window, bag: DiagnosticBag) -> bool:
    """PG031 when expanding `program` under `window` would exceed MAX_EXPANSION_WORK; True if so."""
    work = expansion_work(program, window)
    total = sum(work.values())
    if total <= MAX_EXPANSION_WORK:
        return False
    worst = max(program.dispatches, key=lambda d: work[d.name])
    bag.add("PG031", f"expanding this program takes about {total:,} region evaluations, more than the "
            f"{MAX_EXPANSION_WORK:,} pgraph enumerates; '{worst.name}' alone takes {work[worst.name]:,} "
            f"({worst.task_count:,} task(s) x {max(worst.block_count, 1):,} block(s) per iteration)",
            worst.span, hint="check the index ranges and loop bounds and the constants they use; "
            "the Qwen3-14B decode program needs about 380,000 even fully expanded")
    return True

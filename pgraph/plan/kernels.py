"""Checks of kernel tables and the calls that index them (PG039).

A `kernels T = [A, B, ...]` table lets one declaration call a different kernel per task
(pypto outlines one function per call site, so the five residual_rms_cast slices of the
Qwen3-14B decode are five kernels with one body and five func ids, docs/upstream.md §8.6). Every
member must take the same arguments (the call is bound once, against the first member), and
every task's index must pick a member.
"""

from __future__ import annotations

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.expr import EvalError
from pgraph.findings import BlockKernelIndex, KernelTakesNoIndex, TableNeedsIndex
from pgraph.ir.program import Kernel, Program
from pgraph.ir.queries import axis_values, kernel_at
from pgraph.plan.base import ProgramCheck

#: Most (loop x task) index combinations evaluated per indexed call.
MAX_EVALUATIONS = 200_000


def signature(k: Kernel) -> tuple[object, ...]:
    """What a call binds against: the core and each parameter's direction, dtype and shape."""
    return (k.core, tuple((p.direction, p.dtype, p.shape) for p in k.params))


class KernelTablesCheck(ProgramCheck):
    """PG039: members of one table with different signatures; an index outside the table."""

    name = "kernel-tables"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        p = program
        for t in p.kernel_tables.values():
            first = p.kernels[t.members[0]]
            for m in t.members[1:]:
                k = p.kernels[m]
                if signature(k) != signature(first):
                    bag.add("PG039", f"kernels table '{t.name}' mixes signatures: '{m}' does not take the arguments "
                            f"of '{first.name}'", t.span,
                            [Note(f"'{first.name}' declared here", first.span), Note(f"'{m}' declared here", k.span)],
                            hint=f"a table's kernels share one call; declare '{m}' as `kernel {m} = {first.name}` "
                                 "(same core and parameters) or give it the same parameters")
                    break
        for d in p.dispatches:
            if d.kernel_table is None or d.kernel_index is None:
                continue
            axes = (*(p.loops[lid].axis for lid in d.loops), *d.task_axes)
            count = 1
            for a in axes:
                count *= a.size
            if count > MAX_EVALUATIONS:
                continue
            size = len(p.kernel_tables[d.kernel_table].members)
            for values in axis_values(axes):
                env = {a.var: v for a, v in zip(axes, values)}
                try:
                    kernel_at(p, d, env)
                except (IndexError, EvalError):
                    where = ", ".join(f"{k} = {v}" for k, v in env.items())
                    span = d.kernel_index.span
                    bag.add("PG039", f"the kernel index of '{d.name}' leaves table '{d.kernel_table}' (0..{size - 1}) "
                            f"at {where}", span, [Note(f"'{d.kernel_table}' declared here",
                                                       p.kernel_tables[d.kernel_table].span)],
                            hint="the index must pick a member for every task: list one kernel per task index")
                    break


# ---- PG039 met by lowering while it binds a call (handed over: pgraph.findings) ----

def table_needs_index(f: TableNeedsIndex, bag: DiagnosticBag) -> None:
    """PG039: a call of a kernels table must pick a member."""
    bag.add("PG039", f"'{f.table}' is a kernels table; the call must pick a kernel with an index", f.span,
            [Note(f"'{f.table}' declared here", f.declared), *f.notes],
            hint=f"write `call {f.table}[INDEX](...)` with an index of the task (0..{f.size - 1})")


def block_kernel_index(f: BlockKernelIndex, bag: DiagnosticBag) -> None:
    """PG039: every block of one task runs one kernel, so the index may not use a block index."""
    bag.add("PG039", f"the kernel index of '{f.table}' uses SPMD block index '{f.var}': every block of one task "
            "runs the same kernel", f.span, f.notes,
            hint="index the table with task indices and loop variables only (one kernel per task)")


def kernel_takes_no_index(f: KernelTakesNoIndex, bag: DiagnosticBag) -> None:
    """PG039: an index on a call of a single kernel."""
    bag.add("PG039", f"'{f.kernel}' is a kernel, not a kernels table; it takes no index", f.span, f.notes,
            hint=f"drop the index, or declare `kernels TABLE = [{f.kernel}, ...]` and call `TABLE[i]`")
